package fleet

// NoDrainPlantable says whether this build takes Config.NoDrain.
var NoDrainPlantable = noDrainPlantable

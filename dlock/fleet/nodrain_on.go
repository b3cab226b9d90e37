//go:build zkstock_lies

package fleet

// A build with the zkstock_lies tag (the nemesis's lying replicas) may plant Config.NoDrain.
func init() { noDrainPlantable = true }

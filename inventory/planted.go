package inventory

// plantedUnsafeFlush makes checkGalera accept innodb_flush_log_at_trx_commit other than 1: a lie
// planted for the nemesis's control of durable commits (a power failure of every node must then
// lose acknowledged orders, and the nemesis must catch it). Only PlantUnsafeFlush sets it, which
// only a build with the zkstock_lies tag has (planted_on.go).
var plantedUnsafeFlush bool

package inventory

// plantedUnsafeFlush makes checkGalera accept innodb_flush_log_at_trx_commit other than 1: a lie
// planted for the nemesis's control of durable commits (a power failure of every node must then
// lose acknowledged orders, and the nemesis must catch it). Only PlantUnsafeFlush sets it, which
// only a build with the zkstock_lies tag has (planted_on.go).
var plantedUnsafeFlush bool

// plantedStaleReads makes checkGalera accept a session whose wsrep_sync_wait lacks the bit for
// reads (a DSN that sets wsrep_sync_wait=0): the lie of the nemesis's control of causal reads,
// which must catch a stale read. Only PlantStaleReads sets it (planted_on.go, zkstock_lies).
var plantedStaleReads bool

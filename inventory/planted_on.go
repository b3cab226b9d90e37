//go:build zkstock_lies

package inventory

// PlantUnsafeFlush makes this process accept a Galera node whose innodb_flush_log_at_trx_commit
// is not 1 (order's ZKSTOCK_LIE=unsafe-flush): the nemesis's control of durable commits. No build
// without the zkstock_lies tag has it.
func PlantUnsafeFlush() { plantedUnsafeFlush = true }

// PlantStaleReads makes this process accept Galera sessions without causal reads (a DSN with
// wsrep_sync_wait=0; order's ZKSTOCK_LIE=stale-reads): the nemesis's control of causal reads. No
// build without the zkstock_lies tag has it.
func PlantStaleReads() { plantedStaleReads = true }

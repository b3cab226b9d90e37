//go:build zkstock_lies

package inventory

// PlantUnsafeFlush makes this process accept a Galera node whose innodb_flush_log_at_trx_commit
// is not 1 (order's ZKSTOCK_LIE=unsafe-flush): the nemesis's control of durable commits. No build
// without the zkstock_lies tag has it.
func PlantUnsafeFlush() { plantedUnsafeFlush = true }

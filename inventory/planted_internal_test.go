//go:build !zkstock_lies

package inventory

import "testing"

// A build without the zkstock_lies tag (every build but the nemesis's controls) accepts no unsafe
// flush setting: nothing can plant it.
func TestNoUnsafeFlushWithoutTheTag(t *testing.T) {
	if plantedUnsafeFlush {
		t.Error("a build without the tag accepts innodb_flush_log_at_trx_commit other than 1")
	}
	if plantedStaleReads {
		t.Error("a build without the tag accepts wsrep_sync_wait without causal reads")
	}
}

package order

import (
	"fmt"
	"strings"
)

// plantedLies are mistakes planted on purpose, as the nemesis's controls: each makes the service
// lie in one way that the checker must catch. Only a build with the zkstock_lies tag plants any
// (planted_on.go, from ZKSTOCK_LIE); every other build plants none, whatever its environment.
type plantedLies struct {
	// soldOutCache answers a purchase of a SKU suspected of being sold out 409 out_of_stock from
	// the suspicion alone, without reading the stock: a cached sold-out flag.
	soldOutCache bool
	// unconfirmedNotSold answers a change whose COMMIT went unanswered 503 storage_unavailable,
	// "nothing was sold", whatever the database says became of it.
	unconfirmedNotSold bool
	// switchNoDrain switches the fleet's mode without the barrier, and each replica takes the new
	// mode at once, its changes under the old one still running (fleet.Config.NoDrain).
	switchNoDrain bool
	// unsafeFlush accepts a Galera node whose innodb_flush_log_at_trx_commit is not 1, which
	// inventory otherwise refuses (inventory.PlantUnsafeFlush, in a zkstock_lies build only): a
	// commit acknowledged by every node may then be lost when they all lose power at once.
	unsafeFlush bool
	// staleReads accepts Galera sessions whose wsrep_sync_wait lacks the bit for reads (a DSN
	// with wsrep_sync_wait=0), which inventory otherwise refuses (inventory.PlantStaleReads, in a
	// zkstock_lies build only): a read through a node other than the last writer's may miss a
	// commit the cluster acknowledged.
	staleReads bool
	// noKeyHold holds no key in flight (sale.Lies.NoKeyHold): a retry runs beside the attempt it
	// retries and may be told "nothing was sold" while that attempt still commits.
	noKeyHold bool
}

// planted is this process's planted lies; zero unless built with zkstock_lies.
var planted plantedLies

// plantedTag says whether this build has the zkstock_lies tag.
var plantedTag bool

// The names ZKSTOCK_LIE takes, comma-separated.
const (
	LieSoldOutCache       = "soldout-cache"
	LieUnconfirmedNotSold = "unconfirmed-not-sold"
	LieSwitchNoDrain      = "switch-no-drain"
	LieUnsafeFlush        = "unsafe-flush"
	LieStaleReads         = "stale-reads"
	LieNoKeyHold          = "no-key-hold"
)

// parseLies reads ZKSTOCK_LIE's value.
func parseLies(s string) (plantedLies, error) {
	var l plantedLies
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case LieSoldOutCache:
			l.soldOutCache = true
		case LieUnconfirmedNotSold:
			l.unconfirmedNotSold = true
		case LieSwitchNoDrain:
			l.switchNoDrain = true
		case LieUnsafeFlush:
			l.unsafeFlush = true
		case LieStaleReads:
			l.staleReads = true
		case LieNoKeyHold:
			l.noKeyHold = true
		default:
			return plantedLies{}, fmt.Errorf("ZKSTOCK_LIE: unknown lie %q (known: %s, %s, %s, %s, %s, %s)", name, LieSoldOutCache, LieUnconfirmedNotSold, LieSwitchNoDrain, LieUnsafeFlush, LieStaleReads, LieNoKeyHold)
		}
	}
	return l, nil
}

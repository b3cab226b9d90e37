package inventory

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Issuer names the lock service that issued a fencing token. Tokens are only ever compared with
// tokens of the same issuer: each issuer keeps its own mark on the product (the highest token of
// that issuer written so far), and the fence admits a holder whose token is at least its issuer's
// mark. To inventory an issuer is a label; it talks to neither service.
//
// Why one token space holds across issuers and mode switches. Each issuer's tokens grow with the
// order in which it hands its lock on (ZooKeeper: the lock path's czxid plus the node's sequence;
// Redis: a counter incremented with the acquisition). Tokens of different issuers cannot be
// compared — a ZooKeeper token and a Redis counter measure different things, and no number of
// Redis sales may put a ZooKeeper holder's token below the fence — so the fence does not compare
// them. Instead every fenced write gets the pair (epoch, token), where epoch counts the times the
// issuer of the latest write changed (claimFence moves it in the same statement):
//   - the pairs of successive writes never decrease (a write of the same issuer keeps the epoch
//     and carries a token at least its predecessor's, equal for one holder writing twice; a write
//     of another issuer raises the epoch), so the writes of a SKU are ordered in one token space,
//     whatever the mode;
//   - a holder is refused when a newer holder of its own issuer has written (its token is below
//     its issuer's mark): that holder's lock was handed on, so it is stale. A rightful holder of
//     any issuer, after any sequence of switches on any replica, is never refused, because no
//     write of another issuer touches its issuer's mark.
//
// What the fence does not do is compare a holder with another issuer's holders: a ZooKeeper
// holder that paused while the mode moved to Redis is admitted when it wakes, if no ZooKeeper
// holder wrote meanwhile. Holders of two issuers do not hold at once in a healthy fleet (a switch
// of the fleet's mode is a barrier: order's fleet.go, sale's ticket.go); a paused one that wakes past the barrier
// is what the claim's row lock, taken before the first read, keeps apart: it runs the two
// transactions one after the other.
type Issuer uint8

const (
	// IssuerZooKeeper is the default: its mark is the products.fence_token column.
	IssuerZooKeeper Issuer = iota
	// IssuerRedis is the redis-fenced mode's token counter: products.redis_fence_token.
	IssuerRedis
)

// Issuers lists the issuers, for admin tools.
var Issuers = []Issuer{IssuerZooKeeper, IssuerRedis}

func (i Issuer) String() string {
	switch i {
	case IssuerZooKeeper:
		return "zookeeper"
	case IssuerRedis:
		return "redis"
	}
	return fmt.Sprintf("Issuer(%d)", int(i))
}

// ParseIssuer reads an issuer's name.
func ParseIssuer(s string) (Issuer, error) {
	for _, i := range Issuers {
		if i.String() == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("inventory: unknown token issuer %q (want zookeeper or redis)", s)
}

// column is the products column that holds the issuer's mark.
func (i Issuer) column() (string, error) {
	switch i {
	case IssuerZooKeeper:
		return "fence_token", nil
	case IssuerRedis:
		return "redis_fence_token", nil
	}
	return "", fmt.Errorf("inventory: unknown token issuer %d", int(i))
}

// Fence is what a fenced change carries for one SKU: its lock's token and who issued it.
type Fence struct {
	Issuer Issuer
	Token  int64
}

// Mark is the highest token of the issuer written to the product so far.
func (p Product) Mark(i Issuer) int64 {
	if i == IssuerRedis {
		return p.RedisFenceToken
	}
	return p.FenceToken
}

// LowerFence sets the issuer's mark to token on every product whose mark is higher (or on one
// product, when sku is not empty), and returns how many it lowered. It is for one situation only:
// the lock service's data was wiped (ZooKeeper's data directory, Redis without persistence after
// a restart) and its new tokens start below the old mark, so that every holder is refused.
// It is dangerous: a holder from before the wipe that is still in flight (a paused process, a
// partitioned replica) carries a token above the new mark and would be admitted beside the new
// holders. Lower a fence only after every process that held the old service's locks is stopped or
// known to have given up. The epoch moves, so the writes after it still order after the writes
// before it.
func (s *Store) LowerFence(ctx context.Context, issuer Issuer, token int64, sku string) (int64, error) {
	col, err := issuer.column()
	if err != nil {
		return 0, err
	}
	q := s.db.WithContext(ctx).Model(&Product{}).Where(col+" > ?", token)
	if sku != "" {
		q = q.Where("sku = ?", sku)
	}
	r := q.Updates(map[string]any{col: token, "fence_epoch": gorm.Expr("fence_epoch + 1"), "fence_issuer": ""})
	if r.Error != nil {
		return 0, fmt.Errorf("inventory: lower the %s fence: %w", issuer, r.Error)
	}
	return r.RowsAffected, nil
}

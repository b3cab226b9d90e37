package inventory

import (
	"context"
	"fmt"
)

// The pool's door: the statements made for one change outside its turn of a lock (its key's
// holding and look-ups, a product's read) and the key releases and sweeps hold at most MaxOpen -
// Reserved of the pool's connections at once, first come, first served, so that a lock's
// holder, whom the whole queue behind it waits for, never waits behind them for a connection. A
// flash sale's buyers each hold a key before they queue. The turns' statements and the reads that
// answer many buyers at once (the stocks and keys the sold-out poller reads, Stocks) pass by it.

// atDoor waits, until ctx ends, for a place at the door; done gives it back.
func (s *Store) atDoor(ctx context.Context) (done func(), _ error) {
	if s.door == nil {
		return func() {}, nil
	}
	select {
	case s.door <- struct{}{}:
		return func() { <-s.door }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("inventory: waiting for one of the pool's connections: %w", context.Cause(ctx))
	}
}

// reservedOf is the connections of a pool of maxOpen kept for the turns: reserved when set, else
// a fifth, at least one when the pool has more than one.
func reservedOf(maxOpen, reserved int) int {
	if reserved > 0 {
		return min(reserved, maxOpen-1)
	}
	if maxOpen < 2 {
		return 0
	}
	return max(1, maxOpen/5)
}

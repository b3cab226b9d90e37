package inventory

import (
	"context"
	"errors"
	"fmt"
)

// The pool's door: the key holds (HoldKey), one per keyed change and made before it is admitted,
// take at most MaxOpen - Reserved of the pool's connections at once, first come, first served,
// so that a flash sale's buyers holding their keys never take every connection from the lock's
// holders, whom the whole queue waits for. Every other statement passes by it.

// ErrPoolBusy: a key hold waited for a place at the door until its context ended; nothing was
// sent to the database.
var ErrPoolBusy = errors.New("inventory: the connections for key holds are all in use")

// atDoor waits, until ctx ends, for a place at the door; done gives it back.
func (s *Store) atDoor(ctx context.Context) (done func(), _ error) {
	if s.door == nil {
		return func() {}, nil
	}
	select {
	case s.door <- struct{}{}:
		return func() { <-s.door }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrPoolBusy, context.Cause(ctx))
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

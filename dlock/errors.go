package dlock

import "errors"

var (
	// ErrLocked is TryLock's answer when the lock is held or has waiters.
	ErrLocked = errors.New("dlock: lock is held or has waiters")
	// ErrLost means a holding can no longer be trusted: the session expired or stayed disconnected
	// too long, or the lock node was deleted by someone else. Stop the critical section.
	ErrLost = errors.New("dlock: lock lost")
	// ErrClosed is returned by every call on a closed Client.
	ErrClosed = errors.New("dlock: client closed")
	// ErrNoSession is the answer of a call that does not wait for a session (TryLock; Unlock's
	// delete, which then goes on in the background) while the client has none.
	ErrNoSession = errors.New("dlock: no ZooKeeper session")
	// ErrDeadlock is the answer to a write lock asked for with a context that carries a read
	// lease of the same path: the writer would wait for its own reader.
	ErrDeadlock = errors.New("dlock: write lock asked for while holding a read lease of the same path")
)

package dlock

import "context"

// Locker is what every exclusive recipe here offers: Mutex, and the teaching variants SpinLock,
// NodeWatchLock and HerdLock, which show what the fair recipe avoids. All of them hand out the same
// kind of Lease.
type Locker interface {
	Lock(ctx context.Context) (*Lease, error)
}

var (
	_ Locker = (*Mutex)(nil)
	_ Locker = (*SpinLock)(nil)
	_ Locker = (*NodeWatchLock)(nil)
	_ Locker = (*HerdLock)(nil)
)

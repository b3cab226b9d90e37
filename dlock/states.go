package dlock

import "sync"

// State is a change in a Client's connection to ZooKeeper, as Curator's ConnectionState and
// kazoo's listeners report them.
type State int

const (
	// StateConnected: the first session is established.
	StateConnected State = iota + 1
	// StateSuspended: the connection is gone or silent. The session may still be alive and leases
	// are still held, until their Lost closes; stop starting new work under them.
	StateSuspended
	// StateReconnected: requests flow again, with the same session (leases intact unless
	// StateLost came first) or with a new one after StateLost.
	StateReconnected
	// StateLost: every lease of the session is lost (the session expired, or nothing proved it
	// alive for nine tenths of its timeout). The client goes on trying to reconnect.
	StateLost
	// StateClosed: Close was called. The last state a listener receives.
	StateClosed
)

func (s State) String() string {
	switch s {
	case StateConnected:
		return "connected"
	case StateSuspended:
		return "suspended"
	case StateReconnected:
		return "reconnected"
	case StateLost:
		return "lost"
	case StateClosed:
		return "closed"
	}
	return "unknown"
}

// WithStateListener calls f with every change of the client's connection state, in order. f runs
// on a goroutine of its own that the client starts for it, never on go-zookeeper's event loop and
// never twice at once: a slow f delays later calls to f, never the client. After StateClosed it
// is not called again.
func WithStateListener(f func(State)) Option { return func(c *config) { c.listener = f } }

// notifier hands states to the listener in order, without ever blocking the state machine.
type notifier struct {
	f     func(State)
	mu    sync.Mutex
	queue []State
	wake  chan struct{}
	done  chan struct{}
}

func newNotifier(f func(State)) *notifier {
	n := &notifier{f: f, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go n.run()
	return n
}

func (n *notifier) send(s State) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.queue = append(n.queue, s)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for range n.wake {
		n.mu.Lock()
		batch := n.queue
		n.queue = nil
		n.mu.Unlock()
		for _, s := range batch {
			n.f(s)
			if s == StateClosed {
				return
			}
		}
	}
}

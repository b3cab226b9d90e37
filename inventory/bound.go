package inventory

import "time"

// commitIdleTimeout is the session wait_timeout Open asks for on every connection: a server that
// has heard nothing from a connection for this long ends it, and rolls back its open transaction.
// The server may apply another; CommitBound counts on the one it reports.
const commitIdleTimeout = 10 * time.Second

// CommitBound is how long after a COMMIT was sent it may still apply when its answer was lost and
// the server was not asked to end it (EndTransaction). A COMMIT reaches the server while the
// connection lives, or never: the server ends a connection it has not heard from within its
// wait_timeout (the longest any session of the pool reported, read back from the server, not
// taken from the DSN), which rolls an open transaction back, and a COMMIT that arrives later
// meets a closed connection. A second covers the server's own scheduling. It does not bound a
// COMMIT that reached the server and is stuck executing there (behind BACKUP STAGE BLOCK_COMMIT,
// say): only ending the transaction, or seeing its connection gone, does.
func (s *Store) CommitBound() time.Duration {
	return max(time.Duration(s.waitTimeout.Load())*time.Second, commitIdleTimeout) + time.Second
}

// ReadTimeout is the longest a connection waits for one statement's answer (the DSN's readTimeout,
// or Open's default): a round trip of a transaction, its COMMIT's included, ends within it.
func (s *Store) ReadTimeout() time.Duration { return s.readTimeout }

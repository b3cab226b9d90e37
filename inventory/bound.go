package inventory

import "time"

// commitIdleTimeout is the session wait_timeout Open gives every connection: a server that has
// heard nothing from a connection for this long ends it, and rolls back its open transaction.
const commitIdleTimeout = 10 * time.Second

// CommitBound is how long after a COMMIT was sent it may still apply when its answer was lost.
// The COMMIT reaches the server while the connection lives, or never: the server ends a
// connection it has not heard from within commitIdleTimeout, which rolls an open transaction
// back, and a COMMIT that arrives later meets a closed connection. A second covers the server's
// own scheduling. A lock kept until then cannot be handed to a holder whose read the COMMIT could
// still overwrite.
func (s *Store) CommitBound() time.Duration { return commitIdleTimeout + time.Second }

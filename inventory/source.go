package inventory

// Source is where an operation takes the Store it runs on: one server's Store, which is its own
// source, or a Cluster, which hands out its writer's. A caller takes the Store anew for each
// operation or transaction (Store), so that the next one goes where the source now points, and
// tells the source of an operation that failed (Report), so that a Cluster checks its writer at
// once rather than at its next tick.
type Source interface {
	// Store is the Store for one operation or one transaction.
	Store() *Store
	// StoreAt is the Store at addr (ServerConn.Addr), the only one that can settle a transaction
	// whose COMMIT went unanswered there: it alone can end the transaction, and its locking reads
	// wait for it, where another node's would not. False when the source has none open there.
	StoreAt(addr string) (*Store, bool)
	// Report tells the source that an operation on its Store failed with err; nil is ignored.
	Report(err error)
}

var (
	_ Source = (*Store)(nil)
	_ Source = (*Cluster)(nil)
)

// Store is s itself: one server is its own source.
func (s *Store) Store() *Store { return s }

// StoreAt is s when addr is s's address, or not known (""): a connection of s's pool. A
// connection made at another address is not s's to settle (onRunOf refuses it too).
func (s *Store) StoreAt(addr string) (*Store, bool) {
	if addr != "" && addr != s.addr {
		return nil, false
	}
	return s, true
}

// Report does nothing: one server has nowhere else to go.
func (s *Store) Report(error) {}

package dlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// A follower answers reads and pings on its own and passes its sessions' touches to the leader
// only in its answers to the leader's pings. Cut off from its leader it goes on answering clients
// for up to syncLimit × tickTime, while the leader, hearing nothing of the session, expires it and
// hands the lock on. The holder's Lost must close before the other client holds all the same,
// whether the client knows the servers' tick or assumes the longest one.
//
// Two holders, one of each, hold two locks through the same follower, and one cut serves both.
func TestLostClosesBeforeAnotherHoldsWhenTheFollowerIsCutOff(t *testing.T) {
	const session = 2 * time.Second
	ens := startProxiedEnsemble(t)
	raw := ens.rawConn(t)

	type result struct {
		lostAt     time.Time
		heldAt     time.Time
		holderLost bool // whether the holder's Lost was closed when the other got the lock
		err        error
	}
	type holding struct {
		name   string
		held   *dlock.Lease
		lost   chan time.Time
		next   chan result
		leases chan *dlock.Lease
	}
	cases := []struct {
		name string
		opts []dlock.Option
	}{
		{"tick assumed", nil},
		{"tick known", []dlock.Option{dlock.WithServerTick(ensembleTick)}},
	}
	var holdings []*holding
	for _, tc := range cases {
		holder := connect(t, []string{ens.follower}, append([]dlock.Option{dlock.WithSessionTimeout(session)}, tc.opts...)...)
		if got := holder.SessionTimeout(); got != session {
			t.Fatalf("granted session timeout %v, want %v", got, session)
		}
		path := testenv.UniquePath(t)
		held, err := dlock.NewMutex(holder, path).Lock(ctxTimeout(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		h := &holding{name: tc.name, held: held, lost: make(chan time.Time, 1), next: make(chan result, 1), leases: make(chan *dlock.Lease, 1)}
		holdings = append(holdings, h)
		go func() {
			<-held.Lost()
			h.lost <- time.Now()
		}()
		// The waiter talks to the rest of the quorum only.
		other := connect(t, ens.others, dlock.WithSessionTimeout(session))
		go func() {
			l, err := dlock.NewMutex(other, path).Lock(ctxTimeout(t, 30*time.Second))
			r := result{heldAt: time.Now(), err: err}
			select {
			case <-held.Lost():
				r.holderLost = true
			default:
			}
			h.next <- r
			h.leases <- l
		}()
		waitNodes(t, raw, path, 2)
	}
	// Let the holders' sessions reach their steady rhythm (pings, and whatever dlock sends)
	// before the cut, so that the cut falls in the middle of it.
	time.Sleep(session / 2)

	cutAt := time.Now()
	ens.cutFollower()
	t.Logf("partition of the follower's peer links started")

	for _, h := range holdings {
		r := <-h.next
		if r.err != nil {
			t.Errorf("%s: the other client never got the lock: %v", h.name, r.err)
			continue
		}
		l := <-h.leases
		heldAfter := r.heldAt.Sub(cutAt)
		select {
		case r.lostAt = <-h.lost:
		case <-time.After(3 * session):
			t.Errorf("%s: the cut-off holder's Lost never closed (the other client held %v after the cut)", h.name, heldAfter.Round(time.Millisecond))
			continue
		}
		lostAfter := r.lostAt.Sub(cutAt)
		t.Logf("%s: session %v; partition started at 0; holder's Lost closed at %d ms; other client held at %d ms",
			h.name, session, lostAfter.Milliseconds(), heldAfter.Milliseconds())
		if !r.holderLost || lostAfter >= heldAfter {
			t.Errorf("%s: another client held the lock %v after the partition started, while the cut-off holder's Lost closed only %v after it",
				h.name, heldAfter.Round(time.Millisecond), lostAfter.Round(time.Millisecond))
		}
		if !errors.Is(h.held.Err(), dlock.ErrLost) {
			t.Errorf("%s: lease error %v, want ErrLost", h.name, h.held.Err())
		}
		if l.Token() <= h.held.Token() {
			t.Errorf("%s: next holder's token %d is not above the lost holder's %d", h.name, l.Token(), h.held.Token())
		}
		mustUnlock(t, l)
	}
}

// Timing of the test ensemble: a follower cut off from its leader serves its clients for
// syncLimit × tickTime = 12 × 250 ms = 3 s, longer than the test's 2 s sessions, as in production ensembles
// whose sessions are short next to that (the compose file's 2 × 2000 ms with sessions of 4 s or
// less, or the ZooKeeper sample's 5 × 2000 ms).
const ensembleTick = 250 * time.Millisecond

// proxiedEnsemble is the test's own ensemble, its third peer (a follower: it starts last) the one
// cut off from the others.
type proxiedEnsemble struct {
	*testenv.ProxiedEnsemble
	follower string   // client address of the follower the proxies cut off
	others   []string // client addresses of the other two peers
}

func startProxiedEnsemble(t *testing.T) *proxiedEnsemble {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a ZooKeeper ensemble of its own")
	}
	ens := testenv.StartProxiedEnsemble(t, testenv.EnsembleTiming{Tick: ensembleTick, InitLimit: 40, SyncLimit: 12,
		MinSession: 500 * time.Millisecond, MaxSession: 10 * time.Second})
	return &proxiedEnsemble{ProxiedEnsemble: ens, follower: ens.Addrs[2], others: ens.Addrs[:2]}
}

// cutFollower black-holes every link between the follower and its peers.
func (e *proxiedEnsemble) cutFollower() { e.CutOff(2, 0, 1) }

// rawConn is a plain go-zookeeper connection to the peers not cut off.
func (e *proxiedEnsemble) rawConn(t testing.TB) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(e.others, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatalf("zk connect: %v", err)
	}
	t.Cleanup(conn.Close)
	return conn
}

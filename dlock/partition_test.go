package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/tcpproxy"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// Lost must close before ZooKeeper can give the lock to anyone else, whatever shape the partition
// takes: a connection reset, a silent black hole (the connection stays open and nothing arrives),
// and a server that granted a shorter session than the client asked for.
func TestLostClosesBeforeAnotherClientHolds(t *testing.T) {
	cases := []struct {
		name    string
		ask     time.Duration
		granted time.Duration // the standalone test server grants at most 10 s
		cut     func(*tcpproxy.Proxy)
	}{
		{"reset", 2 * time.Second, 2 * time.Second, (*tcpproxy.Proxy).Cut},
		{"black hole", 2 * time.Second, 2 * time.Second, (*tcpproxy.Proxy).Stall},
		{"black hole, 30s asked, 10s granted", 30 * time.Second, 10 * time.Second, (*tcpproxy.Proxy).Stall},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			servers := testenv.ZKServers(t)
			path := testenv.UniquePath(t)
			proxy := tcpproxy.New(t, servers[0])
			h := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(tc.ask))
			if got := h.SessionTimeout(); got != tc.granted {
				t.Fatalf("granted session timeout %v, want %v", got, tc.granted)
			}
			held, err := dlock.NewMutex(h, path).Lock(ctxTimeout(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			lostAt := make(chan time.Time, 1)
			go func() {
				<-held.Lost()
				lostAt <- time.Now()
			}()

			other := connect(t, servers)
			next := make(chan *dlock.Lease, 1)
			go func() {
				l, err := dlock.NewMutex(other, path).Lock(ctxTimeout(t, 3*tc.granted))
				if err != nil {
					t.Errorf("the other client never got the lock: %v", err)
					close(next)
					return
				}
				// The moment another client holds, the cut-off holder must already know.
				select {
				case <-held.Lost():
				default:
					t.Errorf("another client holds %s while the cut-off holder's Lost is still open", l.Node())
				}
				next <- l
			}()
			waitNodes(t, rawConn(t), path, 2)

			cutAt := time.Now()
			tc.cut(proxy)
			l, ok := <-next
			if !ok {
				return
			}
			heldAfter := time.Since(cutAt)
			lost := (<-lostAt).Sub(cutAt)
			if lost > tc.granted {
				t.Errorf("Lost closed %v after the cut, later than the whole session (%v)", lost, tc.granted)
			}
			if !errors.Is(held.Err(), dlock.ErrLost) {
				t.Errorf("lease error %v, want ErrLost", held.Err())
			}
			if l.Token() <= held.Token() {
				t.Errorf("next holder's token %d is not above the lost holder's %d", l.Token(), held.Token())
			}
			t.Logf("session %v: Lost closed %v after the cut, another client held %v after it (%v later)",
				tc.granted, lost.Round(time.Millisecond), heldAfter.Round(time.Millisecond), (heldAfter - lost).Round(time.Millisecond))
			mustUnlock(t, l)
			proxy.Resume()
			proxy.Restore()
			if err := held.Unlock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLost) {
				t.Errorf("unlock of the lost lease: %v, want ErrLost", err)
			}
		})
	}
}

// A black hole that heals well before the session could have expired costs nothing.
func TestShortSilenceKeepsTheLease(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	const session = 3 * time.Second
	c := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(session))
	l, err := dlock.NewMutex(c, testenv.UniquePath(t)).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Stall()
	time.Sleep(session / 4)
	proxy.Resume()
	select {
	case <-l.Lost():
		t.Fatalf("a silence of a quarter of the session lost the lease: %v", l.Err())
	case <-time.After(session):
	}
	mustUnlock(t, l)
}

// Unlock never hangs on an unreachable ZooKeeper: it returns, and the node is deleted once the
// connection is back.
func TestUnlockReturnsDuringABlackHole(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	c := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(10*time.Second))
	path := testenv.UniquePath(t)
	l, err := dlock.NewMutex(c, path).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Stall()
	done := make(chan error, 1)
	go func() { done <- l.Unlock(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, dlock.ErrLost) {
			t.Fatalf("unlock during a black hole: %v, want an error saying the delete goes on", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Unlock hung while ZooKeeper was unreachable")
	}
	if err := l.Unlock(context.Background()); err == nil {
		t.Fatal("a second Unlock did not repeat the first one's answer")
	}
	proxy.Resume()
	raw := rawConn(t)
	eventually(t, 20*time.Second, "the node to be deleted in the background", func() bool { return len(lockNodes(t, raw, path)) == 0 })
}

// TryLock answers at once while the client has no session, instead of waiting for one.
func TestTryLockWithoutSessionAnswersAtOnce(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	c := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(10*time.Second))
	proxy.Cut()
	eventually(t, 10*time.Second, "the client to see the connection gone", func() bool { return !c.Connected() })
	start := time.Now()
	_, err := dlock.NewMutex(c, testenv.UniquePath(t)).TryLock(context.Background())
	if !errors.Is(err, dlock.ErrNoSession) {
		t.Fatalf("trylock without a session: %v, want ErrNoSession", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("trylock without a session took %v", d)
	}
}

// A lease whose session deadline has passed answers ErrLost from Unlock even if nothing else has
// told it yet: the answer must not depend on which goroutine ran first.
func TestUnlockAfterTheDeadlineIsLost(t *testing.T) {
	servers := testenv.ZKServers(t)
	proxy := tcpproxy.New(t, servers[0])
	const session = 2 * time.Second
	c := connect(t, []string{proxy.Addr()}, dlock.WithSessionTimeout(session))
	l, err := dlock.NewMutex(c, testenv.UniquePath(t)).Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Stall()
	time.Sleep(session) // past the deadline whenever the last ping was answered
	if err := l.Unlock(ctxTimeout(t, 5*time.Second)); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("unlock after the deadline: %v, want ErrLost", err)
	}
	proxy.Resume()
}

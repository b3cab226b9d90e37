package dlock_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/testsupport/testenv"
)

// runFleet runs every spec as its own process, n acquisitions each, all at once on one lock path,
// and checks what only mutual exclusion gives: no peer ever saw another holder inside, and the
// counter that writers increment by read-wait-write lost no update.
func runFleet(t *testing.T, specs []peerSpec, n int, hold time.Duration) {
	t.Helper()
	runFleetAt(t, testenv.UniquePath(t), specs, n, hold)
}

// runFleetAt is runFleet on path, with env added to every peer's environment (peerAuthEnv).
func runFleetAt(t *testing.T, path string, specs []peerSpec, n int, hold time.Duration, env ...string) {
	t.Helper()
	dir := fleetDir(t, true)
	procs := make([]*peerProc, len(specs))
	writers := 0
	for i, s := range specs {
		procs[i] = startPeer(t, s, path, dir, fmt.Sprintf("%s-%d", s.lib, i), n, hold, env...)
		if s.kind != "read" {
			writers++
		}
	}
	for _, p := range procs {
		p.waitReady(t, 2*time.Minute)
	}
	release(t, dir) // every runtime started: all contend from the same moment
	overlaps := 0
	for _, p := range procs {
		r := p.wait(t, 3*time.Minute)
		if r.acquired != n {
			t.Errorf("%s peer %s acquired %d times, want %d", p.spec, p.id, r.acquired, n)
		}
		if r.overlaps > 0 {
			t.Errorf("%s peer %s saw another holder inside %d times", p.spec, p.id, r.overlaps)
		}
		overlaps += r.overlaps
	}
	counter, order := readFleet(t, dir)
	if counter != writers*n || len(order) != writers*n {
		t.Errorf("counter %d, %d exclusive holds recorded; want %d: updates were lost", counter, len(order), writers*n)
	}
	if nodes := lockNodes(t, rawConn(t), path); len(nodes) != 0 {
		t.Errorf("nodes left behind: %v", nodes)
	}
	t.Logf("%d processes (%v), %d acquisitions each: %d overlaps, counter %d of %d", len(specs), specs, n, overlaps, counter, writers*n)
}

func repeat(s peerSpec, k int) []peerSpec { return slices.Repeat([]peerSpec{s}, k) }

// dlock's Mutex, Curator's InterProcessMutex and go-zookeeper's zk.Lock on one path are one lock.
func TestMixedFleetMutexCuratorZKLock(t *testing.T) {
	specs := slices.Concat(repeat(peerSpec{libDlock, "mutex"}, 3), repeat(peerSpec{libCurator, "mutex"}, 3),
		repeat(peerSpec{libZKLock, "mutex"}, 2))
	runFleet(t, specs, 25, 2*time.Millisecond)
}

// dlock's RWMutex and Curator's InterProcessReadWriteLock on one path: writers exclude everyone.
func TestMixedFleetRWMutexCurator(t *testing.T) {
	specs := slices.Concat(repeat(peerSpec{libDlock, "read"}, 2), repeat(peerSpec{libDlock, "write"}, 2),
		repeat(peerSpec{libCurator, "read"}, 2), repeat(peerSpec{libCurator, "write"}, 2))
	runFleet(t, specs, 15, 3*time.Millisecond)
}

// dlock with kazoo naming and kazoo's Lock on one path are one lock.
func TestMixedFleetMutexKazoo(t *testing.T) {
	specs := slices.Concat(repeat(peerSpec{libDlockKazoo, "mutex"}, 3), repeat(peerSpec{libKazoo, "mutex"}, 3))
	runFleet(t, specs, 25, 2*time.Millisecond)
}

// dlock's RWMutex with kazoo naming beside kazoo's WriteLock. kazoo's ReadLock is left out of the
// fleet: in kazoo 2.8.0, Debian 12's, a reader waits for writers queued after it and deadlocks
// with them even among kazoo clients alone (python-zk/kazoo#649, fixed in 2.9.0).
// TestReadersShareAcrossLibraries covers kazoo readers beside dlock.
func TestMixedFleetRWMutexKazoo(t *testing.T) {
	specs := slices.Concat(repeat(peerSpec{libDlockKazoo, "read"}, 2), repeat(peerSpec{libDlockKazoo, "write"}, 2),
		repeat(peerSpec{libKazoo, "write"}, 2))
	runFleet(t, specs, 15, 3*time.Millisecond)
}

// Readers of different libraries share the lock; a writer of either waits for the other's reader,
// and a reader of either waits for the other's writer.
func TestReadersShareAcrossLibraries(t *testing.T) {
	for _, tc := range []struct {
		peer   string
		naming dlock.Naming
	}{{libCurator, dlock.CuratorNaming}, {libKazoo, dlock.KazooNaming}} {
		t.Run(tc.peer, func(t *testing.T) {
			path, dir := testenv.UniquePath(t), fleetDir(t, false)
			rw := dlock.NewRWMutex(connect(t, testenv.ZKServers(t), dlock.WithNaming(tc.naming)), path)
			raw := rawConn(t)

			// The peer's reader gets in beside dlock's.
			mine, err := rw.RLock(ctxTimeout(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			startPeer(t, peerSpec{tc.peer, "read"}, path, dir, "peer-reader-1", 1, 0).wait(t, time.Minute)
			mustUnlock(t, mine)

			// dlock's reader gets in beside the peer's; dlock's writer waits for it.
			p := startPeer(t, peerSpec{tc.peer, "read"}, path, dir, "peer-reader-2", 1, 2*time.Second)
			p.waitHeld(t, time.Minute)
			if mine, err = rw.RLock(ctxTimeout(t, time.Second)); err != nil {
				t.Fatalf("dlock reader beside the %s reader: %v", tc.peer, err)
			}
			mustUnlock(t, mine)
			w, err := rw.Lock(ctxTimeout(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if readers, _ := os.ReadDir(filepath.Join(dir, "readers")); len(readers) != 0 {
				t.Fatalf("dlock writer got the lock while the %s reader held it", tc.peer)
			}
			p.wait(t, time.Minute)

			// The peer's reader waits for dlock's writer.
			p = startPeer(t, peerSpec{tc.peer, "read"}, path, dir, "peer-reader-3", 1, 0)
			waitNodes(t, raw, path, 2)
			select {
			case <-p.held:
				t.Fatalf("the %s reader got in while dlock's writer held the lock", tc.peer)
			case <-time.After(500 * time.Millisecond):
			}
			mustUnlock(t, w)
			p.waitHeld(t, time.Minute)
			p.wait(t, time.Minute)
		})
	}
}

// Waiters of different libraries are served in the order they queued: every library here is fair.
func TestFIFOAcrossLibraries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		naming  dlock.Naming
		waiters []string
	}{
		{"curator-zklock", dlock.CuratorNaming, []string{libCurator, libDlock, libZKLock, libCurator, libDlock, libZKLock}},
		{"kazoo", dlock.KazooNaming, []string{libKazoo, libDlockKazoo, libKazoo, libDlockKazoo}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, dir := testenv.UniquePath(t), fleetDir(t, false)
			raw := rawConn(t)
			holder, err := dlock.NewMutex(connect(t, testenv.ZKServers(t), dlock.WithNaming(tc.naming)), path).Lock(ctxTimeout(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			var procs []*peerProc
			for i, lib := range tc.waiters {
				id := fmt.Sprintf("%d-%s", i, lib)
				procs = append(procs, startPeer(t, peerSpec{lib, "mutex"}, path, dir, id, 1, 20*time.Millisecond))
				want = append(want, id)
				waitNodes(t, raw, path, i+2) // queued before the next one starts
			}
			mustUnlock(t, holder)
			var wg sync.WaitGroup
			for _, p := range procs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p.wait(t, time.Minute)
				}()
			}
			wg.Wait()
			if _, order := readFleet(t, dir); !slices.Equal(order, want) {
				t.Fatalf("served in order %v, queued in order %v", order, want)
			}
		})
	}
}

// With ACLs on both sides (dlock.WithDigest; Curator's authorization and an ACLProvider; kazoo's
// auth_data and default_acl; zk.Lock's AddAuth and ACL) each library's nodes carry the digest ACL,
// and the mixed fleets on one path are still one lock: 0 overlaps, no update lost.
func TestMixedFleetsWithACLs(t *testing.T) {
	auth := peerAuthEnv + "=" + aclUser + ":" + aclPassword
	owner := rawConn(t) // reads the ACLs with their hashes
	if err := owner.AddAuth("digest", []byte(aclUser+":"+aclPassword)); err != nil {
		t.Fatal(err)
	}
	want := wantACL(aclUser, aclPassword)
	for _, spec := range []peerSpec{{libDlock, "mutex"}, {libDlockKazoo, "write"}, {libZKLock, "mutex"}, {libCurator, "mutex"},
		{libCurator, "read"}, {libKazoo, "mutex"}, {libKazoo, "read"}} {
		t.Run("nodes/"+spec.lib+"-"+spec.kind, func(t *testing.T) {
			path := openDir(t, owner) + "/lock"
			p := startPeer(t, spec, path, fleetDir(t, false), "acl-"+spec.lib, 1, 1500*time.Millisecond, auth)
			p.waitHeld(t, time.Minute)
			nodes := lockNodes(t, owner, path)
			if len(nodes) != 1 {
				t.Fatalf("nodes %v: want the holder's", nodes)
			}
			for _, n := range []string{path, path + "/" + nodes[0]} {
				if acl, _, err := owner.GetACL(n); err != nil || !sameACL(acl, want) {
					t.Errorf("%s's node %s: ACL %v %v, want %v", spec, n, acl, err, want)
				}
			}
			p.wait(t, time.Minute)
		})
	}
	t.Run("fleet/curator-zklock", func(t *testing.T) {
		specs := slices.Concat(repeat(peerSpec{libDlock, "mutex"}, 2), repeat(peerSpec{libCurator, "mutex"}, 2),
			repeat(peerSpec{libZKLock, "mutex"}, 1))
		runFleetAt(t, openDir(t, owner)+"/lock", specs, 15, 2*time.Millisecond, auth)
	})
	t.Run("fleet/kazoo", func(t *testing.T) {
		specs := slices.Concat(repeat(peerSpec{libDlockKazoo, "mutex"}, 2), repeat(peerSpec{libKazoo, "mutex"}, 2))
		runFleetAt(t, openDir(t, owner)+"/lock", specs, 15, 2*time.Millisecond, auth)
	})
}

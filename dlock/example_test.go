package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkstock/zkstock/dlock"
)

// Two processes (here: two clients, two sessions) take turns on one SKU's lock. The second one
// waits until the first releases, and its fencing token is larger.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := strings.Split(os.Getenv("ZK_SERVERS"), ",") // e.g. 127.0.0.1:2181

	a, err := dlock.Connect(ctx, servers, dlock.WithSessionTimeout(10*time.Second), dlock.WithOwner("replica-a"))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := dlock.Connect(ctx, servers, dlock.WithOwner("replica-b"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	path := fmt.Sprintf("/zkstock-example/%d/sku/SKU-1", time.Now().UnixNano())
	first, err := dlock.NewMutex(a, path).Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}

	second := make(chan *dlock.Lease)
	go func() {
		lease, err := dlock.NewMutex(b, path).Lock(ctx) // waits for a's release
		if err != nil {
			log.Fatal(err)
		}
		second <- lease
	}()

	select {
	case <-second:
		fmt.Println("b got the lock while a held it")
	case <-time.After(200 * time.Millisecond):
		fmt.Println("b waits while a holds the lock")
	}
	if err := first.Unlock(context.WithoutCancel(ctx)); err != nil {
		log.Fatal(err)
	}
	next := <-second
	fmt.Println("b holds the lock after a released it")
	fmt.Println("b's token is larger:", next.Token() > first.Token())
	_ = next.Unlock(context.WithoutCancel(ctx))
	// Output:
	// b waits while a holds the lock
	// b holds the lock after a released it
	// b's token is larger: true
}

// TryLock takes the lock only when nobody holds it or waits for it; otherwise it answers
// ErrLocked at once and leaves no node behind.
func ExampleMutex_TryLock() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := strings.Split(os.Getenv("ZK_SERVERS"), ",")
	a, err := dlock.Connect(ctx, servers)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := dlock.Connect(ctx, servers)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	path := fmt.Sprintf("/zkstock-example/%d/report", time.Now().UnixNano())
	held, err := dlock.NewMutex(a, path).TryLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = dlock.NewMutex(b, path).TryLock(ctx)
	fmt.Println("b while a holds:", errors.Is(err, dlock.ErrLocked))

	if err := held.Unlock(context.WithoutCancel(ctx)); err != nil {
		log.Fatal(err)
	}
	lease, err := dlock.NewMutex(b, path).TryLock(ctx)
	fmt.Println("b after a released:", err == nil)
	if lease != nil {
		_ = lease.Unlock(context.WithoutCancel(ctx))
	}
	// Output:
	// b while a holds: true
	// b after a released: true
}

// Readers share the lock; a writer waits until every reader queued before it has released.
func ExampleRWMutex() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dlock.Connect(ctx, strings.Split(os.Getenv("ZK_SERVERS"), ","))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	rw := dlock.NewRWMutex(c, fmt.Sprintf("/zkstock-example/%d/catalog", time.Now().UnixNano()))
	r1, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := rw.RLock(ctx) // a second reader does not wait for the first
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers hold the lock")

	written := make(chan *dlock.Lease)
	go func() {
		w, err := rw.Lock(ctx)
		if err != nil {
			log.Fatal(err)
		}
		written <- w
	}()
	select {
	case <-written:
		fmt.Println("the writer got in beside the readers")
	case <-time.After(200 * time.Millisecond):
		fmt.Println("the writer waits for the readers")
	}
	for _, r := range []*dlock.Lease{r1, r2} {
		if err := r.Unlock(context.WithoutCancel(ctx)); err != nil {
			log.Fatal(err)
		}
	}
	w := <-written
	fmt.Println("the writer holds the lock once both readers released")
	_ = w.Unlock(context.WithoutCancel(ctx))
	// Output:
	// two readers hold the lock
	// the writer waits for the readers
	// the writer holds the lock once both readers released
}

// LockAll takes several locks (a cart of SKUs) in one canonical order, sorted by path, so that
// two carts that share SKUs cannot deadlock; it takes all of them or none.
func ExampleLockAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dlock.Connect(ctx, strings.Split(os.Getenv("ZK_SERVERS"), ","))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	root := fmt.Sprintf("/zkstock-example/%d/sku/", time.Now().UnixNano())
	cart := []*dlock.Mutex{dlock.NewMutex(c, root+"SKU-B"), dlock.NewMutex(c, root+"SKU-A")}
	leases, err := dlock.LockAll(ctx, cart...)
	if err != nil {
		log.Fatal(err)
	}
	defer leases.Unlock(context.WithoutCancel(ctx))
	for _, l := range leases.Leases() {
		fmt.Println("holds", strings.TrimPrefix(l.Node()[:strings.LastIndex(l.Node(), "/")], root))
	}
	fmt.Println("each with its own token:", leases.Token(root+"SKU-A") > 0 && leases.Token(root+"SKU-B") > 0)
	// Output:
	// holds SKU-A
	// holds SKU-B
	// each with its own token: true
}

// Work under a lease stops when the lease is lost: Lost closes, and Context (handed to the work)
// is cancelled, with a cause that wraps ErrLost. Here someone else deletes the lock's node (an
// operator, say); an expired or unreachable session ends the lease the same way.
func ExampleLease_Lost() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := strings.Split(os.Getenv("ZK_SERVERS"), ",")
	c, err := dlock.Connect(ctx, servers)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	lease, err := dlock.NewMutex(c, fmt.Sprintf("/zkstock-example/%d/job", time.Now().UnixNano())).Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.WithoutCancel(ctx))

	work := make(chan error)
	go func(ctx context.Context) { // the work, handed the lease's context
		<-ctx.Done()
		work <- context.Cause(ctx)
	}(lease.Context())

	operator, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer operator.Close()
	if err := operator.Delete(lease.Node(), -1); err != nil {
		log.Fatal(err)
	}

	<-lease.Lost()
	fmt.Println("lost:", errors.Is(lease.Err(), dlock.ErrLost))
	fmt.Println("the work stopped:", errors.Is(<-work, dlock.ErrLost))
	// Output:
	// lost: true
	// the work stopped: true
}

// A holder can lose the lock without knowing it yet (a pause longer than the session), so the
// storage it writes to checks the token: it accepts a write only from a token at least as large
// as any it has seen. In SQL that is a conditional UPDATE (... WHERE fence <= ?). Here the first
// holder is paused while the lock passes on, then wakes and writes late.
func ExampleLease_Token() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers := strings.Split(os.Getenv("ZK_SERVERS"), ",")
	a, err := dlock.Connect(ctx, servers)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := dlock.Connect(ctx, servers)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	store := &fencedStore{}
	path := fmt.Sprintf("/zkstock-example/%d/sku/SKU-1", time.Now().UnixNano())
	first, err := dlock.NewMutex(a, path).Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a writes 9:", store.Write(9, first.Token()))

	// a is paused; meanwhile its holding ends (here: released on its behalf) and b takes the lock.
	if err := first.Unlock(context.WithoutCancel(ctx)); err != nil {
		log.Fatal(err)
	}
	second, err := dlock.NewMutex(b, path).Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Unlock(context.WithoutCancel(ctx))
	fmt.Println("b writes 8:", store.Write(8, second.Token()))

	fmt.Println("a wakes, writes 7:", store.Write(7, first.Token()))
	fmt.Println("stock:", store.value)
	// Output:
	// a writes 9: <nil>
	// b writes 8: <nil>
	// a wakes, writes 7: fenced: a newer holder has written
	// stock: 8
}

// fencedStore is storage that refuses a write from an older holder than one it has seen.
type fencedStore struct {
	value, fence int64
}

func (s *fencedStore) Write(value, token int64) error {
	if token < s.fence {
		return errors.New("fenced: a newer holder has written")
	}
	s.value, s.fence = value, token
	return nil
}

// Unlock never waits for a ZooKeeper it cannot reach, nor past its context: then it answers
// ErrReleasePending, which is not a failure. The lease is given up at once, the node is deleted in
// the background (or goes with the session), and the next holder gets the lock. Check it with
// errors.Is; an `if err != nil` alone would report a release that is going fine.
func ExampleLease_Unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dlock.Connect(ctx, strings.Split(os.Getenv("ZK_SERVERS"), ","))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mu := dlock.NewMutex(c, fmt.Sprintf("/zkstock-example/%d/sku/SKU-1", time.Now().UnixNano()))
	lease, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	gone, hangUp := context.WithCancel(ctx)
	hangUp() // the request that held the lock was cancelled before it released
	switch err := lease.Unlock(gone); {
	case errors.Is(err, dlock.ErrReleasePending):
		fmt.Println("release pending: not a failure")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("released")
	}

	next, err := mu.Lock(ctx) // waits at most until the background delete is done
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the next holder got the lock")
	_ = next.Unlock(context.WithoutCancel(ctx))
	// Output:
	// release pending: not a failure
	// the next holder got the lock
}

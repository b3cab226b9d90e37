package dlock_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

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

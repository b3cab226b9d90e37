// Command lockdemo takes a dlock lock, holds it for a while and releases it, saying what happens
// when. The tutorials run several at once to show readers sharing and writers waiting.
//
//	lockdemo [-zk-servers host:port,...] [-zk-auth user:password | -zk-auth-file FILE] [-hold 2s] [-name reader-1] [-reenter] read|write|lock PATH
//
// With -reenter it shows dlock's answer to reentrancy while it holds the lock: a call with the
// lease's context re-enters at once, a call without it queues behind the holding like anyone
// else's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/order"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockdemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lockdemo [flags] read|write|lock PATH\n\nflags:")
		fs.PrintDefaults()
	}
	servers := os.Getenv("ZK_SERVERS")
	if servers == "" {
		servers = "127.0.0.1:2181"
	}
	zkServers := fs.String("zk-servers", servers, "comma-separated ZooKeeper servers (default $ZK_SERVERS)")
	hold := fs.Duration("hold", 2*time.Second, "how long to hold the lock")
	name := fs.String("name", fmt.Sprintf("pid-%d", os.Getpid()), "name shown in the output and in the lock node")
	wait := fs.Duration("timeout", time.Minute, "longest wait for the lock")
	reenter := fs.Bool("reenter", false, "while holding, lock again with and without the lease's context")
	zkAuth := order.ZKAuthFlags(fs, os.Getenv, "the lock's client uses")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 2 || (fs.Arg(0) != "read" && fs.Arg(0) != "write" && fs.Arg(0) != "lock") {
		fs.Usage()
		return 2
	}
	kind, path := fs.Arg(0), fs.Arg(1)
	auth, err := zkAuth()
	if err != nil {
		fmt.Fprintf(stderr, "lockdemo: %v\n\n", err)
		fs.Usage()
		return 2
	}

	say := func(format string, a ...any) {
		fmt.Fprintf(stdout, "%s %s %s\n", time.Now().Format("15:04:05.000"), *name, fmt.Sprintf(format, a...))
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, err := dlock.Connect(cctx, strings.Split(*zkServers, ","), append(auth.LockOptions(), dlock.WithOwner(*name))...)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "lockdemo: %v\n", err)
		return 1
	}
	defer c.Close()

	say("waits for the %s lock on %s", kind, path)
	lctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	var lease *dlock.Lease
	switch kind {
	case "read":
		lease, err = dlock.NewRWMutex(c, path).RLock(lctx)
	case "write":
		lease, err = dlock.NewRWMutex(c, path).Lock(lctx)
	default:
		lease, err = dlock.NewMutex(c, path).Lock(lctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "lockdemo: %v\n", err)
		return 1
	}
	say("holds the %s lock (token %d)", kind, lease.Token())
	if *reenter {
		if code := showReentrancy(ctx, c, kind, path, lease, say, stderr); code != 0 {
			return code
		}
	}
	select {
	case <-time.After(*hold):
	case <-lease.Lost():
		say("lost the lock: %v", lease.Err())
		return 1
	case <-ctx.Done():
	}
	// Said before the node is deleted: the next holder may print its line the moment after, and
	// a line printed after Unlock returned could come second although it happened first.
	say("releases the %s lock", kind)
	if err := lease.Unlock(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintf(stderr, "lockdemo: %v\n", err)
		return 1
	}
	return 0
}

// showReentrancy locks the path again while lease holds it: through the lease's context, which
// re-enters, and with a fresh context, which waits behind the holding until it gives up.
func showReentrancy(ctx context.Context, c *dlock.Client, kind, path string, lease *dlock.Lease, say func(string, ...any), stderr io.Writer) int {
	lock := dlock.NewMutex(c, path).Lock
	if kind != "lock" {
		lock = dlock.NewRWMutex(c, path).Lock
	}
	inner, err := lock(lease.Context())
	if err != nil {
		say("locks again with the lease's context: %v", err)
	} else {
		say("locks again with the lease's context: re-entered at once, same node %s, token %d", inner.Node()[strings.LastIndex(inner.Node(), "/")+1:], inner.Token())
		if err := inner.Unlock(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(stderr, "lockdemo: %v\n", err)
			return 1
		}
		say("unlocks the inner lease: the node stays until the outer one is unlocked")
	}
	fresh, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	switch l, err := lock(fresh); {
	case errors.Is(err, context.DeadlineExceeded):
		say("locks again without it: waited behind its own holding, gave up after 500ms")
	case err != nil:
		say("locks again without it: %v", err)
	default:
		say("locks again without it: got it, which must never happen")
		_ = l.Unlock(context.WithoutCancel(ctx))
		return 1
	}
	return 0
}

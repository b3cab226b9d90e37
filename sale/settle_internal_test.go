package sale

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
)

// The wait for an unanswered transaction's connection is bounded: a connection the server still
// shows (a COMMIT the KILL could not stop, or anything else that lives) keeps the SKU's lock and
// the fleet's pass for the store's commit bound, not for as long as it lives.
func TestWaitWhileAliveIsBounded(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDatabase(t)
	st, err := inventory.Open(ctx, dsn, inventory.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	live, err := db.Conn(ctx) // the server's default wait_timeout: it outlives the test
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Close() })
	conn := inventory.ServerConn{}
	if err := live.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&conn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := live.ExecContext(ctx, "INSERT IGNORE INTO server_runs (id, run) VALUES (1, 'test')"); err != nil {
		t.Fatal(err)
	}
	if err := live.QueryRowContext(ctx, "SELECT run FROM server_runs WHERE id = 1").Scan(&conn.Run); err != nil {
		t.Fatal(err)
	}
	e := &Engine{src: st}
	done := make(chan bool, 1)
	start := time.Now()
	go func() { done <- e.waitWhileAlive(ctx, conn, NewLog(slog.Default())) }()
	const slack = 15 * time.Second
	select {
	case gone := <-done:
		took := time.Since(start)
		if gone {
			t.Fatalf("waitWhileAlive saw connection %d gone; it is open", conn.ID)
		}
		if took < st.CommitBound() {
			t.Errorf("waitWhileAlive gave up on a live connection after %v, before the commit bound %v", took, st.CommitBound())
		}
	case <-time.After(e.aliveBound() + slack):
		t.Fatalf("waitWhileAlive still waits on a live connection after %v: want it bounded by %v", time.Since(start), e.aliveBound())
	}
}

// settle settles only an unanswered COMMIT, and the planted lie UnconfirmedNotSold turns a
// settled change into one answered as not made (KindStorage), whatever the resolver learnt.
func TestSettleAndThePlantedLie(t *testing.T) {
	ctx := context.Background()
	st, err := inventory.Open(ctx, testenv.MySQLDatabase(t), inventory.PoolOptions{}) // settle reports to it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	made := func(context.Context, error) error { return nil }
	unanswered := fmt.Errorf("commit: %w", inventory.ErrOutcomeUnknown)
	for _, c := range []struct {
		lie       bool
		err, want error
	}{
		{false, inventory.ErrOutOfStock, inventory.ErrOutOfStock},
		{true, inventory.ErrOutOfStock, inventory.ErrOutOfStock},
		{false, unanswered, nil},
		{true, unanswered, errPlantedNotSold},
	} {
		e := &Engine{cfg: Config{Lies: Lies{UnconfirmedNotSold: c.lie}}, src: st}
		got := e.settle(ctx, change{resolve: made}, c.err, NewLog(slog.New(slog.DiscardHandler)))
		if !errors.Is(got, c.want) || (c.want == nil) != (got == nil) {
			t.Errorf("lie %v, %v: settled %v, want %v", c.lie, c.err, got, c.want)
		}
		if k := classify(errPlantedNotSold); c.want == errPlantedNotSold && k != KindStorage {
			t.Errorf("the lie is answered as kind %d, want KindStorage", k)
		}
	}
}

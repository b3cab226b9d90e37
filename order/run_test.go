package order_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/zkstock/zkstock/internal/ordertest"
	"github.com/zkstock/zkstock/internal/testenv"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/order"
)

// A start that can never succeed is not tried for the start's whole window: a DSN whose character
// set the store refuses (its escaping is unsafe) ends Run at the first attempt, saying why,
// where a database out of reach is tried again (faults: TestReplicaStartsWhenItsServersComeBack).
func TestRunGivesUpAtOnceOnAConfigurationThatCannotWork(t *testing.T) {
	cfg, err := mysql.ParseDSN(testenv.MySQLDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"charset": "gbk"}
	var logs bytes.Buffer // slog's handler serializes its writes; Run has ended when it is read
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = order.Run(ctx, order.Config{HTTPAddr: "127.0.0.1:0", ReplicaID: "misconfigured", Fleet: "misconfigured",
		ZKServers: testenv.ZKServers(t), ZKSessionTimeout: 10 * time.Second, ZKAuth: ordertest.ZKAuth(), MySQLDSN: cfg.FormatDSN(), LockMode: order.ModeZK,
		LockTimeout: 5 * time.Second}, slog.New(slog.NewTextHandler(&logs, nil)))
	if !errors.Is(err, inventory.ErrUnsafeCharset) || !errors.Is(err, inventory.ErrMisconfigured) {
		t.Fatalf("Run with charset gbk = %v, want ErrUnsafeCharset", err)
	}
	if strings.Contains(logs.String(), "trying again") {
		t.Fatalf("a configuration that cannot work was tried again:\n%s", logs.String())
	}
}

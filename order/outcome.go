package order

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/zkstock/zkstock/inventory"
)

// resolveBudget bounds how long a purchase whose commit went unanswered spends learning what
// became of it before it answers outcome_unknown.
const resolveBudget = 5 * time.Second

var (
	// errOutcomeUnknown: the commit went unanswered and the database could not be asked in time.
	errOutcomeUnknown = errors.New("purchase outcome unknown")
	// errNotCommitted: the commit went unanswered, and the database says it did not happen.
	errNotCommitted = errors.New("commit not applied")
)

// resolve learns what became of a purchase whose COMMIT went unanswered, by its key, whether or
// not the client is still there: found, the sale stands and is answered as made; not found once
// the database answers, nothing was sold; no answer within resolveBudget, the outcome is unknown
// and the answer says so.
func (s *Server) resolve(ctx context.Context, p inventory.Purchase, cause error, log *slog.Logger) (inventory.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveBudget)
	defer cancel()
	log.Warn("commit unanswered: asking the database what became of the purchase", "err", cause)
	for {
		o, found, err := s.store.ResolveRequest(ctx, p.RequestID)
		switch {
		case err == nil && !found:
			return inventory.Result{}, fmt.Errorf("%w: %w", errNotCommitted, cause)
		case err == nil && (o.SKU != p.SKU || o.Qty != p.Qty):
			return inventory.Result{}, inventory.ErrKeyReused
		case err == nil:
			remaining := int64(-1)
			if prod, err := s.store.Product(ctx, p.SKU); err == nil {
				remaining = prod.Stock
			}
			log.Info("commit unanswered, but applied", "order", o.ID)
			return inventory.Result{Order: o, Remaining: remaining}, nil
		}
		select {
		case <-ctx.Done():
			return inventory.Result{}, fmt.Errorf("%w: %w (and the look-up: %w)", errOutcomeUnknown, cause, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// newRequestID makes the key of a purchase that came without an Idempotency-Key.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+: it crashes the program instead)
	return "gen-" + hex.EncodeToString(b[:])
}

package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/inventory"
)

type cartItem struct {
	SKU *string `json:"sku"`
	Qty *int64  `json:"qty"`
}

type cartResponse struct {
	RequestID string            `json:"request_id"`
	Orders    []inventory.Order `json:"orders"`    // one per item, in the cart's order
	Remaining map[string]int64  `json:"remaining"` // stock per SKU after the sale
	Replayed  bool              `json:"replayed"`
	Replica   string            `json:"replica"`
	Mode      LockMode          `json:"mode"`
}

// parseCart checks a cart's items: 1 to inventory.MaxCartItems distinct SKUs, each with a qty.
func parseCart(items []cartItem) ([]inventory.CartItem, *apiError) {
	if len(items) == 0 || len(items) > inventory.MaxCartItems {
		return nil, badRequest(fmt.Sprintf("items must hold 1 to %d products", inventory.MaxCartItems))
	}
	out := make([]inventory.CartItem, len(items))
	seen := map[string]bool{}
	for i, it := range items {
		switch {
		case it.SKU == nil:
			return nil, badRequest(fmt.Sprintf("items[%d].sku is required", i))
		case it.Qty == nil:
			return nil, badRequest(fmt.Sprintf("items[%d].qty is required", i))
		case *it.Qty < 1 || *it.Qty > MaxQty:
			return nil, badRequest(fmt.Sprintf("items[%d].qty must be a whole number from 1 to %d", i, MaxQty))
		}
		if e := validSKU(*it.SKU); e != nil {
			return nil, badRequest(fmt.Sprintf("items[%d]: %s", i, e.Message))
		}
		if seen[*it.SKU] {
			return nil, badRequest(fmt.Sprintf("items[%d]: %s is in the cart twice; put the quantities together", i, *it.SKU))
		}
		seen[*it.SKU] = true
		out[i] = inventory.CartItem{SKU: *it.SKU, Qty: *it.Qty}
	}
	return out, nil
}

// purchaseCart is POST /v1/orders with "items": every SKU's lock, in one canonical order, and one
// transaction that sells all the items or none.
func (s *Server) purchaseCart(c *gin.Context, cart inventory.Cart) {
	c.Header("Idempotency-Key", cart.RequestID)
	mode := s.Mode()
	log := s.log.With("cart", len(cart.Items), "mode", mode, "request_id", cart.RequestID)
	res, err := s.sellCart(c.Request.Context(), cart, mode, log)
	if errors.Is(err, inventory.ErrOutcomeUnknown) {
		res, err = s.resolveCart(c.Request.Context(), cart, err, log)
	}
	if err != nil {
		e := purchaseError(err)
		var short *inventory.ShortError
		if errors.As(err, &short) {
			e.Message = "not enough stock left of " + short.SKU + "; nothing was sold"
			e.SKU = short.SKU
		}
		s.refusePurchase(c, e, cart.RequestID, log, err)
		return
	}
	status, result := s.countSale(res.Replayed)
	for sku, left := range res.Remaining {
		s.metrics.stock.WithLabelValues(sku).Set(float64(left))
		if !res.Replayed {
			s.feeds.notify(sku)
		}
	}
	log.Info("cart", "result", result, "items", len(res.Orders))
	c.JSON(status, cartResponse{RequestID: cart.RequestID, Orders: res.Orders, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}

func (s *Server) sellCart(ctx context.Context, cart inventory.Cart, mode LockMode, log *slog.Logger) (inventory.CartResult, error) {
	skus := make([]string, len(cart.Items))
	for i, it := range cart.Items {
		if _, err := s.store.Product(ctx, it.SKU); err != nil {
			return inventory.CartResult{}, err // an unknown SKU creates no lock path
		}
		skus[i] = it.SKU
	}
	if !cart.NewKey {
		res, found, err := s.store.CartByKey(ctx, cart)
		switch {
		case err != nil:
			warnKeyLookupFailed(log, err)
		case found:
			return res, nil
		}
	}
	var res inventory.CartResult
	err := s.underLocks(ctx, skus, mode, log, func(ctx context.Context, m inventory.Mode, tokens map[string]int64, hooks inventory.Hooks) error {
		cart.Tokens = tokens
		var err error
		res, err = s.store.DeductCart(ctx, cart, m, hooks)
		return err
	})
	return res, err
}

// resolveCart learns what became of a cart whose COMMIT went unanswered: the cart is all or
// nothing, so its first item's order stands for all of it.
func (s *Server) resolveCart(ctx context.Context, cart inventory.Cart, cause error, log *slog.Logger) (inventory.CartResult, error) {
	first := cart.Items[0]
	_, err := s.resolve(ctx, inventory.Purchase{SKU: first.SKU, Qty: first.Qty, RequestID: inventory.ItemKey(cart.RequestID, first.SKU)}, cause, log)
	if err != nil {
		return inventory.CartResult{}, err
	}
	res, found, err := s.store.CartByKey(context.WithoutCancel(ctx), cart)
	if err != nil || !found {
		return inventory.CartResult{}, fmt.Errorf("%w: %w", errOutcomeUnknown, errors.Join(cause, err))
	}
	res.Replayed = false // this request made it
	return res, nil
}

// cartChange is a change of several SKUs' stock under their locks: the tokens are per SKU.
type cartChange func(ctx context.Context, m inventory.Mode, tokens map[string]int64, hooks inventory.Hooks) error

// underLocks is underLock for several SKUs: every lock, taken in one canonical order (sorted),
// so that two carts that share SKUs cannot each hold what the other waits for. Mode zk-batch's
// carts do not go through the batchers: they take the SKUs' ZooKeeper locks as in mode zk.
func (s *Server) underLocks(ctx context.Context, skus []string, mode LockMode, log *slog.Logger, change cartChange) error {
	sorted := slices.Sorted(slices.Values(skus))
	switch mode {
	case ModeNone:
		return change(ctx, inventory.Unsafe, nil, inventory.Hooks{Work: s.work(nil)})
	case ModeDBForUpdate:
		return change(ctx, inventory.ForUpdate, nil, inventory.Hooks{Work: s.work(nil)})
	case ModeDBCAS:
		return change(ctx, inventory.CAS, nil, inventory.Hooks{Work: s.work(nil)})
	case ModeDBLockTable:
		return s.withLock(ctx, log, func(lockCtx context.Context) (release, error) {
			var held []*inventory.HeldTableLock
			releaseAll := func(ctx context.Context) error {
				var errs []error
				for i := len(held) - 1; i >= 0; i-- {
					errs = append(errs, held[i].Release(ctx))
				}
				return errors.Join(errs...)
			}
			for _, sku := range sorted {
				h, err := s.store.AcquireTableLock(lockCtx, "sku:"+sku, tableLockTTL, 2*time.Millisecond)
				if err != nil {
					return nil, errors.Join(err, releaseAll(context.WithoutCancel(lockCtx)))
				}
				held = append(held, h)
			}
			return releaseAll, nil
		}, func() error {
			return change(ctx, inventory.Unfenced, nil, inventory.Hooks{Work: s.work(nil)})
		})
	case ModeRedis, ModeRedisFenced:
		fenced := mode == ModeRedisFenced
		invMode := inventory.Unfenced
		if fenced {
			invMode = inventory.Fenced
		}
		lock := func(ctx context.Context) (heldLocks, error) {
			return lockInOrder(ctx, sorted, func(ctx context.Context, sku string) (heldLock, error) {
				l, err := s.redisLocks().lock(ctx, sku, fenced)
				if err != nil {
					return nil, err
				}
				return l, nil
			})
		}
		err := s.underLeases(ctx, invMode, lock, log, change)
		if fenced && errors.Is(err, inventory.ErrStaleToken) {
			for _, sku := range sorted {
				if !s.raiseRedisToken(ctx, sku, log) {
					return err
				}
			}
			err = s.underLeases(ctx, invMode, lock, log, change)
		}
		return err
	case ModeZKHerd:
		return s.underLeases(ctx, inventory.Fenced, func(ctx context.Context) (heldLocks, error) {
			c, err := s.herdClient(ctx)
			if err != nil {
				return nil, err
			}
			return lockInOrder(ctx, sorted, func(ctx context.Context, sku string) (heldLock, error) {
				return teaching.NewHerdLock(c, lockPath(sku)).Lock(ctx)
			})
		}, log, change)
	}
	invMode := inventory.Fenced
	if mode == ModeZKUnfenced {
		invMode = inventory.Unfenced
	}
	return s.underLeases(ctx, invMode, func(ctx context.Context) (heldLocks, error) {
		mutexes := make([]*dlock.Mutex, len(sorted))
		for i, sku := range sorted {
			mutexes[i] = dlock.NewMutex(s.locks, lockPath(sku))
		}
		l, err := dlock.LockAll(ctx, mutexes...)
		if err != nil {
			return nil, err
		}
		return zkLeases{l, sorted}, nil
	}, log, change)
}

// underLeases is underLease for a holding of several locks.
func (s *Server) underLeases(ctx context.Context, invMode inventory.Mode, lock func(context.Context) (heldLocks, error), log *slog.Logger, change cartChange) error {
	var held heldLocks
	var tokens map[string]int64
	return s.withLock(ctx, log, func(lockCtx context.Context) (release, error) {
		h, err := lock(lockCtx)
		if err != nil {
			return nil, err
		}
		held, tokens = h, h.Tokens()
		return h.Unlock, nil
	}, func() error {
		return change(ctx, invMode, tokens, inventory.Hooks{Work: s.work(held), BeforeCommit: stillHeld(held)})
	})
}

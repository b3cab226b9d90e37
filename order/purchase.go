package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/teaching"
	"github.com/zkstock/zkstock/inventory"
)

type purchaseRequest struct {
	SKU   *string     `json:"sku"`
	Qty   *int64      `json:"qty"`
	Items *[]cartItem `json:"items"` // a cart, instead of sku and qty
}

type purchaseResponse struct {
	RequestID string          `json:"request_id"` // the Idempotency-Key: the client's, or one made for it
	Order     inventory.Order `json:"order"`
	Remaining int64           `json:"remaining"`
	Replayed  bool            `json:"replayed"`
	Replica   string          `json:"replica"`
	Mode      LockMode        `json:"mode"`
}

// purchase is POST /v1/orders. Validation comes first, before any lock is taken.
func (s *Server) purchase(c *gin.Context) {
	p, cart, apiErr := s.parsePurchase(c)
	if apiErr != nil {
		s.metrics.orders.WithLabelValues("invalid_request").Inc()
		abortWith(c, apiErr)
		return
	}
	if cart != nil {
		s.purchaseCart(c, *cart)
		return
	}
	// Every answer names the purchase's key, so that a client who gets no answer it can trust
	// (a timeout, a 503 outcome_unknown) can look the purchase up or retry it safely.
	c.Header("Idempotency-Key", p.RequestID)
	mode := s.Mode()
	log := s.log.With("sku", p.SKU, "mode", mode, "request_id", p.RequestID)
	res, err := s.sell(c.Request.Context(), p, mode, log)
	if errors.Is(err, inventory.ErrOutcomeUnknown) {
		res, err = s.resolve(c.Request.Context(), p, err, log)
	}
	if err != nil {
		s.refusePurchase(c, purchaseError(err), p.RequestID, log, err)
		return
	}
	status, result := s.countSale(res.Replayed)
	s.metrics.stock.WithLabelValues(p.SKU).Set(float64(res.Remaining))
	if !res.Replayed {
		s.feeds.notify(p.SKU)
	}
	log.Info("purchase", "result", result, "order", res.Order.ID, "token", res.Order.FenceToken, "remaining", res.Remaining)
	c.JSON(status, purchaseResponse{RequestID: p.RequestID, Order: res.Order, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}

// refusePurchase answers a failed purchase or cart: the error with the key it ran under, counted,
// and logged when the service is at fault.
func (s *Server) refusePurchase(c *gin.Context, e *apiError, key string, log *slog.Logger, err error) {
	e.RequestID = key
	s.metrics.orders.WithLabelValues(e.Code).Inc()
	if e.Status >= 500 {
		log.Warn("purchase failed", "code", e.Code, "err", err)
	}
	abortWith(c, e)
}

// countSale counts a sale, or its replay, and says how to answer it.
func (s *Server) countSale(replayed bool) (status int, result string) {
	status, result = http.StatusCreated, "created"
	if replayed {
		status, result = http.StatusOK, "replayed"
	} else {
		s.sales.Add(1)
	}
	s.metrics.orders.WithLabelValues(result).Inc()
	return status, result
}

// parsePurchase reads a purchase of one SKU, or a cart (cart != nil).
func (s *Server) parsePurchase(c *gin.Context) (p inventory.Purchase, cart *inventory.Cart, _ *apiError) {
	if e := requireJSON(c); e != nil {
		return p, nil, e
	}
	var req purchaseRequest
	if e := decodeJSON(c, &req); e != nil {
		return p, nil, e
	}
	key := c.GetHeader("Idempotency-Key")
	if len(key) > 128 || !printableASCII(key) {
		return p, nil, badRequest("Idempotency-Key must be at most 128 printable ASCII characters")
	}
	newKey := key == ""
	if newKey {
		key = newRequestID()
	}
	if req.Items != nil {
		if req.SKU != nil || req.Qty != nil {
			return p, nil, badRequest("send either sku and qty, or items, not both")
		}
		items, e := parseCart(*req.Items)
		if e != nil {
			return p, nil, e
		}
		return p, &inventory.Cart{Items: items, RequestID: key, NewKey: newKey, Replica: s.cfg.ReplicaID}, nil
	}
	switch {
	case req.SKU == nil:
		return p, nil, badRequest("sku is required (or items, for a cart)")
	case req.Qty == nil:
		return p, nil, badRequest("qty is required")
	case *req.Qty < 1 || *req.Qty > MaxQty:
		return p, nil, badRequest(fmt.Sprintf("qty must be a whole number from 1 to %d", MaxQty))
	}
	if e := validSKU(*req.SKU); e != nil {
		return p, nil, e
	}
	return inventory.Purchase{SKU: *req.SKU, Qty: *req.Qty, RequestID: key, NewKey: newKey, Replica: s.cfg.ReplicaID}, nil, nil
}

// sell runs the deduction in the given mode (see underLock).
func (s *Server) sell(ctx context.Context, p inventory.Purchase, mode LockMode, log *slog.Logger) (inventory.Result, error) {
	// Two reads before the lock: a retry of a finished purchase is answered from the orders
	// table, and an unknown SKU is refused without creating a lock path in ZooKeeper for it.
	prod, err := s.store.Product(ctx, p.SKU)
	if err != nil {
		return inventory.Result{}, err
	}
	if !p.NewKey {
		o, found, err := s.store.OrderByRequestID(ctx, p.RequestID)
		switch {
		case err != nil:
			warnKeyLookupFailed(log, err)
		case found && o.SKU == p.SKU && o.Qty == p.Qty:
			return inventory.Result{Order: o, Remaining: prod.Stock, Replayed: true}, nil
		}
	}
	if mode == ModeZKBatch {
		return s.sellBatched(ctx, p)
	}
	var res inventory.Result
	err = s.underLock(ctx, p.SKU, mode, log, func(ctx context.Context, m inventory.Mode, token int64, hooks inventory.Hooks) error {
		p.Token = token
		var err error
		res, err = s.store.Deduct(ctx, p, m, hooks)
		return err
	})
	return res, err
}

// warnKeyLookupFailed notes a failed look-up of a key before the lock. That look-up only spares a
// retry the lock: the deduction looks the key up again under the lock, in its transaction, so the
// purchase goes on and is still never sold twice.
func warnKeyLookupFailed(log *slog.Logger, err error) {
	log.Warn("order: the key could not be looked up before the lock; the locked deduction checks it", "err", err)
}

// stockChange is one change of a SKU's stock (a sale, a cancellation) as a lock mode runs it: the
// inventory mode that protects it, the fencing token (0 where there is none) and the hooks that
// run the critical section's work and look at the lease before commit.
type stockChange func(ctx context.Context, m inventory.Mode, token int64, hooks inventory.Hooks) error

// underLock runs a stock change of one SKU under the mode's lock: the one place that says what
// each mode does. Mode zk-batch's purchases go through the batchers (sellBatched); anything else
// it sells (a cancellation) runs under the SKU's ZooKeeper lock as in mode zk. In the lock modes
// the lock spans the whole transaction: taken before the first read, released only after commit
// or rollback, on every path including a panic, with a context the caller cannot cancel.
func (s *Server) underLock(ctx context.Context, sku string, mode LockMode, log *slog.Logger, change stockChange) error {
	switch mode {
	case ModeNone:
		return change(ctx, inventory.Unsafe, 0, inventory.Hooks{Work: s.work(nil)})
	case ModeDBForUpdate:
		return change(ctx, inventory.ForUpdate, 0, inventory.Hooks{Work: s.work(nil)})
	case ModeDBCAS:
		return change(ctx, inventory.CAS, 0, inventory.Hooks{Work: s.work(nil)})
	case ModeDBLockTable:
		return s.underTableLock(ctx, sku, log, change)
	case ModeRedis, ModeRedisFenced:
		return s.underRedisLock(ctx, sku, mode == ModeRedisFenced, log, change)
	}
	lock := func(ctx context.Context) (heldLock, error) { return dlock.NewMutex(s.locks, lockPath(sku)).Lock(ctx) }
	if mode == ModeZKHerd {
		lock = func(ctx context.Context) (heldLock, error) {
			c, err := s.herdClient(ctx)
			if err != nil {
				return nil, err
			}
			return teaching.NewHerdLock(c, lockPath(sku)).Lock(ctx)
		}
	}
	invMode := inventory.Fenced
	if mode == ModeZKUnfenced {
		invMode = inventory.Unfenced
	}
	return s.underLease(ctx, invMode, lock, log, change)
}

// underLease is a change under a lease that knows when it is lost, whoever issued it: the lease's
// token goes to the (fenced) change, the work runs under the lease's context, and the lease is
// looked at once more before commit.
func (s *Server) underLease(ctx context.Context, invMode inventory.Mode, lock func(context.Context) (heldLock, error), log *slog.Logger, change stockChange) error {
	var lease heldLock
	return s.withLock(ctx, log, func(lockCtx context.Context) (release, error) {
		l, err := lock(lockCtx)
		if err != nil {
			return nil, err
		}
		lease = l
		return l.Unlock, nil
	}, func() error {
		return change(ctx, invMode, lease.Token(), inventory.Hooks{Work: s.work(lease), BeforeCommit: stillHeld(lease)})
	})
}

// underRedisLock is modes redis and redis-fenced: the Redis lock around the unfenced change, or
// around the fenced one with the token Redis issued with the lock. When the fence refuses a Redis
// token, Redis's counter is behind the database (Redis lost it in a restart, or the SKU was sold
// under other tokens before): the refusal wrote nothing, so the change raises the counter to the
// fence and tries once more with a new lock and a new token.
func (s *Server) underRedisLock(ctx context.Context, sku string, fenced bool, log *slog.Logger, change stockChange) error {
	err := s.underRedisLockOnce(ctx, sku, fenced, log, change)
	if fenced && errors.Is(err, inventory.ErrStaleToken) && s.raiseRedisToken(ctx, sku, log) {
		err = s.underRedisLockOnce(ctx, sku, fenced, log, change)
	}
	return err
}

func (s *Server) underRedisLockOnce(ctx context.Context, sku string, fenced bool, log *slog.Logger, change stockChange) error {
	invMode := inventory.Unfenced
	if fenced {
		invMode = inventory.Fenced
	}
	return s.underLease(ctx, invMode, func(ctx context.Context) (heldLock, error) {
		l, err := s.redisLocks().lock(ctx, sku, fenced)
		if err != nil {
			return nil, err // not a nil *redisLease in the interface
		}
		return l, nil
	}, log, change)
}

// raiseRedisToken lifts the SKU's Redis token counter to the database's fence after the fence
// refused a token, and says whether it did: without it every later holder would be refused too.
func (s *Server) raiseRedisToken(ctx context.Context, sku string, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	prod, err := s.store.Product(ctx, sku)
	if err != nil {
		log.Warn("read the fence to raise the Redis token counter", "sku", sku, "err", err)
		return false
	}
	raised, err := s.redisLocks().raiseTokenTo(ctx, sku, prod.FenceToken)
	switch {
	case err != nil:
		log.Warn("raise the Redis token counter", "sku", sku, "err", err)
		return false
	case raised:
		log.Warn("Redis token counter was behind the database fence: raised", "sku", sku, "fence", prod.FenceToken)
	}
	return true
}

// tableLockTTL bounds how long a crashed holder of a table lock blocks the SKU.
const tableLockTTL = 10 * time.Second

// underTableLock is mode db-locktable: the database lock of the classic comparison, polled
// every 2 ms, around the same unfenced change.
func (s *Server) underTableLock(ctx context.Context, sku string, log *slog.Logger, change stockChange) error {
	return s.withLock(ctx, log, func(lockCtx context.Context) (release, error) {
		held, err := s.store.AcquireTableLock(lockCtx, "sku:"+sku, tableLockTTL, 2*time.Millisecond)
		if err != nil {
			return nil, err
		}
		return held.Release, nil
	}, func() error {
		return change(ctx, inventory.Unfenced, 0, inventory.Hooks{Work: s.work(nil)})
	})
}

// heldLock is what a locked sale needs of its lock: a dlock Lease, or in mode zk-herd a teaching
// recipe's.
type heldLock interface {
	Token() int64
	Lost() <-chan struct{}
	Context() context.Context
	Unlock(context.Context) error
}

// release gives a lock back.
type release func(context.Context) error

// withLock is the frame of every locked sale: acquire within LOCK_TIMEOUT, run critical, then
// release on every path (an early return, an error, a panic) with a context the caller cannot
// cancel, so that a client who hangs up does not leave the lock held. The wait and the hold are
// timed for the metrics.
func (s *Server) withLock(ctx context.Context, log *slog.Logger, acquire func(context.Context) (release, error), critical func() error) error {
	waitStart := time.Now()
	lockCtx, cancel := context.WithTimeout(ctx, s.cfg.LockTimeout)
	rel, err := acquire(lockCtx)
	cancel()
	s.metrics.lockWait.Observe(time.Since(waitStart).Seconds())
	if err != nil {
		return fmt.Errorf("%w: %w", errLockUnavailable, err)
	}
	heldSince := time.Now()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := rel(rctx); err != nil {
			log.Warn("lock release", "err", err)
		}
		s.metrics.lockHold.Observe(time.Since(heldSince).Seconds())
	}()
	return critical()
}

// stillHeld is the last check before commit: a lease lost by then rolls the transaction back.
func stillHeld(lease leaseState) func() error {
	return func() error {
		select {
		case <-lease.Lost():
			return errLockLost
		default:
			return nil
		}
	}
}

// work is the simulated work inside the critical section (WORK_DELAY, a payment call, say). It
// runs under the lease's context as well as the request's, as a real critical section passes the
// lease's context down to its calls, so that it stops as soon as the lease is lost.
func (s *Server) work(lease leaseState) func(context.Context) error {
	return func(ctx context.Context) error {
		if lease != nil {
			select {
			case <-lease.Lost(): // judged now: a replica woken from a pause must not go on
				return errLockLost
			default:
			}
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			defer context.AfterFunc(lease.Context(), func() { cancel(errLockLost) })()
		}
		if s.cfg.WorkDelay <= 0 {
			return nil
		}
		t := time.NewTimer(s.cfg.WorkDelay)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), errLockLost) {
				return errLockLost
			}
			return ctx.Err()
		}
	}
}

var errLockUnavailable = errors.New("lock not acquired")

// purchaseError maps a failed sale to its HTTP answer.
func purchaseError(err error) *apiError {
	switch {
	case errors.Is(err, inventory.ErrOutOfStock):
		return newError(http.StatusConflict, "out_of_stock", "not enough stock left")
	case errors.Is(err, inventory.ErrUnknownSKU):
		return newError(http.StatusNotFound, "unknown_sku", "no such product")
	case errors.Is(err, inventory.ErrKeyReused):
		return newError(http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used for a different purchase")
	case errors.Is(err, inventory.ErrStaleToken):
		return newError(http.StatusServiceUnavailable, "stale_token", "a newer lock holder has written this product; retry")
	case errors.Is(err, errLockLost), errors.Is(err, dlock.ErrLost):
		return newError(http.StatusServiceUnavailable, "lock_lost", "the lock was lost before commit; nothing was sold; retry")
	case errors.Is(err, errShuttingDown):
		return newError(http.StatusServiceUnavailable, "shutting_down", "the replica is shutting down; nothing was sold; retry on another")
	case errors.Is(err, errLockUnavailable):
		return newError(http.StatusServiceUnavailable, "lock_unavailable", "the product's lock could not be taken in time; retry")
	case errors.Is(err, errOutcomeUnknown):
		return newError(http.StatusServiceUnavailable, "outcome_unknown", "the database did not confirm the purchase and could not be asked in time: "+
			"it may have been sold. Look it up with GET /v1/orders?request_id=<request_id>, or retry with the same Idempotency-Key: it is never sold twice")
	case errors.Is(err, context.Canceled):
		return newError(499, "client_closed", "the client went away; nothing was sold")
	default:
		return newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not complete the purchase; nothing was sold; retry")
	}
}

func requireJSON(c *gin.Context) *apiError {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "application/json" {
		return newError(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
	}
	return nil
}

// decodeJSON reads exactly one JSON object with no unknown fields.
func decodeJSON(c *gin.Context, dst any) *apiError {
	dec := json.NewDecoder(c.Request.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			return badRequest("body must hold a single JSON object")
		}
		return nil
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return newError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body larger than %d bytes", maxBodyBytes))
	case errors.Is(err, io.EOF):
		return badRequest("body is empty; send a JSON object")
	case errors.As(err, &typeErr):
		return badRequest(fmt.Sprintf("field %q must be %s", typeErr.Field, jsonKind(typeErr.Type.String())))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("body is not valid JSON")
	default:
		return badRequest("bad request body: " + err.Error())
	}
}

func jsonKind(goType string) string {
	switch goType {
	case "int64", "int":
		return "a whole number"
	case "string":
		return "a string"
	}
	return "of type " + goType
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

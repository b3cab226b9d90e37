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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zkstock/zkstock/dlock"
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
	ctx, mode, done, err := s.admit(c.Request.Context())
	if err != nil {
		s.refusePurchase(c, fleetError(err), p.RequestID, newRequestLog(s.log, slog.String("sku", p.SKU), slog.String("request_id", p.RequestID)), err)
		return
	}
	defer done()
	log := newRequestLog(s.log, slog.String("sku", p.SKU), slog.String("mode", string(mode)), slog.String("request_id", p.RequestID))
	res, err := s.sell(ctx, p, mode, log)
	if err != nil {
		s.refusePurchase(c, purchaseError(err), p.RequestID, log, err)
		return
	}
	status, result := s.countSale(res.Replayed)
	s.stockGauge(p.SKU).Set(float64(res.Remaining))
	if !res.Replayed {
		s.feeds.notify(p.SKU)
	}
	log.InfoAttrs("purchase", slog.String("result", result), slog.Int64("order", res.Order.ID), slog.Int64("token", res.Order.FenceToken),
		slog.Int64("remaining", res.Remaining))
	c.JSON(status, purchaseResponse{RequestID: p.RequestID, Order: res.Order, Remaining: res.Remaining, Replayed: res.Replayed, Replica: s.cfg.ReplicaID, Mode: mode})
}

// refusePurchase answers a failed purchase or cart: the error with the key it ran under, counted,
// and logged when the service is at fault.
func (s *Server) refusePurchase(c *gin.Context, e *apiError, key string, log requestLog, err error) {
	e.RequestID = key
	s.metrics.orders.WithLabelValues(e.Code).Inc()
	// Shedding load is the service working as meant: at 1,000 buyers a second, a warning per
	// sku_busy cost the replicas more than the refusals themselves. The metrics count them.
	if e.Status >= 500 && e.Code != "sku_busy" {
		log.Warn("purchase failed", "code", e.Code, "err", err)
	}
	abortWith(c, e)
}

// countSale counts a sale, or its replay, and says how to answer it.
func (s *Server) countSale(replayed bool) (status int, result string) {
	if replayed {
		s.metrics.replayed.Inc()
		return http.StatusOK, "replayed"
	}
	s.sales.Add(1)
	s.metrics.created.Inc()
	return http.StatusCreated, "created"
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
	if len(key) > 128 || !printableASCII(key) || inventory.CheckClientKey(key) != nil {
		return p, nil, badRequest("Idempotency-Key must be at most 128 printable ASCII characters, without '" + inventory.KeySeparator + "'")
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

// sell sells one purchase under the mode's locks (run), or through the SKU's batcher.
func (s *Server) sell(ctx context.Context, p inventory.Purchase, mode LockMode, log requestLog) (inventory.Result, error) {
	lm, err := modeOf(mode)
	if err != nil {
		return inventory.Result{}, err
	}
	// Two reads before the lock (the first only until the SKU is known to exist): a retry of a finished purchase is answered from the orders
	// table (and a key that made another purchase is refused), and an unknown SKU is refused
	// without creating a lock path in ZooKeeper for it.
	if err := s.productExists(ctx, p.SKU); err != nil {
		return inventory.Result{}, err
	}
	if !p.NewKey {
		res, found, err := s.store.PurchaseByKey(ctx, p)
		switch {
		case errors.Is(err, inventory.ErrKeyReused):
			return inventory.Result{}, err
		case err != nil:
			warnKeyLookupFailed(log, err)
		case found:
			return res, nil
		}
	}
	// A keyed purchase found short by a read of the stock is looked up by its key again (below):
	// a lookup failed before, or an earlier attempt committed since, and the answer is then that
	// attempt's order. A lookup that fails again leaves the locked deduction to decide.
	keyLooked := true
	if s.soldOut.shortBeforeQueue(ctx, p.SKU, p.Qty) {
		if res, decided, err := s.answerShort(ctx, p, log, s.metrics.beforeQueue); decided {
			return res, err
		}
		keyLooked = false
	}
	leave, err := s.admission.enter(p.SKU, lm.name, p.Qty, time.Now())
	if err != nil {
		s.refused.Add(1)
		return inventory.Result{}, err
	}
	end := turnEnd{left: -1}
	defer func() { leave(end) }()
	res, err := s.sellAdmitted(ctx, p, lm, log, keyLooked)
	sentAway := errors.Is(err, errSoldOutWhileQueued)
	if sentAway {
		answer, decided, aerr := s.answerShort(ctx, p, log, s.metrics.leftQueue)
		switch {
		case !decided:
			// Whether the key sold is unknown: queue again, to stay, and let the locked
			// deduction (which looks the key up in its transaction) decide.
			res, err = s.sellAdmitted(ctx, p, lm, log, false)
			sentAway = errors.Is(err, errSoldOutWhileQueued)
		case errors.Is(aerr, inventory.ErrOutOfStock):
			err = aerr
		default:
			return answer, aerr // the key's own order, or the key reused
		}
	}
	switch {
	case err == nil:
		end = turnEnd{turned: true, left: res.Remaining}
		s.soldOut.noteStock(p.SKU, res.Remaining)
		s.gate.noteStock(p.SKU, res.Remaining)
	case errors.Is(err, inventory.ErrOutOfStock):
		end = turnEnd{turned: !sentAway, left: p.Qty - 1}
		s.soldOut.noteShort(p.SKU)
	case errors.Is(err, errLockUnavailable):
		end.timedOut = true
	}
	return res, err
}

// keyAfterShortRead looks a purchase up by its key after a read of the stock found the stock short
// of it, before the purchase took a turn of the lock. The read alone makes out_of_stock true for a
// new purchase, but not for a client's retry: an earlier attempt with the same key may have sold
// the very unit that made the stock short (its COMMIT landing after the lookup before the lock,
// or that lookup having failed), and the key's answer is then that order (200, replayed), as the
// locked deduction would answer it. A lookup after the read settles it: an attempt not committed
// by then can only still sell if the stock grew after the read, and the 409 is true as of the
// read. found is false, with no error, for a key the service made (nobody can have used it).
func (s *Server) keyAfterShortRead(ctx context.Context, p inventory.Purchase) (inventory.Result, bool, error) {
	if p.NewKey {
		return inventory.Result{}, false, nil
	}
	res, found, err := s.store.PurchaseByKey(ctx, p)
	if err != nil {
		return inventory.Result{}, false, fmt.Errorf("order: look the key up after a short read: %w", err)
	}
	return res, found, nil
}

// answerShort answers a purchase that a read of the stock found short, counted in where: its
// key's order when an earlier attempt with the key sold it (or 422 when the key made another
// purchase), out_of_stock otherwise, true as of the read. decided is false when the key could not
// be looked up: the locked deduction must decide.
func (s *Server) answerShort(ctx context.Context, p inventory.Purchase, log requestLog, where prometheus.Counter) (_ inventory.Result, decided bool, _ error) {
	res, found, err := s.keyAfterShortRead(ctx, p)
	switch {
	case found || errors.Is(err, inventory.ErrKeyReused):
		return res, true, err
	case err == nil:
		where.Inc()
		s.soldOutFast.Add(1)
		return inventory.Result{}, true, inventory.ErrOutOfStock
	}
	warnKeyLookupFailed(log, err)
	return inventory.Result{}, false, nil
}

// sellAdmitted sells a purchase admitted to its SKU's queue. With sendAway, a read of the stock
// that shows the product sold out while the purchase waits for the lock ends its wait with an
// error wrapping errSoldOutWhileQueued (soldout.go); without it, it waits its turn.
func (s *Server) sellAdmitted(ctx context.Context, p inventory.Purchase, lm lockMode, log requestLog, sendAway bool) (inventory.Result, error) {
	if lm.batched {
		return s.sellBatched(ctx, p)
	}
	var sale *inventory.Purchase
	if sendAway {
		sale = &p
	}
	var res inventory.Result
	err := s.run(ctx, log, change{
		skus: []string{p.SKU},
		sale: sale,
		apply: func(ctx context.Context, m inventory.Mode, f fencing, hooks inventory.Hooks) error {
			p.Issuer, p.Token = f.issuer, f.tokens[p.SKU]
			var err error
			res, err = s.store.Deduct(ctx, p, m, hooks)
			return err
		},
		resolve: func(ctx context.Context, cause error) error {
			var err error
			res, err = s.resolvePurchase(ctx, p, cause, log)
			return err
		},
	})
	return res, err
}

// warnKeyLookupFailed notes a failed look-up of a key before the lock. That look-up only spares a
// retry the lock: the deduction looks the key up again under the lock, in its transaction, so the
// purchase goes on and is still never sold twice.
func warnKeyLookupFailed(log requestLog, err error) {
	log.Warn("order: the key could not be looked up before the lock; the locked deduction checks it", "err", err)
}

// purchaseError maps a failed sale to its HTTP answer. An error that says the outcome is unknown
// is answered so whatever else it wraps: every other answer says nothing was sold.
func purchaseError(err error) *apiError {
	switch {
	case errors.Is(err, errOutcomeUnknown):
		return newError(http.StatusServiceUnavailable, "outcome_unknown", "the database did not confirm the purchase and could not be asked in time: "+
			"it may have been sold. Look it up with GET /v1/orders?request_id=<request_id>, or retry with the same Idempotency-Key: it is never sold twice")
	case errors.Is(err, inventory.ErrOutOfStock):
		return newError(http.StatusConflict, "out_of_stock", "not enough stock left")
	case isSKUBusy(err):
		busy, _ := asSKUBusy(err)
		e := newError(http.StatusServiceUnavailable, "sku_busy", "this product's queue is longer than a purchase may wait: "+
			"this request sold nothing and queued nothing; retry after the seconds in Retry-After, with the same Idempotency-Key: it is never sold twice")
		e.RetryAfter = busy.retryAfterSeconds()
		return e
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
	case errors.Is(err, errUnknownMode):
		return newError(http.StatusServiceUnavailable, "unknown_mode", "this replica's lock mode is not known; nothing was sold")
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

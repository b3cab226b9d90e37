package order

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/inventory"
)

// The read side of orders: one order by id, the order an idempotency key produced (how a client
// learns the outcome of a purchase whose answer it never got), and a product's orders page by page.

const (
	defaultOrdersPage = 50
	maxOrdersPage     = 500
)

// orderByID is GET /v1/orders/:id.
func (s *Server) orderByID(c *gin.Context) {
	id, ok := positiveID(c.Param("id"))
	if !ok {
		abortWith(c, badRequest("the order id must be a whole number from 1 to 9223372036854775807"))
		return
	}
	o, found, err := s.db().OrderByID(c.Request.Context(), id)
	// Ids are sequential and the key is the capability to cancel: an id does not hand it out.
	o.RequestID = nil
	s.answerOrder(c, o, found, err)
}

// orderByKey is GET /v1/orders?request_id=KEY.
func (s *Server) orderByKey(c *gin.Context) {
	keys, ok := c.GetQueryArray("request_id")
	if !ok || len(keys) != 1 || keys[0] == "" || len(c.Request.URL.Query()) != 1 {
		abortWith(c, badRequest("look an order up as /v1/orders?request_id=KEY (and nothing else), or /v1/orders/ID"))
		return
	}
	if len(keys[0]) > 128 || !printableASCII(keys[0]) {
		abortWith(c, badRequest("request_id must be at most 128 printable ASCII characters"))
		return
	}
	o, found, err := s.db().OrderByRequestID(c.Request.Context(), keys[0])
	s.answerOrder(c, o, found, err)
}

func (s *Server) answerOrder(c *gin.Context, o inventory.Order, found bool, err error) {
	switch {
	case err != nil:
		s.src.Report(err)
		s.log.Warn("order lookup", "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer"))
	case !found:
		abortWith(c, newError(http.StatusNotFound, "unknown_order", "no such order"))
	default:
		c.JSON(http.StatusOK, gin.H{"order": o})
	}
}

// productOrders is GET /v1/products/:sku/orders?limit=50&after=ID: a page of the product's
// orders, newest last, and the cursor for the next page while there may be one.
func (s *Server) productOrders(c *gin.Context) {
	sku := c.Param("sku")
	if e := validSKU(sku); e != nil {
		abortWith(c, e)
		return
	}
	limit := defaultOrdersPage
	if v, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxOrdersPage || v != strconv.Itoa(n) {
			abortWith(c, badRequest("limit must be a whole number from 1 to "+strconv.Itoa(maxOrdersPage)))
			return
		}
		limit = n
	}
	var after int64
	if v, ok := c.GetQuery("after"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || v != strconv.FormatInt(n, 10) {
			abortWith(c, badRequest("after must be an order id, a whole number from 0"))
			return
		}
		after = n
	}
	for k := range c.Request.URL.Query() {
		if k != "limit" && k != "after" {
			abortWith(c, badRequest("unknown query parameter "+strconv.Quote(k)+": use limit and after"))
			return
		}
	}
	ctx := c.Request.Context()
	if _, err := s.db().Product(ctx, sku); err != nil {
		abortWith(c, readError(err))
		return
	}
	orders, err := s.db().OrdersPage(ctx, sku, after, limit)
	if err != nil {
		s.log.Warn("orders page", "sku", sku, "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer"))
		return
	}
	for i := range orders {
		orders[i].RequestID = nil // the key is the capability to cancel: a listing does not hand it out
	}
	page := gin.H{"sku": sku, "orders": orders, "next_after": nil}
	if len(orders) == limit {
		page["next_after"] = orders[len(orders)-1].ID
	}
	c.JSON(http.StatusOK, page)
}

// positiveID reads a decimal id from 1 up, written the plain way (no sign, no leading zeros).
func positiveID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 1 && s == strconv.FormatInt(n, 10)
}

// The lock view, GET /v1/products/:sku/lock, reads ZooKeeper once for every caller within
// lockViewFresh: one children read and up to lockQueueShown data reads a time, per SKU and
// replica, however many ask (at most about 1,000 reads a second for a queue of 100 or more). Kept
// short, so that a caller polling it still sees a holding of a few hundred milliseconds. lockViewReaders bounds the reads in flight across SKUs, so that
// callers cycling through SKUs cannot multiply them either.
const (
	lockQueueShown  = 100
	lockViewFresh   = 100 * time.Millisecond
	lockViewReaders = 4
	lockViewKept    = 1024 // SKUs whose last view is kept; beyond, stale ones are forgotten
	lockViewTimeout = 3 * time.Second
)

// lockView is one read of a SKU's lock queue, shared by every caller within lockViewFresh of it.
type lockView struct {
	ready chan struct{} // closed once read; then the fields below are fixed
	at    time.Time     // when the read began
	queue []dlock.QueueEntry
	total int
	err   error
}

type lockViews struct {
	mu    sync.Mutex
	views map[string]*lockView
	slots chan struct{}
}

func newLockViews() lockViews {
	return lockViews{views: map[string]*lockView{}, slots: make(chan struct{}, lockViewReaders)}
}

// lockView answers the SKU's lock queue as read at most lockViewFresh ago, or waits for the read
// under way.
func (s *Server) lockView(ctx context.Context, sku string) (*lockView, error) {
	vs := &s.feeds.views
	vs.mu.Lock()
	if v := vs.views[sku]; v != nil {
		select {
		case <-v.ready:
			if time.Since(v.at) < lockViewFresh {
				vs.mu.Unlock()
				return v, nil
			}
		default:
			vs.mu.Unlock()
			return waitView(ctx, v)
		}
	}
	if len(vs.views) >= lockViewKept {
		for k, old := range vs.views {
			select {
			case <-old.ready:
				if time.Since(old.at) >= lockViewFresh {
					delete(vs.views, k)
				}
			default:
			}
		}
	}
	v := &lockView{ready: make(chan struct{}), at: time.Now()}
	vs.views[sku] = v
	vs.mu.Unlock()
	// Read for everyone who asks meanwhile, so not cut short if this caller leaves.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockViewTimeout)
	defer cancel()
	select {
	case vs.slots <- struct{}{}:
		v.queue, v.total, v.err = s.locks.Queue(rctx, lockPath(sku), lockQueueShown)
		<-vs.slots
	case <-rctx.Done():
		v.err = rctx.Err()
	}
	close(v.ready)
	return waitView(ctx, v)
}

func waitView(ctx context.Context, v *lockView) (*lockView, error) {
	select {
	case <-v.ready:
		return v, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lockQueue is GET /v1/products/:sku/lock: the lock's queue as ZooKeeper held it at most
// lockViewFresh ago.
func (s *Server) lockQueue(c *gin.Context) {
	sku := c.Param("sku")
	if e := validSKU(sku); e != nil {
		abortWith(c, e)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), lockViewTimeout)
	defer cancel()
	if e := s.vetLocks(ctx, ModeZK, sku); e != nil { // whatever the mode: its nodes hold no lock of zkstock's
		abortWith(c, e)
		return
	}
	v, err := s.lockView(ctx, sku)
	if err == nil {
		err = v.err
	}
	if err != nil {
		s.log.Warn("read lock queue", "sku", sku, "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "lock_unavailable", "ZooKeeper did not answer"))
		return
	}
	c.JSON(http.StatusOK, gin.H{"sku": sku, "path": lockPath(sku), "queue": v.queue, "total": v.total})
}

package order

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

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
	o, found, err := s.store.OrderByID(c.Request.Context(), id)
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
	o, found, err := s.store.OrderByRequestID(c.Request.Context(), keys[0])
	s.answerOrder(c, o, found, err)
}

func (s *Server) answerOrder(c *gin.Context, o inventory.Order, found bool, err error) {
	switch {
	case err != nil:
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
	if _, err := s.store.Product(ctx, sku); err != nil {
		abortWith(c, readError(err))
		return
	}
	orders, err := s.store.OrdersPage(ctx, sku, after, limit)
	if err != nil {
		s.log.Warn("orders page", "sku", sku, "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer"))
		return
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

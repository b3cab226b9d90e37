package order

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/inventory"
)

type productResponse struct {
	SKU          string `json:"sku"`
	Stock        int64  `json:"stock"`
	InitialStock int64  `json:"initial_stock"`
}

// product is GET /v1/products/:sku.
func (s *Server) product(c *gin.Context) {
	sku := c.Param("sku")
	if e := validSKU(sku); e != nil {
		abortWith(c, e)
		return
	}
	p, err := s.store.Product(c.Request.Context(), sku)
	if err != nil {
		abortWith(c, readError(err))
		return
	}
	c.JSON(http.StatusOK, productResponse{SKU: p.SKU, Stock: p.Stock, InitialStock: p.InitialStock})
}

// audit is GET /v1/products/:sku/audit.
func (s *Server) audit(c *gin.Context) {
	sku := c.Param("sku")
	if e := validSKU(sku); e != nil {
		abortWith(c, e)
		return
	}
	a, err := s.store.Audit(c.Request.Context(), sku)
	if err != nil {
		abortWith(c, readError(err))
		return
	}
	c.JSON(http.StatusOK, a)
}

// lockQueue is GET /v1/products/:sku/lock: the lock's queue as ZooKeeper holds it now.
// lockQueueShown bounds what GET /v1/products/:sku/lock reads: one ZooKeeper request per entry.
const lockQueueShown = 100

func (s *Server) lockQueue(c *gin.Context) {
	sku := c.Param("sku")
	if e := validSKU(sku); e != nil {
		abortWith(c, e)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	q, total, err := s.locks.Queue(ctx, lockPath(sku), lockQueueShown)
	if err != nil {
		s.log.Warn("read lock queue", "sku", sku, "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "lock_unavailable", "ZooKeeper did not answer"))
		return
	}
	c.JSON(http.StatusOK, gin.H{"sku": sku, "path": lockPath(sku), "queue": q, "total": total})
}

func readError(err error) *apiError {
	if errors.Is(err, inventory.ErrUnknownSKU) {
		return newError(http.StatusNotFound, "unknown_sku", "no such product")
	}
	return newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer")
}

package order

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// requireAdmin guards /admin with Authorization: Bearer <ADMIN_TOKEN>; with no token configured
// the admin API is off.
func (s *Server) requireAdmin(c *gin.Context) {
	if s.cfg.AdminToken == "" {
		abortWith(c, newError(http.StatusForbidden, "admin_disabled", "the admin API is off: set ADMIN_TOKEN"))
		return
	}
	if !s.isAdmin(c) {
		c.Header("WWW-Authenticate", `Bearer realm="zkstock admin"`)
		abortWith(c, newError(http.StatusUnauthorized, "unauthorized", "missing or wrong admin bearer token"))
		return
	}
	c.Next()
}

// isAdmin says whether the request carries the admin bearer token (never, with none configured).
func (s *Server) isAdmin(c *gin.Context) bool {
	got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	return ok && s.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.AdminToken)) == 1
}

// resetProduct is PUT /admin/products/:sku {"stock": N}: create or reset, deleting its orders.
func (s *Server) resetProduct(c *gin.Context) {
	sku := c.Param("sku")
	if e := validSKU(sku); e != nil {
		abortWith(c, e)
		return
	}
	if e := requireJSON(c); e != nil {
		abortWith(c, e)
		return
	}
	var req struct {
		Stock *int64 `json:"stock"`
	}
	if e := decodeJSON(c, &req); e != nil {
		abortWith(c, e)
		return
	}
	if req.Stock == nil || *req.Stock < 0 || *req.Stock > MaxStock {
		abortWith(c, badRequest("stock must be a whole number from 0 to 1000000000"))
		return
	}
	p, err := s.store.Reset(c.Request.Context(), sku, *req.Stock)
	if err != nil {
		s.log.Warn("reset product", "sku", sku, "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer"))
		return
	}
	s.metrics.stock.WithLabelValues(sku).Set(float64(p.Stock))
	s.log.Info("product reset", "sku", sku, "stock", p.Stock)
	c.JSON(http.StatusOK, productResponse{SKU: p.SKU, Stock: p.Stock, InitialStock: p.InitialStock})
}

func (s *Server) getLockMode(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"mode": s.Mode(), "replica": s.cfg.ReplicaID})
}

// setLockMode is PUT /admin/lock-mode {"mode": "zk"}: switch this replica at run time.
func (s *Server) setLockMode(c *gin.Context) {
	if e := requireJSON(c); e != nil {
		abortWith(c, e)
		return
	}
	var req struct {
		Mode *string `json:"mode"`
	}
	if e := decodeJSON(c, &req); e != nil {
		abortWith(c, e)
		return
	}
	if req.Mode == nil {
		abortWith(c, badRequest("mode is required"))
		return
	}
	m, err := ParseLockMode(*req.Mode)
	if err != nil {
		abortWith(c, newError(http.StatusBadRequest, "invalid_request", err.Error()))
		return
	}
	s.mode.Store(m)
	select {
	case s.modeChanged <- struct{}{}:
	default:
	}
	s.log.Info("lock mode changed", "mode", m)
	c.JSON(http.StatusOK, gin.H{"mode": m, "replica": s.cfg.ReplicaID})
}

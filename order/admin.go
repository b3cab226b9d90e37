package order

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/inventory"
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
	s.rememberSKU(sku)
	s.stockGauge(sku).Set(float64(p.Stock))
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
	s.switchMode(m)
	select {
	case s.modeChanged <- struct{}{}:
	default:
	}
	c.JSON(http.StatusOK, gin.H{"mode": m, "replica": s.cfg.ReplicaID})
}

// lowerFence is POST /admin/fences/:issuer/lower {"token": 0, "sku": "SKU-1"}: set the issuer's
// fence mark down to token (on one product, or on all without sku). Only for after the lock
// service's data was wiped, once every old holder is stopped: see inventory.Store.LowerFence and
// tutorial 5 for why it is dangerous.
func (s *Server) lowerFence(c *gin.Context) {
	issuer, err := inventory.ParseIssuer(c.Param("issuer"))
	if err != nil {
		abortWith(c, badRequest("the issuer is zookeeper or redis"))
		return
	}
	if e := requireJSON(c); e != nil {
		abortWith(c, e)
		return
	}
	var req struct {
		Token *int64  `json:"token"`
		SKU   *string `json:"sku"`
	}
	if e := decodeJSON(c, &req); e != nil {
		abortWith(c, e)
		return
	}
	if req.Token == nil || *req.Token < 0 {
		abortWith(c, badRequest("token is required: a whole number from 0, the mark to lower the fence to"))
		return
	}
	sku := ""
	if req.SKU != nil {
		if e := validSKU(*req.SKU); e != nil {
			abortWith(c, e)
			return
		}
		sku = *req.SKU
	}
	n, err := s.store.LowerFence(c.Request.Context(), issuer, *req.Token, sku)
	if err != nil {
		s.log.Warn("lower fence", "issuer", issuer, "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer; nothing was lowered"))
		return
	}
	s.log.Warn("fence lowered by the admin", "issuer", issuer, "token", *req.Token, "sku", sku, "products", n)
	c.JSON(http.StatusOK, gin.H{"issuer": issuer.String(), "token": *req.Token, "sku": sku, "lowered": n})
}

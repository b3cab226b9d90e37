package order

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/inventory"
	"github.com/zkstock/zkstock/sale"
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
	p, err := s.db().Reset(c.Request.Context(), sku, *req.Stock)
	if err != nil {
		s.log.Warn("reset product", "sku", sku, "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer"))
		return
	}
	s.sales.Restocked(sku, p.Stock)
	s.sales.StockGauge(sku).Set(float64(p.Stock))
	s.log.Info("product reset", "sku", sku, "stock", p.Stock)
	c.JSON(http.StatusOK, productResponse{SKU: p.SKU, Stock: p.Stock, InitialStock: p.InitialStock})
}

// lockModeResponse is the fleet's mode as GET and PUT /admin/lock-mode answer it.
type lockModeResponse struct {
	Mode    LockMode `json:"mode"`
	Version int32    `json:"version"` // the mode node's ZooKeeper version: it counts the switches
	Fleet   string   `json:"fleet"`
	Replica string   `json:"replica"` // the replica that answered
	// Members are the fleet's replicas as ZooKeeper knows them now (GET only).
	Members []fleet.MemberInfo `json:"members,omitempty"`
}

// getLockMode is GET /admin/lock-mode: the fleet's mode, read from ZooKeeper now, and its members.
func (s *Server) getLockMode(c *gin.Context) {
	ctx := c.Request.Context()
	mode, err := s.fleet.Current(ctx)
	if err != nil {
		s.log.Warn("read the fleet's mode", "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "fleet_unavailable", "ZooKeeper did not answer: the fleet's mode is not known here now"))
		return
	}
	members, err := s.fleet.Members(ctx)
	if err != nil {
		s.log.Warn("read the fleet's members", "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "fleet_unavailable", "ZooKeeper did not answer: the fleet's members are not known here now"))
		return
	}
	c.JSON(http.StatusOK, lockModeResponse{Mode: LockMode(mode.Name), Version: mode.Version, Fleet: s.cfg.Fleet, Replica: s.cfg.ReplicaID, Members: members})
}

// setLockMode is PUT /admin/lock-mode {"mode": "zk"} (and optionally "version", to switch only
// from that version): switch the whole fleet, through the barrier. It answers once the fleet's
// mode is written; every replica then runs it for every change it begins.
func (s *Server) setLockMode(c *gin.Context) {
	if e := requireJSON(c); e != nil {
		abortWith(c, e)
		return
	}
	var req struct {
		Mode    *string `json:"mode"`
		Version *int32  `json:"version"`
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
		s.log.Debug("switch to an unknown lock mode", "err", err)
		abortWith(c, badRequest(fmt.Sprintf("mode %.64q is not a lock mode: send one of %s", *req.Mode, sale.JoinModes())))
		return
	}
	expect := fleet.AnyVersion
	if req.Version != nil {
		if *req.Version < 0 {
			abortWith(c, badRequest("version must be a whole number from 0: the mode's version the switch is from"))
			return
		}
		expect = *req.Version
	}
	started := time.Now()
	mode, err := s.fleet.Switch(c.Request.Context(), string(m), expect)
	if err != nil {
		e := s.switchError(c.Request.Context(), err, m, expect, mode)
		s.log.Warn("switch of the fleet's lock mode", "to", m, "code", e.Code, "err", err, "took", time.Since(started).String())
		abortWith(c, e)
		return
	}
	s.log.Info("fleet lock mode", "mode", mode.Name, "version", mode.Version, "took", time.Since(started).String())
	c.JSON(http.StatusOK, lockModeResponse{Mode: LockMode(mode.Name), Version: mode.Version, Fleet: s.cfg.Fleet, Replica: s.cfg.ReplicaID})
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
	n, err := s.db().LowerFence(c.Request.Context(), issuer, *req.Token, sku)
	if err != nil {
		s.log.Warn("lower fence", "issuer", issuer, "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer; nothing was lowered"))
		return
	}
	s.log.Warn("fence lowered by the admin", "issuer", issuer, "token", *req.Token, "sku", sku, "products", n)
	c.JSON(http.StatusOK, gin.H{"issuer": issuer.String(), "token": *req.Token, "sku": sku, "lowered": n})
}

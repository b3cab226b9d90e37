package order

import (
	"net/http"

	"github.com/gin-gonic/gin"
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
	p, err := s.db().Product(c.Request.Context(), sku)
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
	a, err := s.db().Audit(c.Request.Context(), sku)
	if err != nil {
		abortWith(c, readError(err))
		return
	}
	c.JSON(http.StatusOK, a)
}

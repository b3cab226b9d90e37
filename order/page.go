package order

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"path"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/inventory"
)

// web holds the live page: HTML, CSS and JS in the binary, no external assets, so that it works
// offline and in a FROM scratch image.
//
//go:embed web
var web embed.FS

var assetTypes = map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

// pageTemplate is index.html with its style and script inlined: GET / is one answer, drawn
// without waiting for another request.
var pageTemplate = template.Must(template.ParseFS(web, "web/index.html"))

// pageData fills pageTemplate.
type pageData struct {
	Style   template.CSS
	Script  template.JS
	Replica string
	Boot    *pageBoot // nil: the database did not answer; the script asks for the products itself
}

// pageBoot is what the page's script starts from: the products for its picker, the product shown
// (?sku=, or the first), and that product's state now, as the stream sends it, so that the first
// frame is drawn with the page. State is absent for a SKU that is not a product.
type pageBoot struct {
	Products []string        `json:"products"`
	SKU      string          `json:"sku"`
	State    json.RawMessage `json:"state,omitempty"`
}

// pageReadTimeout bounds the reads GET / makes for its first frame; past it the page is served
// without it and the stream draws the first frame.
const pageReadTimeout = 2 * time.Second

// page is GET /: the live view of a product's stock and lock queue (?sku= picks the product).
func (s *Server) page(c *gin.Context) {
	style, err1 := web.ReadFile("web/style.css")
	script, err2 := web.ReadFile("web/app.js")
	if err1 != nil || err2 != nil { // cannot happen: both are embedded
		abortWith(c, newError(http.StatusInternalServerError, "internal", "the page's assets are missing"))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), pageReadTimeout)
	defer cancel()
	var body bytes.Buffer
	data := pageData{Style: template.CSS(style), Script: template.JS(script), Replica: s.cfg.ReplicaID, Boot: s.pageBoot(ctx, c.Query("sku"))}
	if err := pageTemplate.Execute(&body, data); err != nil {
		s.log.Error("live page: render", "err", err)
		abortWith(c, newError(http.StatusInternalServerError, "internal", "internal error"))
		return
	}
	c.Header("Cache-Control", "no-store") // it carries the state of the moment
	c.Data(http.StatusOK, "text/html; charset=utf-8", body.Bytes())
}

// pageBoot reads the products and the wanted one's state: the latest snapshot of its producer
// when one runs (no read of the product, its queue or audit), else one made now, without rates (they need two
// snapshots), its queue from the shared lock view.
func (s *Server) pageBoot(ctx context.Context, wanted string) *pageBoot {
	ps, err := s.db().Products(ctx, 200)
	if err != nil {
		s.log.Warn("live page: products", "err", err)
		return nil
	}
	boot := &pageBoot{Products: make([]string, len(ps)), SKU: wanted}
	for i, p := range ps {
		boot.Products[i] = p.SKU
	}
	if boot.SKU == "" && len(ps) > 0 {
		boot.SKU = ps[0].SKU
	}
	if !skuPattern.MatchString(boot.SKU) { // none, or not a SKU: the page without a product
		return boot
	}
	if state := s.feeds.latestState(boot.SKU); state != nil { // a producer runs: the product exists
		boot.State = state
		return boot
	}
	if _, err := s.db().Product(ctx, boot.SKU); err != nil { // unknown, or the database did not answer
		if !errors.Is(err, inventory.ErrUnknownSKU) {
			s.log.Warn("live page: product", "sku", boot.SKU, "err", err)
		}
		return boot
	}
	if boot.State, err = json.Marshal(s.snapshot(ctx, boot.SKU, nil)); err != nil {
		s.log.Error("live page: encode", "sku", boot.SKU, "err", err)
		boot.State = nil
	}
	return boot
}

// asset is GET /assets/:file: the page's style and script on their own, for a reader.
func (s *Server) asset(c *gin.Context) {
	name := c.Param("file")
	typ, ok := assetTypes[path.Ext(name)]
	if !ok || name != path.Base(name) {
		abortWith(c, newError(http.StatusNotFound, "not_found", "no such asset"))
		return
	}
	body, err := web.ReadFile("web/" + name)
	if err != nil {
		abortWith(c, newError(http.StatusNotFound, "not_found", "no such asset"))
		return
	}
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, typ, body)
}

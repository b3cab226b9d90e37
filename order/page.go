package order

import (
	"embed"
	"net/http"
	"path"

	"github.com/gin-gonic/gin"
)

// web holds the live page: HTML, CSS and JS in the binary, no external assets, so that it works
// offline and in a FROM scratch image.
//
//go:embed web
var web embed.FS

var assetTypes = map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

// page is GET /: the live view of a product's stock and lock queue (?sku= picks the product).
func (s *Server) page(c *gin.Context) {
	s.serveWeb(c, "index.html", "text/html; charset=utf-8")
}

// asset is GET /assets/:file.
func (s *Server) asset(c *gin.Context) {
	name := c.Param("file")
	typ, ok := assetTypes[path.Ext(name)]
	if !ok || name != path.Base(name) {
		abortWith(c, newError(http.StatusNotFound, "not_found", "no such asset"))
		return
	}
	s.serveWeb(c, name, typ)
}

func (s *Server) serveWeb(c *gin.Context, name, contentType string) {
	body, err := web.ReadFile("web/" + name)
	if err != nil {
		abortWith(c, newError(http.StatusNotFound, "not_found", "no such asset"))
		return
	}
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, contentType, body)
}

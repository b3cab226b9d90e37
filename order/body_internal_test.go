package order

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// Each body with more than one reading is refused, with a message that names the request's fault
// and no Go type; a body with one reading is read.
func TestDecodeJSONHasOneReading(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, tc := range []struct{ body, want string }{
		{`{"sku":"P2","sku":"P1","qty":1}`, `"sku" is given twice`},
		{`{"sku":"P1","\u0073ku":"P2","qty":1}`, `"sku" is given twice`},
		{`{"items":[{"sku":"A","qty":1,"qty":2}]}`, `"items[0].qty"`},
		{`{"SKU":"P1","QTY":1}`, `unknown field "SKU"`},
		{`{"ſku":"P1","qty":1}`, `unknown field "ſku"`},
		{`{"Items":[],"items":[{"sku":"A","qty":1}]}`, `unknown field "Items"`},
		{`{"sku":"P1","qty":1,"price":0}`, `unknown field "price"`},
		{`[{"sku":"P1","qty":1}]`, `must be a JSON object`},
		{`{"sku":"P1","qty":"1"}`, `field "qty" must be a whole number`},
		{`{"sku":"P1","qty":1e30}`, `field "qty" must be a whole number`},
		{`{"sku":"P1","qty":1.5}`, `field "qty" must be a whole number`},
		{`{"items":{}}`, `field "items" must be an array`},
		{`{"sku":"P1","qty":1}{}`, `single JSON object`},
		{`{"sku":"P1","qty":1`, `not valid JSON`},
		{"{\"sku\":\"P\xff\",\"qty\":1}", `not valid UTF-8`},
		{``, `empty`},
		{`sku=1`, `not valid JSON`},
		{`{"sku":"P1","qty":1}`, ``},
		{`{"items":[{"sku":"A","qty":1}]}`, ``},
	} {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(tc.body))
		var req purchaseRequest
		e := decodeJSON(c, &req)
		switch {
		case tc.want == "" && e != nil:
			t.Errorf("%s: %v, want it read", tc.body, e)
		case tc.want != "" && (e == nil || e.Code != "invalid_request" || !strings.Contains(e.Message, tc.want)):
			t.Errorf("%s: %v, want 400 invalid_request with %q", tc.body, e, tc.want)
		case e != nil && strings.Contains(e.Message, "order."):
			t.Errorf("%s: %q names a Go type", tc.body, e.Message)
		}
	}
}

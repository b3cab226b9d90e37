package order

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// apiError is every error the API answers: {"error": "human readable", "code": "machine_code"},
// and for a purchase the key it ran under, "request_id". Every status and code it is made with is
// one of internal/answers' Table, which says what the answer promises of the change (made, not
// made, not known), and by which the checker judges it.
type apiError struct {
	Status    int    `json:"-"`
	Message   string `json:"error"`
	Code      string `json:"code"`
	SKU       string `json:"sku,omitempty"` // a cart's first short item (out_of_stock)
	RequestID string `json:"request_id,omitempty"`
	// RetryAfter, in whole seconds, goes out as the Retry-After header when set (sku_busy).
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, msg string) *apiError {
	return &apiError{Status: status, Code: code, Message: msg}
}

func badRequest(msg string) *apiError {
	return newError(http.StatusBadRequest, "invalid_request", msg)
}

// errLockLost aborts a deduction whose lease was lost before commit.
var errLockLost = errors.New("lock lost before commit")

func abortWith(c *gin.Context, e *apiError) {
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	c.AbortWithStatusJSON(e.Status, e)
}

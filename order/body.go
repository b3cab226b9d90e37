package order

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// A request body has one reading: the one a proxy, a WAF or a log reading the same bytes by
// RFC 8259 would make. Whatever another reader could take for another request is refused before
// anything is done: a name given twice, a name that matches a field only when case or Unicode
// folding is ignored, an unknown name, bytes that are not UTF-8, a Content-Encoding.

// decodeJSON reads exactly one JSON object into dst, a struct of tagged fields, and answers
// 400 invalid_request for a body with another reading than that one: a name twice in an object
// (at any depth, escapes decoded), a name that is not exactly a field's (matching is
// case-sensitive: "SKU", "ſku", "Items" are unknown), invalid UTF-8, or anything after the object.
// The body is at most maxBodyBytes (limitBody), else 413. Messages name the request's fault, never
// a Go type or a connection's address.
func decodeJSON(c *gin.Context, dst any) *apiError {
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return bodyReadError(err)
	}
	trimmed := bytes.TrimSpace(raw)
	switch {
	case len(trimmed) == 0:
		return badRequest("body is empty; send a JSON object")
	case !utf8.Valid(raw):
		return badRequest("body is not valid UTF-8")
	case trimmed[0] != '{':
		if jsontext.Value(trimmed).IsValid() {
			return badRequest("body must be a JSON object")
		}
		return badRequest("body is not valid JSON")
	}
	return jsonError(jsonv2.Unmarshal(raw, dst, jsonv2.RejectUnknownMembers(true)))
}

// jsonError is the answer to the error of an unmarshal that RejectUnknownMembers and the default
// duplicate-name check ran on; nil for none.
func jsonError(err error) *apiError {
	if err == nil {
		return nil
	}
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		return badRequest(fmt.Sprintf("the name %q is given twice (at %s): send each name once", syn.JSONPointer.LastToken(), fieldOf(syn.JSONPointer)))
	case errors.As(err, &sem) && errors.Is(sem.Err, jsonv2.ErrUnknownName):
		return badRequest(fmt.Sprintf("unknown field %s: names are matched exactly, case included", fieldOf(sem.JSONPointer)))
	case errors.As(err, &sem) && sem.GoType != nil:
		if len(sem.JSONPointer) == 0 {
			return badRequest("body must be a JSON object")
		}
		return badRequest(fmt.Sprintf("field %s must be %s", fieldOf(sem.JSONPointer), jsonKind(sem.GoType)))
	case errors.As(err, &syn) && syn.ByteOffset > 0 && strings.Contains(syn.Error(), "after top-level value"):
		return badRequest("body must hold a single JSON object")
	}
	return badRequest("body is not valid JSON")
}

// fieldOf names the field at p as a client wrote it: "qty", "items[0].sku".
func fieldOf(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 31); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return strconv.Quote(b.String())
}

// jsonKind names the JSON a Go type is read from, in a client's words.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "a whole number (in range)"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array"
	case reflect.Struct:
		return "an object"
	}
	return "of another kind"
}

// bodyReadError is the answer to a body that could not be read whole: too large, too slow, or cut.
func bodyReadError(err error) *apiError {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return newError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body larger than %d bytes", maxBodyBytes))
	case errors.As(err, &netErr) && netErr.Timeout():
		return badRequest(fmt.Sprintf("the body did not arrive within %v of the request's start", readTimeout))
	}
	return badRequest("the body could not be read whole: the request was cut off while it was sent")
}

// refuseEncoding answers a request whose body carries a Content-Encoding other than identity:
// the API reads bodies as sent, so a body labelled gzip (or anything else) is refused, whatever it
// holds, rather than read as something it says it is not. RFC 7694's Accept-Encoding says what
// is taken. It reports whether it refused.
func refuseEncoding(c *gin.Context) bool {
	for _, v := range c.Request.Header.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				c.Header("Accept-Encoding", "identity")
				abortWith(c, newError(http.StatusUnsupportedMediaType, "unsupported_encoding",
					"Content-Encoding "+strconv.Quote(coding[:min(len(coding), 32)])+" is not accepted: send the body as it is, without a Content-Encoding"))
				return true
			}
		}
	}
	return false
}

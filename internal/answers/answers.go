// Package answers is the one table of what each answer of the order API promises of the change a
// request asked for (a purchase, a cart, a cancellation, a switch of the fleet's lock mode): that
// it was made, that nothing was changed, or that the outcome is not known. The HTTP shell (order)
// gives only the answers listed here (its tests hold it to that), and the checker (lincheck)
// holds every answer to its promise: a change answered "nothing was changed" that is later found
// made is an anomaly, however it was found.
package answers

import "net/http"

// Promise is what an answer says of the change it answers.
type Promise uint8

const (
	// Unknown: the answer does not say whether the change was made (outcome_unknown, an internal
	// error, no answer at all); the client learns it by looking the change up by its key.
	Unknown Promise = iota
	// Done: the change was made (or had been, for a replay).
	Done
	// NotDone: nothing was changed, now or later: the client may send it again under a new key
	// without making it twice.
	NotDone
)

func (p Promise) String() string {
	switch p {
	case Done:
		return "done"
	case NotDone:
		return "not done"
	}
	return "unknown"
}

// Answer is one error answer: its HTTP status and code, and its promise.
type Answer struct {
	Status  int
	Code    string
	Promise Promise
}

// Table is every error answer the API gives. A 2xx answer is Done; an answer not listed here
// (a proxy's 502, say) promises nothing: Unknown.
var Table = []Answer{
	// Refused before anything was tried: bad input, no such thing, not allowed.
	{http.StatusBadRequest, "invalid_request", NotDone},
	{http.StatusUnauthorized, "unauthorized", NotDone},
	{http.StatusForbidden, "admin_disabled", NotDone},
	{http.StatusForbidden, "wrong_key", NotDone},
	{http.StatusNotFound, "not_found", NotDone},
	{http.StatusNotFound, "unknown_sku", NotDone},
	{http.StatusNotFound, "unknown_order", NotDone},
	{http.StatusMethodNotAllowed, "method_not_allowed", NotDone},
	{http.StatusRequestEntityTooLarge, "body_too_large", NotDone},
	{http.StatusUnsupportedMediaType, "unsupported_media_type", NotDone},
	{http.StatusUnsupportedMediaType, "unsupported_encoding", NotDone}, // a body with a Content-Encoding
	{http.StatusUnprocessableEntity, "idempotency_key_reused", NotDone},
	// Refused by the server before a handler ran (order/conns.go): too large, too many, not HTTP/1.1.
	{http.StatusRequestHeaderFieldsTooLarge, "headers_too_large", NotDone},
	{http.StatusTooManyRequests, "too_many_connections", NotDone},
	{http.StatusTooManyRequests, "too_many_streams", NotDone}, // one client's share of the live streams
	{http.StatusTooManyRequests, "rate_limited", NotDone},     // look-ups by key, cancellations
	{http.StatusNotImplemented, "unsupported_transfer_encoding", NotDone},
	{http.StatusHTTPVersionNotSupported, "unsupported_http_version", NotDone},
	// Decided: the stock is short, the mode cannot be switched so.
	{http.StatusConflict, "out_of_stock", NotDone},
	{http.StatusConflict, "mode_unavailable", NotDone},
	{http.StatusConflict, "version_conflict", NotDone},
	// Not served, and nothing changed: the change was given up before its COMMIT was sent, or
	// its COMMIT's failure is known.
	{http.StatusServiceUnavailable, "storage_unavailable", NotDone},
	{http.StatusServiceUnavailable, "lock_unavailable", NotDone},
	{http.StatusServiceUnavailable, "lock_path_foreign", NotDone}, // a lock path another ZooKeeper identity made
	{http.StatusServiceUnavailable, "lock_lost", NotDone},
	{http.StatusServiceUnavailable, "stale_token", NotDone},
	{http.StatusServiceUnavailable, "sku_busy", NotDone},
	{http.StatusServiceUnavailable, "shutting_down", NotDone},
	{http.StatusServiceUnavailable, "not_a_member", NotDone},
	{http.StatusServiceUnavailable, "unknown_mode", NotDone},
	{http.StatusServiceUnavailable, "mode_unavailable", NotDone},
	{http.StatusServiceUnavailable, "switching_mode", NotDone},
	{http.StatusServiceUnavailable, "fleet_unavailable", NotDone},
	{http.StatusServiceUnavailable, "switch_timeout", NotDone},
	{http.StatusServiceUnavailable, "switch_failed", NotDone},
	{http.StatusServiceUnavailable, "too_many_streams", NotDone},
	{http.StatusServiceUnavailable, "not_ready", NotDone},
	{499, "client_closed", NotDone}, // logged and counted only: the client has gone
	// The outcome is not known here.
	{http.StatusServiceUnavailable, "outcome_unknown", Unknown},
	{http.StatusServiceUnavailable, "switch_unknown", Unknown},
	{http.StatusInternalServerError, "internal", Unknown},
}

// Of is the promise of an answer: its status and code (status 0: no answer came).
func Of(status int, code string) Promise {
	if status >= 200 && status < 300 {
		return Done
	}
	if a, ok := Lookup(status, code); ok {
		return a.Promise
	}
	return Unknown
}

// Lookup finds an error answer in the Table.
func Lookup(status int, code string) (Answer, bool) {
	for _, a := range Table {
		if a.Status == status && a.Code == code {
			return a, true
		}
	}
	return Answer{}, false
}

// Package answers is the one table of what each answer of the order API promises of the change a
// request asked for (a purchase, a cart, a cancellation, a switch of the fleet's lock mode): that
// it was made, that nothing was changed, or that the outcome is not known, to a key's first attempt
// and to a retry under the same key (For). The HTTP shell (order) gives only the answers listed
// here (its tests hold it to that), and the checker (lincheck) holds every answer to its promise:
// a change answered "nothing was changed" that is later found made, by this attempt or any other
// under its key, is an anomaly, however it was found.
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
	// NotDone: nothing was changed, now or later, by this attempt or any other under its key:
	// the client may send it again under a new key without making it twice.
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
	Promise Promise // to the attempt that got it, when it is its key's first
	// FirstOnly: a retry under the same key is promised nothing (Unknown): the answer came before
	// the key was found free of earlier attempts that may still commit.
	FirstOnly bool
}

// For is the answer's promise to a first attempt, or to a retry under a key sent before.
func (a Answer) For(retry bool) Promise {
	if retry && a.FirstOnly {
		return Unknown
	}
	return a.Promise
}

// Table is every error answer the API gives. A 2xx answer is Done; an answer not listed here
// (a proxy's 502, say) promises nothing: Unknown.
var Table = []Answer{
	// Refused before anything was tried: bad input, no such thing, not allowed. Those given before
	// the change's key was held (FirstOnly: the request itself refused) promise a retry nothing.
	{http.StatusBadRequest, "invalid_request", NotDone, true},
	{http.StatusUnauthorized, "unauthorized", NotDone, false},
	{http.StatusForbidden, "admin_disabled", NotDone, false},
	{http.StatusForbidden, "wrong_key", NotDone, false},
	{http.StatusNotFound, "not_found", NotDone, false},
	{http.StatusNotFound, "unknown_sku", NotDone, false},
	{http.StatusNotFound, "unknown_order", NotDone, false},
	{http.StatusMethodNotAllowed, "method_not_allowed", NotDone, false},
	{http.StatusRequestEntityTooLarge, "body_too_large", NotDone, true},
	{http.StatusUnsupportedMediaType, "unsupported_media_type", NotDone, true},
	{http.StatusUnsupportedMediaType, "unsupported_encoding", NotDone, true}, // a body with a Content-Encoding
	{http.StatusUnprocessableEntity, "idempotency_key_reused", NotDone, false},
	// Refused by the server before a handler ran (order/conns.go): too large, too many, not HTTP/1.1.
	{http.StatusRequestHeaderFieldsTooLarge, "headers_too_large", NotDone, true},
	{http.StatusTooManyRequests, "too_many_connections", NotDone, true},
	{http.StatusTooManyRequests, "too_many_streams", NotDone, false}, // one client's share of the live streams
	{http.StatusTooManyRequests, "rate_limited", NotDone, true},      // look-ups by key, cancellations
	{http.StatusNotImplemented, "unsupported_transfer_encoding", NotDone, true},
	{http.StatusHTTPVersionNotSupported, "unsupported_http_version", NotDone, true},
	// Decided: the stock is short, the mode cannot be switched so.
	{http.StatusConflict, "out_of_stock", NotDone, false},
	{http.StatusConflict, "mode_unavailable", NotDone, false},
	{http.StatusConflict, "version_conflict", NotDone, false},
	// Not served, and nothing changed: the change was given up before its COMMIT was sent, or
	// its COMMIT's failure is known. The key was held and found unmade (sale's HoldPurchase), so
	// no earlier attempt under it made or will make the change: the promise holds for a retry too.
	{http.StatusServiceUnavailable, "storage_unavailable", NotDone, false},
	{http.StatusServiceUnavailable, "lock_unavailable", NotDone, false},
	{http.StatusServiceUnavailable, "lock_path_foreign", NotDone, false}, // a lock path another ZooKeeper identity made
	{http.StatusServiceUnavailable, "lock_lost", NotDone, false},
	{http.StatusServiceUnavailable, "stale_token", NotDone, false},
	{http.StatusServiceUnavailable, "sku_busy", NotDone, false},
	{http.StatusServiceUnavailable, "shutting_down", NotDone, false},
	{http.StatusServiceUnavailable, "not_a_member", NotDone, false},
	{http.StatusServiceUnavailable, "unknown_mode", NotDone, false},
	{http.StatusServiceUnavailable, "mode_unavailable", NotDone, false},
	{http.StatusServiceUnavailable, "switching_mode", NotDone, false},
	{http.StatusServiceUnavailable, "fleet_unavailable", NotDone, false},
	{http.StatusServiceUnavailable, "switch_timeout", NotDone, false},
	{http.StatusServiceUnavailable, "switch_failed", NotDone, false},
	{http.StatusServiceUnavailable, "too_many_streams", NotDone, false},
	{http.StatusServiceUnavailable, "not_ready", NotDone, false},
	{499, "client_closed", NotDone, false}, // logged and counted only: the client has gone
	// The key could not be held: nothing was tried, but an earlier attempt's outcome is not known.
	{http.StatusServiceUnavailable, "key_unavailable", NotDone, true},
	// The outcome is not known here.
	{http.StatusConflict, "request_in_progress", Unknown, false}, // an earlier attempt under the key is in flight
	{http.StatusServiceUnavailable, "outcome_unknown", Unknown, false},
	{http.StatusServiceUnavailable, "switch_unknown", Unknown, false},
	{http.StatusInternalServerError, "internal", Unknown, false},
}

// Of is the promise of an answer to a key's first attempt: its status and code (status 0: no
// answer came).
func Of(status int, code string) Promise { return OfAttempt(status, code, false) }

// OfAttempt is the promise of an answer to a first attempt, or to a retry under its key.
func OfAttempt(status int, code string, retry bool) Promise {
	if status >= 200 && status < 300 {
		return Done
	}
	if a, ok := Lookup(status, code); ok {
		return a.For(retry)
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

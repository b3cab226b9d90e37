package answers

import "testing"

func TestOf(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   Promise
	}{
		{201, "", Done},
		{200, "", Done},
		{409, "out_of_stock", NotDone},
		{503, "storage_unavailable", NotDone},
		{503, "lock_lost", NotDone},
		{503, "outcome_unknown", Unknown},
		{500, "internal", Unknown},
		{0, "", Unknown},                      // no answer
		{502, "", Unknown},                    // not the service's
		{409, "storage_unavailable", Unknown}, // a code under a status the service never gives it
	} {
		if got := Of(c.status, c.code); got != c.want {
			t.Errorf("Of(%d, %q) = %v, want %v", c.status, c.code, got, c.want)
		}
	}
}

// An answer given before the key was held promises nothing to a retry; one given after it holds
// for a retry as for a first attempt.
func TestOfAttempt(t *testing.T) {
	for _, c := range []struct {
		status      int
		code        string
		first, then Promise
	}{
		{201, "", Done, Done},
		{503, "lock_unavailable", NotDone, NotDone},
		{503, "sku_busy", NotDone, NotDone},
		{503, "key_unavailable", NotDone, Unknown},
		{409, "request_in_progress", Unknown, Unknown},
		{503, "outcome_unknown", Unknown, Unknown},
	} {
		if got := OfAttempt(c.status, c.code, false); got != c.first {
			t.Errorf("%d %s to a first attempt: %v, want %v", c.status, c.code, got, c.first)
		}
		if got := OfAttempt(c.status, c.code, true); got != c.then {
			t.Errorf("%d %s to a retry: %v, want %v", c.status, c.code, got, c.then)
		}
	}
}

// Every status and code is listed once, and no 2xx (a success needs no entry).
func TestTableIsOneEntryPerAnswer(t *testing.T) {
	seen := map[Answer]bool{}
	for _, a := range Table {
		k := Answer{Status: a.Status, Code: a.Code}
		if seen[k] {
			t.Errorf("%d %s listed twice", a.Status, a.Code)
		}
		seen[k] = true
		if a.Status < 400 || a.Code == "" {
			t.Errorf("%d %q is not an error answer", a.Status, a.Code)
		}
	}
}

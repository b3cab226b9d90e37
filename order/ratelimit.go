package order

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// The requests that test a key, throttled per client: a look-up by key (GET
// /v1/orders?request_id=) says whether a guessed key was used, and a cancellation (POST
// /v1/orders/:id/cancel) acts on it. Each client (remote IP address; an IPv6 client by its /64)
// has a token bucket per kind, of Config.KeyLookupRate (or CancelRate) a second and a burst of
// KeyLookupBurst (CancelBurst); past it the request is answered 429 rate_limited with
// Retry-After, and nothing is looked up or changed. Requests with the admin token are not
// counted. The limits are each replica's own.

// maxLimited bounds the clients a limiter tracks at once: past it the idle ones are dropped
// at once, and if none is idle, every client shares one bucket until some are.
const maxLimited = 100_000

// clientLimiter is one kind's buckets, a bucket per client.
type clientLimiter struct {
	what  string // "look-ups by key", for the answer
	limit rate.Limit
	burst int
	// idle is how long a bucket takes to fill again: a bucket idle that long is a new one, and
	// is dropped.
	idle time.Duration

	mu        sync.Mutex
	buckets   map[netip.Addr]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newClientLimiter(what string, perSecond float64, burst int) *clientLimiter {
	return &clientLimiter{what: what, limit: rate.Limit(perSecond), burst: burst, buckets: map[netip.Addr]*bucket{},
		idle: time.Duration(float64(burst)/perSecond*float64(time.Second)) + time.Second}
}

// wait takes a token of client's bucket now, or says how long until one is there (nothing taken).
func (l *clientLimiter) wait(client netip.Addr, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > l.idle || len(l.buckets) >= maxLimited {
		l.sweep(now)
	}
	b := l.buckets[client]
	if b == nil {
		if len(l.buckets) >= maxLimited {
			client = netip.Addr{} // no room: the shared bucket
		}
		if b = l.buckets[client]; b == nil {
			b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
			l.buckets[client] = b
		}
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// sweep drops the buckets idle long enough to be full again. l.mu is held.
func (l *clientLimiter) sweep(now time.Time) {
	l.lastSweep = now
	for ip, b := range l.buckets {
		if now.Sub(b.seen) > l.idle {
			delete(l.buckets, ip)
		}
	}
}

// throttle answers a request over its client's limit 429 rate_limited, with Retry-After.
func (s *Server) throttle(l *clientLimiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		if s.isAdmin(c) {
			c.Next()
			return
		}
		if d := l.wait(clientAddr(c.Request), time.Now()); d > 0 {
			e := newError(http.StatusTooManyRequests, "rate_limited", fmt.Sprintf(
				"too many %s from this client: at most %g a second, in bursts of %d; nothing was looked up or changed; retry after the seconds in Retry-After",
				l.what, float64(l.limit), l.burst))
			e.RetryAfter = int(math.Ceil(d.Seconds()))
			abortWith(c, e)
			return
		}
		c.Next()
	}
}

package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/inventory"
)

// The live page's updates: at most one every minEventGap per stream (about 20 a second), and one
// every rateTick at least, so that the rates move while nothing else does.
const (
	minEventGap  = 50 * time.Millisecond
	rateTick     = time.Second
	queueShown   = 50
	replicaSeen  = 10 * time.Second // a replica that has not announced itself for this long is gone
	announceTick = 2 * time.Second
)

// feeds fans a SKU's changes out to the live page's streams: a sale or cancellation on this
// replica, and the lock queue moving in ZooKeeper (one watcher per SKU that has streams).
type feeds struct {
	mu       sync.Mutex
	subs     map[string]map[chan struct{}]struct{}
	watchers map[string]context.CancelFunc
	open     int
	ended    chan struct{} // closed when the server stops: every stream ends
	endOnce  sync.Once
}

func newFeeds() *feeds {
	return &feeds{subs: map[string]map[chan struct{}]struct{}{}, watchers: map[string]context.CancelFunc{}, ended: make(chan struct{})}
}

// notify tells the SKU's streams that something changed; a stream that has not yet sent the last
// change loses nothing by missing this one.
func (f *feeds) notify(sku string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs[sku] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

var errTooManyStreams = errors.New("too many live streams")

// subscribe opens a stream on sku, if fewer than limit are open; the first stream of a SKU
// starts its queue watcher, the last one to leave stops it.
func (s *Server) subscribe(sku string) (<-chan struct{}, func(), error) {
	f := s.feeds
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open >= s.cfg.EventStreams {
		return nil, nil, errTooManyStreams
	}
	f.open++
	ch := make(chan struct{}, 1)
	if f.subs[sku] == nil {
		f.subs[sku] = map[chan struct{}]struct{}{}
		ctx, cancel := context.WithCancel(context.Background())
		f.watchers[sku] = cancel
		go s.watchQueue(ctx, sku)
	}
	f.subs[sku][ch] = struct{}{}
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.open--
		delete(f.subs[sku], ch)
		if len(f.subs[sku]) == 0 {
			delete(f.subs, sku)
			f.watchers[sku]()
			delete(f.watchers, sku)
		}
	}, nil
}

// watchQueue turns every move of the SKU's lock queue into a notification, until ctx ends.
func (s *Server) watchQueue(ctx context.Context, sku string) {
	for {
		err := s.locks.QueueChanged(ctx, lockPath(sku))
		if ctx.Err() != nil {
			return
		}
		s.feeds.notify(sku)
		if err != nil {
			s.log.Debug("live page: queue watch", "sku", sku, "err", err)
			select { // ZooKeeper is away: try again, without spinning
			case <-time.After(500 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}
}

// EndStreams ends every live-page stream now and refuses new ones: called when the HTTP server
// starts to shut down, which would otherwise wait for streams that never end by themselves.
func (s *Server) EndStreams() { s.feeds.endOnce.Do(func() { close(s.feeds.ended) }) }

// snapshot is one update of the live page.
type snapshot struct {
	Replica    string              `json:"replica"`
	Mode       LockMode            `json:"mode"`
	SKU        string              `json:"sku"`
	Audit      inventory.Audit     `json:"audit"`
	Queue      []dlock.QueueEntry  `json:"queue"`
	QueueTotal int                 `json:"queue_total"`
	Replicas   []inventory.Replica `json:"replicas"`
	Rates      rates               `json:"rates"`
	Errors     []string            `json:"errors,omitempty"` // what could not be read this time
	At         time.Time           `json:"at"`
}

type rates struct {
	PurchasesPerSecond float64 `json:"purchases_per_s"`
	WakeupsPerSecond   float64 `json:"wakeups_per_s"`
}

// rateMeter turns this replica's counters into per-second rates between two updates.
type rateMeter struct {
	at             time.Time
	sales, wakeups int64
}

func (m *rateMeter) next(s *Server) rates {
	now, sales, wakeups := time.Now(), s.sales.Load(), s.ZKStats().WatchEvents
	var r rates
	if !m.at.IsZero() {
		if dt := now.Sub(m.at).Seconds(); dt > 0 {
			r = rates{PurchasesPerSecond: float64(sales-m.sales) / dt, WakeupsPerSecond: float64(wakeups-m.wakeups) / dt}
		}
	}
	m.at, m.sales, m.wakeups = now, sales, wakeups
	return r
}

func (s *Server) snapshot(ctx context.Context, sku string, meter *rateMeter) snapshot {
	snap := snapshot{Replica: s.cfg.ReplicaID, Mode: s.Mode(), SKU: sku, Queue: []dlock.QueueEntry{}, Replicas: []inventory.Replica{},
		Rates: meter.next(s), At: time.Now().UTC()}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var err error
	if snap.Audit, err = s.store.Audit(ctx, sku); err != nil {
		snap.Errors = append(snap.Errors, "stock: the database did not answer")
	}
	if snap.Queue, snap.QueueTotal, err = s.locks.Queue(ctx, lockPath(sku), queueShown); err != nil {
		snap.Queue = []dlock.QueueEntry{}
		snap.Errors = append(snap.Errors, "lock queue: ZooKeeper did not answer")
	}
	if snap.Replicas, err = s.store.Replicas(ctx, replicaSeen); err != nil {
		snap.Replicas = []inventory.Replica{}
		snap.Errors = append(snap.Errors, "replicas: the database did not answer")
	}
	return snap
}

// events is GET /v1/events?sku=SKU: Server-Sent Events, one "state" event per change of the SKU
// (its stock, its lock queue), coalesced to one every minEventGap, and one every rateTick.
func (s *Server) events(c *gin.Context) {
	sku, ok := c.GetQuery("sku")
	if !ok || len(c.Request.URL.Query()) != 1 {
		abortWith(c, badRequest("stream a product as /v1/events?sku=SKU (and nothing else)"))
		return
	}
	if e := validSKU(sku); e != nil {
		abortWith(c, e)
		return
	}
	ctx := c.Request.Context()
	if _, err := s.store.Product(ctx, sku); err != nil {
		abortWith(c, readError(err))
		return
	}
	select {
	case <-s.feeds.ended:
		abortWith(c, newError(http.StatusServiceUnavailable, "shutting_down", "the replica is shutting down"))
		return
	default:
	}
	changes, unsubscribe, err := s.subscribe(sku)
	if err != nil {
		abortWith(c, newError(http.StatusServiceUnavailable, "too_many_streams",
			fmt.Sprintf("this replica serves at most %d live streams at once; try another replica or later", s.cfg.EventStreams)))
		return
	}
	defer unsubscribe()
	w := c.Writer
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	meter := &rateMeter{}
	tick := time.NewTicker(rateTick)
	defer tick.Stop()
	var last time.Time
	pending := true
	for {
		if pending {
			if wait := minEventGap - time.Since(last); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return
				case <-s.feeds.ended:
					return
				}
			}
			raw, err := json.Marshal(s.snapshot(ctx, sku, meter))
			if err != nil {
				s.log.Error("live page: encode", "err", err)
				return
			}
			if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", raw); err != nil {
				return
			}
			w.Flush()
			last, pending = time.Now(), false
		}
		select {
		case <-changes:
			pending = true
		case <-tick.C:
			pending = true
		case <-ctx.Done():
			return
		case <-s.feeds.ended:
			return
		}
	}
}

// announce records this replica's mode for the live page, now and every announceTick until the
// server closes, so that every replica's page shows every replica's mode.
func (s *Server) announce(done <-chan struct{}) {
	t := time.NewTicker(announceTick)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), announceTick)
		if err := s.store.Announce(ctx, s.cfg.ReplicaID, string(s.Mode())); err != nil {
			s.log.Debug("announce", "err", err)
		}
		cancel()
		select {
		case <-t.C:
		case <-s.modeChanged:
		case <-done:
			return
		}
	}
}

// productsList is GET /v1/products: the first 200 products, for the live page's picker.
func (s *Server) productsList(c *gin.Context) {
	if len(c.Request.URL.Query()) != 0 {
		abortWith(c, badRequest("GET /v1/products takes no parameters"))
		return
	}
	ps, err := s.store.Products(c.Request.Context(), 200)
	if err != nil {
		s.log.Warn("products", "err", err)
		abortWith(c, newError(http.StatusServiceUnavailable, "storage_unavailable", "the database did not answer"))
		return
	}
	out := make([]productResponse, len(ps))
	for i, p := range ps {
		out[i] = productResponse{SKU: p.SKU, Stock: p.Stock, InitialStock: p.InitialStock}
	}
	c.JSON(http.StatusOK, gin.H{"products": out})
}

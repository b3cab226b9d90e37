package order

import (
	"context"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
	"github.com/zkstock/zkstock/inventory"
)

// feeds is the live page's state: it fans a SKU's state out to the live page's streams. Each SKU that has streams has one
// producer (skuFeed): it makes the snapshots (an audit, the lock queue, the replicas) at most once
// every minEventGap, whatever the number of streams, when something changed (a sale or
// cancellation on this replica, the lock queue moving in ZooKeeper) and every rateTick, and every
// stream writes the latest one. The first stream of a SKU starts its producer, the last one to
// leave stops it.
type feeds struct {
	mu      sync.Mutex
	skus    map[string]*skuFeed
	open    int
	clients map[netip.Addr]int // streams open per client (remote IP)
	ended   chan struct{}      // closed when the server stops: every stream ends
	endOnce sync.Once
	views   lockViews // GET /v1/products/:sku/lock, shared and cached
	members membersView
	sold    atomic.Int64 // purchases this replica made, for the rate shown
}

// skuFeed is one SKU's producer and its streams; frame and seq are guarded by feeds.mu.
type skuFeed struct {
	sku     string
	changed chan struct{} // something changed: make a snapshot
	stop    context.CancelFunc
	subs    map[*subscriber]struct{}
	frame   []byte // the latest event, as written to every stream
	seq     uint64 // frame's number, from 1
}

// subscriber is one stream.
type subscriber struct {
	wake chan struct{} // a new frame is out
	// mu orders the stream's own deadline against the shutdown's: once ended, no later write
	// deadline undoes the one that ended it.
	mu    sync.Mutex
	rc    *http.ResponseController
	ended bool
}

// arm sets the deadline for the next write, unless the stream was ended.
func (sub *subscriber) arm() bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.ended {
		return false
	}
	// An error means the connection cannot take deadlines (HTTP/2 without them, a test
	// recorder): the server's own WriteTimeout is then all there is.
	_ = sub.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return true
}

// end cuts short a write blocked on a reader that does not read.
func (sub *subscriber) end() {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.ended = true
	_ = sub.rc.SetWriteDeadline(time.Now())
}

func newFeeds() *feeds {
	return &feeds{skus: map[string]*skuFeed{}, clients: map[netip.Addr]int{}, ended: make(chan struct{}), views: newLockViews()}
}

// notify tells the SKU's producer that something changed; a producer that has not yet made its
// next snapshot loses nothing by missing this one.
func (f *feeds) notify(sku string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if feed := f.skus[sku]; feed != nil {
		poke(feed.changed)
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// publish makes frame the SKU's latest event and wakes its streams.
func (f *feeds) publish(feed *skuFeed, frame []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	feed.frame = frame
	feed.seq++
	for sub := range feed.subs {
		poke(sub.wake)
	}
}

// latest is the SKU's latest event and its number (0 before the first).
func (f *feeds) latest(feed *skuFeed) ([]byte, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return feed.frame, feed.seq
}

// snapshot is one update of the live page.
type snapshot struct {
	Replica    string             `json:"replica"`
	Mode       LockMode           `json:"mode"`
	SKU        string             `json:"sku"`
	Audit      inventory.Audit    `json:"audit"`
	Queue      []dlock.QueueEntry `json:"queue"`
	QueueTotal int                `json:"queue_total"`
	Replicas   []fleet.MemberInfo `json:"replicas"` // the fleet's members, as ZooKeeper knows them
	Rates      rates              `json:"rates"`
	Errors     []string           `json:"errors,omitempty"` // what could not be read this time
	At         time.Time          `json:"at"`
}

type rates struct {
	PurchasesPerSecond float64 `json:"purchases_per_s"`
	WakeupsPerSecond   float64 `json:"wakeups_per_s"`
	// answers without a turn of the lock: refused past the queue budget (sku_busy), and
	// out_of_stock from a read of the stock (soldout.go)
	RefusedPerSecond float64 `json:"refused_per_s"`
	SoldOutPerSecond float64 `json:"sold_out_fast_per_s"`
}

// rateMeter turns this replica's counters into per-second rates between two updates.
type rateMeter struct {
	at                               time.Time
	sales, wakeups, refused, soldOut int64
}

func (m *rateMeter) next(s *Server) rates {
	now, sales, wakeups, refused, soldOut := time.Now(), s.feeds.sold.Load(), s.sales.ZKStats().WatchEvents, s.sales.Refused(), s.sales.SoldOutFast()
	var r rates
	if !m.at.IsZero() {
		if dt := now.Sub(m.at).Seconds(); dt > 0 {
			r = rates{PurchasesPerSecond: float64(sales-m.sales) / dt, WakeupsPerSecond: float64(wakeups-m.wakeups) / dt,
				RefusedPerSecond: float64(refused-m.refused) / dt, SoldOutPerSecond: float64(soldOut-m.soldOut) / dt}
		}
	}
	m.at, m.sales, m.wakeups, m.refused, m.soldOut = now, sales, wakeups, refused, soldOut
	return r
}

// membersView is the fleet's members as the live page shows them, read from ZooKeeper at most
// once every rateTick however many SKUs are streamed: members change seldom, and a snapshot is
// made up to twenty times a second per SKU. It is for display only; nothing decides on it.
type membersView struct {
	mu   sync.Mutex
	at   time.Time
	list []fleet.MemberInfo
}

func (v *membersView) read(ctx context.Context, m *fleet.Member) ([]fleet.MemberInfo, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.list != nil && time.Since(v.at) < rateTick {
		return v.list, nil
	}
	list, err := m.Members(ctx)
	if err != nil {
		return nil, err
	}
	v.list, v.at = list, time.Now()
	return list, nil
}

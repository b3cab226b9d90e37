package order

import (
	"context"
	"fmt"
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
}

// skuFeed is one SKU's producer and its streams; frame and seq are guarded by feeds.mu.
type skuFeed struct {
	sku     string
	changed chan struct{} // something changed: make a snapshot
	stop    context.CancelFunc
	subs    map[*subscriber]struct{}
	frame   []byte       // the latest event, as written to every stream
	state   []byte       // the latest snapshot, as JSON: frame's data
	seq     uint64       // frame's number, from 1
	sold    atomic.Int64 // purchases of the SKU this replica made since the producer started
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

// sold counts a purchase of sku that this replica made and tells the SKU's producer.
func (f *feeds) sold(sku string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if feed := f.skus[sku]; feed != nil {
		feed.sold.Add(1)
		poke(feed.changed)
	}
}

// publish makes state (a snapshot's JSON) the SKU's latest event and wakes its streams; a nil
// state ends them (the producer failed).
func (f *feeds) publish(feed *skuFeed, state []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	feed.state, feed.frame = state, nil
	if state != nil {
		feed.frame = fmt.Appendf(nil, "event: state\ndata: %s\n\n", state)
	}
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

// latestState is the latest snapshot's JSON of sku's producer, nil when none runs or it has
// made none yet.
func (f *feeds) latestState(sku string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if feed := f.skus[sku]; feed != nil {
		return feed.state
	}
	return nil
}

// snapshot is one update of the live page.
type snapshot struct {
	Replica    string             `json:"replica"`
	Mode       LockMode           `json:"mode"`
	SKU        string             `json:"sku"`
	Audit      inventory.Audit    `json:"audit"`
	Queue      []dlock.QueueEntry `json:"queue"`
	QueueTotal int                `json:"queue_total"`
	Replicas   []fleet.MemberInfo `json:"replicas"`         // the fleet's members, as ZooKeeper knows them
	Rates      *rates             `json:"rates"`            // null until measured (rateMeter)
	Errors     []string           `json:"errors,omitempty"` // what could not be read this time
	At         time.Time          `json:"at"`
}

// rates are per-second rates over the last rateWindow (Window seconds of it, up to rateWindow),
// as this replica measures them between its snapshots, on its own clock. The fleet's rate is the
// SKU's orders in the database (every replica's) as this replica saw them grow; the others are
// this replica's counters: its purchases of the SKU, and its wake-ups and quick answers, which
// the sale engine counts for every product together.
type rates struct {
	Window                  float64 `json:"window_s"`
	FleetPurchasesPerSecond float64 `json:"fleet_purchases_per_s"`
	PurchasesPerSecond      float64 `json:"purchases_per_s"`
	WakeupsPerSecond        float64 `json:"wakeups_per_s"`
	// answers without a turn of the lock: refused past the queue budget (sku_busy), and
	// out_of_stock from a read of the stock (soldout.go)
	RefusedPerSecond float64 `json:"refused_per_s"`
	SoldOutPerSecond float64 `json:"sold_out_fast_per_s"`
}

// Rates are measured over the last rateWindow of snapshots, and shown once they span
// minRateSpan: a rate between two snapshots 50 ms apart would jump with every sale.
const (
	rateWindow  = 2 * time.Second
	minRateSpan = 500 * time.Millisecond
)

// counts are the counters the rates come from, read at one instant.
type counts struct {
	at                                           time.Time
	fleetOrders, sold, wakeups, refused, soldOut int64
}

// rateMeter turns counts read at each snapshot into rates over the last rateWindow; sold is the
// producer's count of this replica's purchases of its SKU.
type rateMeter struct {
	sold    *atomic.Int64
	samples []counts // oldest first, spanning rateWindow at most
}

// countsNow reads the counters now, with the SKU's orders as its audit read them (orders standing
// and cancelled: every order made).
func (s *Server) countsNow(sold *atomic.Int64, a inventory.Audit) counts {
	return counts{at: time.Now(), fleetOrders: a.Orders + a.Cancelled, sold: sold.Load(), wakeups: s.sales.ZKStats().WatchEvents,
		refused: s.sales.Refused(), soldOut: s.sales.SoldOutFast()}
}

// next takes the counts now and says the rates; nil until the samples span minRateSpan. A reset
// of the product deletes its orders: the earlier samples are moved down by the drop, so that the
// rate goes on through it, the orders made between the reset and the sample before it uncounted.
func (m *rateMeter) next(now counts) *rates {
	if n := len(m.samples); n > 0 && now.fleetOrders < m.samples[n-1].fleetOrders {
		drop := m.samples[n-1].fleetOrders - now.fleetOrders
		for i := range m.samples {
			m.samples[i].fleetOrders -= drop
		}
	}
	m.samples = append(m.samples, now)
	for len(m.samples) > 1 && now.at.Sub(m.samples[0].at) > rateWindow {
		m.samples = m.samples[1:]
	}
	base := m.samples[0]
	dt := now.at.Sub(base.at).Seconds()
	if dt < minRateSpan.Seconds() {
		return nil
	}
	per := func(now, then int64) float64 { return float64(now-then) / dt }
	return &rates{Window: dt, FleetPurchasesPerSecond: per(now.fleetOrders, base.fleetOrders), PurchasesPerSecond: per(now.sold, base.sold),
		WakeupsPerSecond: per(now.wakeups, base.wakeups), RefusedPerSecond: per(now.refused, base.refused), SoldOutPerSecond: per(now.soldOut, base.soldOut)}
}

// membersView is the fleet's members as the live page shows them, read from ZooKeeper at most
// once every rateTick however many SKUs are streamed while the fleet is settled (every member
// runs the mode this replica runs): members change seldom, and a snapshot is made up to twenty
// times a second per SKU. While it is not (a switch under way, a member joining or not serving)
// they are read again up to every minEventGap, so that the page does not show a switch as not
// taken for a second after it was. It is for display only; nothing decides on it.
type membersView struct {
	mu   sync.Mutex
	at   time.Time
	list []fleet.MemberInfo
}

func (v *membersView) read(ctx context.Context, m *fleet.Member) ([]fleet.MemberInfo, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if age := time.Since(v.at); v.list != nil && (age < minEventGap || age < rateTick && settled(v.list, m.Mode())) {
		return v.list, nil
	}
	list, err := m.Members(ctx)
	if err != nil {
		return nil, err
	}
	v.list, v.at = list, time.Now()
	return list, nil
}

// settled says whether every member listed runs mode, and serves.
func settled(list []fleet.MemberInfo, mode fleet.Mode) bool {
	for _, x := range list {
		if x.Mode != mode.Name || x.Version != mode.Version || !x.Serving {
			return false
		}
	}
	return true
}

package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/dlock/fleet"
)

// The live page's updates: at most one every minEventGap per SKU (about 20 a second), and one
// every rateTick at least, so that the rates move while nothing else does.
const (
	minEventGap = 50 * time.Millisecond
	rateTick    = time.Second
	queueShown  = 50
)

// A stream's reader must keep up: each event's write may wait streamWriteTimeout for the reader's
// window, after which the stream is dropped and its place freed. streamSendBuffer caps what the
// kernel holds for one stream (SO_SNDBUF; Linux doubles it): without it, loopback and fast links
// let the buffer grow to megabytes, and a reader that stopped reading would be found out only
// after minutes of events had been buffered for it.
const (
	streamWriteTimeout = 2 * time.Second
	streamSendBuffer   = 16 << 10
)

var (
	errTooManyStreams       = errors.New("too many live streams")
	errTooManyClientStreams = errors.New("too many live streams of one client")
)

// subscribe opens a stream on sku for client, if fewer than EventStreams are open, fewer than
// EventStreamsPerClient of them the client's, and the server is not shutting down; the first
// stream of a SKU starts its producer, the last one to leave stops it.
func (s *Server) subscribe(sku string, client netip.Addr, rc *http.ResponseController) (*skuFeed, *subscriber, func(), error) {
	f := s.feeds
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.ended:
		return nil, nil, nil, errStreamsEnded
	default:
	}
	if f.open >= s.cfg.EventStreams {
		return nil, nil, nil, errTooManyStreams
	}
	if f.clients[client] >= s.cfg.EventStreamsPerClient {
		return nil, nil, nil, errTooManyClientStreams
	}
	f.open++
	f.clients[client]++
	feed := f.skus[sku]
	if feed == nil {
		ctx, stop := context.WithCancel(context.Background())
		feed = &skuFeed{sku: sku, changed: make(chan struct{}, 1), stop: stop, subs: map[*subscriber]struct{}{}}
		f.skus[sku] = feed
		go s.produce(ctx, feed)
	}
	sub := &subscriber{wake: make(chan struct{}, 1), rc: rc}
	feed.subs[sub] = struct{}{}
	if feed.seq > 0 {
		poke(sub.wake) // the latest state at once, and a fresh one soon
		poke(feed.changed)
	}
	return feed, sub, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.open--
		if f.clients[client]--; f.clients[client] <= 0 {
			delete(f.clients, client)
		}
		delete(feed.subs, sub)
		if len(feed.subs) == 0 {
			feed.stop()
			delete(f.skus, sku)
		}
	}, nil
}

var errStreamsEnded = errors.New("shutting down")

// produce makes the SKU's snapshots until ctx ends (its last stream left).
func (s *Server) produce(ctx context.Context, feed *skuFeed) {
	defer func() {
		if v := recover(); v != nil { // a bug here must not take the replica down
			s.log.Error("live page: producer panicked; its streams end", "sku", feed.sku, "panic", fmt.Sprint(v))
			s.feeds.publish(feed, nil)
		}
	}()
	go s.watchQueue(ctx, feed)
	meter := &rateMeter{sold: &feed.sold}
	tick := time.NewTicker(rateTick)
	defer tick.Stop()
	var last time.Time
	for {
		if wait := minEventGap - time.Since(last); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
		}
		raw, err := json.Marshal(s.snapshot(ctx, feed.sku, meter))
		if err != nil {
			s.log.Error("live page: encode", "sku", feed.sku, "err", err)
			s.feeds.publish(feed, nil)
			return
		}
		last = time.Now()
		if ctx.Err() != nil {
			return
		}
		s.feeds.publish(feed, raw)
		select {
		case <-feed.changed:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// watchQueue turns the moves of the SKU's lock queue into snapshots, until ctx ends. The producer
// makes one every minEventGap at most, so the watch is set again no sooner either: under load a
// queue moves hundreds of times a second, and each new watch is a ZooKeeper read. A move between
// the watch firing and the next one being set is caught by the snapshot asked for just before it
// is set.
func (s *Server) watchQueue(ctx context.Context, feed *skuFeed) {
	for {
		err := s.locks.QueueChanged(ctx, lockPath(feed.sku))
		if ctx.Err() != nil {
			return
		}
		poke(feed.changed)
		pause := minEventGap
		if err != nil {
			s.log.Debug("live page: queue watch", "sku", feed.sku, "err", err)
			pause = 500 * time.Millisecond // ZooKeeper is away: try again, without spinning
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
		poke(feed.changed)
	}
}

// EndStreams ends every live-page stream now and refuses new ones: called when the HTTP server
// starts to shut down, which would otherwise wait for streams that never end by themselves. A
// stream blocked on a reader that does not read is cut at once.
func (s *Server) EndStreams() {
	f := s.feeds
	f.endOnce.Do(func() {
		f.mu.Lock()
		close(f.ended)
		var subs []*subscriber
		for _, feed := range f.skus {
			for sub := range feed.subs {
				subs = append(subs, sub)
			}
		}
		f.mu.Unlock()
		for _, sub := range subs {
			sub.end()
		}
	})
}

// connKey carries a request's connection, for the streams' send buffer.
type connKey struct{}

// ConnContext is the http.Server's ConnContext: it lets a live stream size its connection's send
// buffer (streamSendBuffer).
func (s *Server) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if jc, ok := c.(*jsonConn); ok {
		c = jc.Conn
	}
	return context.WithValue(ctx, connKey{}, c)
}

// snapshotQueue reads the SKU's lock queue for a snapshot: the feed's producer (one per SKU)
// reads it itself; a one-off snapshot (GET /'s first frame, which anyone may ask for in a loop)
// takes the lock view every caller shares (lockView: reused for lockViewFresh, lockViewReaders
// reads at once), cut to what the page shows.
func (s *Server) snapshotQueue(ctx context.Context, sku string, oneOff bool) ([]dlock.QueueEntry, int, error) {
	if !oneOff {
		return s.locks.Queue(ctx, lockPath(sku), queueShown)
	}
	v, err := s.lockView(ctx, sku)
	if err != nil {
		return nil, 0, err
	}
	if v.err != nil {
		return nil, 0, v.err
	}
	return v.queue[:min(len(v.queue), queueShown)], v.total, nil
}

// snapshot reads the SKU's state now; meter, when not nil, gives it its rates (the feed's
// producer), else it is a one-off (GET /'s first frame).
func (s *Server) snapshot(ctx context.Context, sku string, meter *rateMeter) snapshot {
	snap := snapshot{Replica: s.cfg.ReplicaID, Mode: s.Mode(), SKU: sku, Queue: []dlock.QueueEntry{}, Replicas: []fleet.MemberInfo{},
		At: time.Now().UTC()}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var err error
	if snap.Audit, err = s.db().Audit(ctx, sku); err != nil {
		snap.Errors = append(snap.Errors, "stock: the database did not answer")
	} else if meter != nil {
		snap.Rates = meter.next(s.countsNow(meter.sold, snap.Audit))
	}
	if snap.Queue, snap.QueueTotal, err = s.snapshotQueue(ctx, sku, meter == nil); err != nil {
		snap.Queue = []dlock.QueueEntry{}
		snap.Errors = append(snap.Errors, "lock queue: ZooKeeper did not answer")
	}
	if snap.Replicas, err = s.feeds.members.read(ctx, s.fleet); err != nil {
		snap.Replicas = []fleet.MemberInfo{}
		snap.Errors = append(snap.Errors, "replicas: ZooKeeper did not answer")
	}
	return snap
}

// events is GET /v1/events?sku=SKU: Server-Sent Events, one "state" event per change of the SKU
// (its stock, its lock queue), coalesced to one every minEventGap, and one every rateTick. The
// SKU's producer makes them; a stream that falls behind skips to the latest, and one whose reader
// does not take an event within streamWriteTimeout is dropped.
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
	if _, err := s.db().Product(ctx, sku); err != nil {
		abortWith(c, readError(err))
		return
	}
	rc := http.NewResponseController(c.Writer)
	feed, sub, unsubscribe, err := s.subscribe(sku, clientAddr(c.Request), rc)
	switch {
	case errors.Is(err, errStreamsEnded):
		abortWith(c, newError(http.StatusServiceUnavailable, "shutting_down", "the replica is shutting down"))
		return
	case errors.Is(err, errTooManyClientStreams):
		abortWith(c, newError(http.StatusTooManyRequests, "too_many_streams",
			fmt.Sprintf("this client already has %d live streams open on this replica, the most one client may: close one first", s.cfg.EventStreamsPerClient)))
		return
	case err != nil:
		abortWith(c, newError(http.StatusServiceUnavailable, "too_many_streams",
			fmt.Sprintf("this replica serves at most %d live streams at once; try another replica or later", s.cfg.EventStreams)))
		return
	}
	defer unsubscribe()
	// The server's ReadTimeout would end the stream (its pending read of the idle connection
	// times out and cancels the request), and its WriteTimeout would cut it: a stream has
	// per-write deadlines instead. The errors mean a writer without deadlines (a test recorder).
	_ = rc.SetReadDeadline(time.Time{})
	if tc, ok := ctx.Value(connKey{}).(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(streamSendBuffer); err != nil {
			s.log.Debug("live page: send buffer", "err", err)
		}
	}
	if !sub.arm() {
		return
	}
	w := c.Writer
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.WriteHeaderNow()
	if err := rc.Flush(); err != nil {
		return
	}
	var sent uint64
	for {
		select {
		case <-sub.wake:
		case <-ctx.Done():
			return
		case <-s.feeds.ended:
			return
		}
		frame, seq := s.feeds.latest(feed)
		if seq == sent {
			continue
		}
		if frame == nil || !sub.arm() { // the producer failed, or the server is shutting down
			return
		}
		if _, err := w.Write(frame); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		sent = seq
	}
}

// productsList is GET /v1/products: the first 200 products, for the live page's picker.
func (s *Server) productsList(c *gin.Context) {
	if len(c.Request.URL.Query()) != 0 {
		abortWith(c, badRequest("GET /v1/products takes no parameters"))
		return
	}
	ps, err := s.db().Products(c.Request.Context(), 200)
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

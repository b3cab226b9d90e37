package order

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zkstock/zkstock/dlock"
)

type metrics struct {
	orders *prometheus.CounterVec
	// the children of orders every sale counts, made once rather than looked up by label per request
	created, replayed prometheus.Counter
	cancellations     *prometheus.CounterVec
	lockWait          prometheus.Histogram
	lockHold          prometheus.Histogram
	stock             *prometheus.GaugeVec
	// purchases answered out_of_stock without a turn of the lock (soldout.go): before they
	// queued, or sent away from the queue
	beforeQueue, leftQueue prometheus.Counter
}

var lockBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newMetrics(reg *prometheus.Registry, zkStats func() dlock.Stats) (*metrics, error) {
	m := &metrics{
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zkstock_orders_total", Help: "Purchase requests by result (created, replayed, or the error code).",
		}, []string{"result"}),
		cancellations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zkstock_cancellations_total", Help: "Cancellation requests by result (cancelled, replayed, or the error code).",
		}, []string{"result"}),
		lockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "zkstock_lock_wait_seconds", Help: "Time spent waiting for a SKU lock.", Buckets: lockBuckets,
		}),
		lockHold: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "zkstock_lock_hold_seconds", Help: "Time a SKU lock was held, release included.", Buckets: lockBuckets,
		}),
		stock: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "zkstock_stock", Help: "Stock left as this replica last saw it.",
		}, []string{"sku"}),
	}
	m.created, m.replayed = m.orders.WithLabelValues("created"), m.orders.WithLabelValues("replayed")
	soldOut := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "zkstock_sold_out_fast_total", Help: "Purchases answered out_of_stock by a read of the stock, without a turn of the lock: before queueing, or sent away from the queue.",
	}, []string{"where"})
	m.beforeQueue, m.leftQueue = soldOut.WithLabelValues("before_queue"), soldOut.WithLabelValues("left_queue")
	for _, c := range []prometheus.Collector{m.orders, m.cancellations, soldOut, m.lockWait, m.lockHold, m.stock, zkCollector{zkStats},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("order: register metrics: %w", err)
		}
	}
	return m, nil
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}

// zkCollector exports the lock clients' own counters at scrape time.
type zkCollector struct{ stats func() dlock.Stats }

var (
	zkWatchDesc = prometheus.NewDesc("zkstock_zk_watch_events_total", "Watch notifications received by lock waiters.", nil, nil)
	zkOpsDesc   = prometheus.NewDesc("zkstock_zk_ops_total", "ZooKeeper operations issued by the lock client.", []string{"op"}, nil)
	zkAcqDesc   = prometheus.NewDesc("zkstock_zk_acquisitions_total", "ZooKeeper locks taken (a zk-batch lock sells many purchases).", nil, nil)
)

func (z zkCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- zkWatchDesc
	ch <- zkOpsDesc
	ch <- zkAcqDesc
}

func (z zkCollector) Collect(ch chan<- prometheus.Metric) {
	st := z.stats()
	ch <- prometheus.MustNewConstMetric(zkWatchDesc, prometheus.CounterValue, float64(st.WatchEvents))
	ch <- prometheus.MustNewConstMetric(zkAcqDesc, prometheus.CounterValue, float64(st.Acquisitions))
	for op, n := range map[string]int64{"create": st.Creates, "delete": st.Deletes, "children": st.ChildrenCalls, "exists": st.ExistsCalls, "get": st.GetCalls} {
		ch <- prometheus.MustNewConstMetric(zkOpsDesc, prometheus.CounterValue, float64(n), op)
	}
}

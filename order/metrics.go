package order

import (
	"database/sql"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zkstock/zkstock/dlock"
	"github.com/zkstock/zkstock/sale"
)

// metrics are the replica's Prometheus series, in a registry of its own: the shell's (the answers
// by result) and the sale engine's (sale.Metrics).
type metrics struct {
	reg    *prometheus.Registry
	orders *prometheus.CounterVec
	// the children of orders every sale counts, made once rather than looked up by label per request
	created, replayed prometheus.Counter
	cancellations     *prometheus.CounterVec
	sale              sale.Metrics // the lock waits and holds, the sold-out answers, the stock
	stock             *prometheus.GaugeVec
}

var lockBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// newMetrics registers every series, the ZooKeeper counters read from zkStats, the keys held
// from keysHeld and the database pool's from pool at scrape time.
func newMetrics(zkStats func() dlock.Stats, keysHeld func() int64, pool func() sql.DBStats) (*metrics, error) {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zkstock_orders_total", Help: "Purchase requests by result (created, replayed, or the error code).",
		}, []string{"result"}),
		cancellations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zkstock_cancellations_total", Help: "Cancellation requests by result (cancelled, replayed, or the error code).",
		}, []string{"result"}),
	}
	lockWait := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "zkstock_lock_wait_seconds", Help: "Time spent waiting for a SKU lock.", Buckets: lockBuckets,
	})
	lockHold := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "zkstock_lock_hold_seconds", Help: "Time a SKU lock was held, release included.", Buckets: lockBuckets,
	})
	stock := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "zkstock_stock", Help: "Stock left as this replica last saw it.",
	}, []string{"sku"})
	m.stock = stock
	m.created, m.replayed = m.orders.WithLabelValues("created"), m.orders.WithLabelValues("replayed")
	soldOut := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "zkstock_sold_out_fast_total", Help: "Purchases answered out_of_stock by a read of the stock, without a turn of the lock: before queueing, or sent away from the queue.",
	}, []string{"where"})
	falseRefusals := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "zkstock_false_refusals_total", Help: "sku_busy refusals whose buyer the queue it would have joined served within the budget.",
	})
	unanswered := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "zkstock_commits_unanswered_total", Help: "Changes whose COMMIT went unanswered, settled with the SKU's lock held (up to the commit bound).",
	}, []string{"sku"})
	m.sale = sale.Metrics{LockWait: lockWait, LockHold: lockHold, Stock: func(sku string) sale.Gauge { return stock.WithLabelValues(sku) },
		SoldOutBeforeQueue: soldOut.WithLabelValues("before_queue"), SoldOutLeftQueue: soldOut.WithLabelValues("left_queue"), FalseRefusals: falseRefusals,
		CommitsUnanswered: func(sku string) sale.Counter { return unanswered.WithLabelValues(sku) }}
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "zkstock_keys_held", Help: "Idempotency keys this replica holds for changes not yet answered.",
	}, func() float64 { return float64(keysHeld()) })
	for _, c := range []prometheus.Collector{m.orders, m.cancellations, soldOut, falseRefusals, unanswered, lockWait, lockHold, stock, held, zkCollector{zkStats}, poolCollector{pool},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("order: register metrics: %w", err)
		}
	}
	return m, nil
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
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

// poolCollector exports the database pool's stats at scrape time, under the names of Prometheus's
// collectors.NewDBStatsCollector (which needs a fixed *sql.DB; the store in use changes on a
// cluster): a statement that waits for a connection waits behind the replica's others.
type poolCollector struct{ stats func() sql.DBStats }

var (
	poolLabels   = prometheus.Labels{"db_name": "inventory"}
	poolOpenDesc = prometheus.NewDesc("go_sql_open_connections", "The number of established connections both in use and idle.", nil, poolLabels)
	poolUseDesc  = prometheus.NewDesc("go_sql_in_use_connections", "The number of connections currently in use.", nil, poolLabels)
	poolMaxDesc  = prometheus.NewDesc("go_sql_max_open_connections", "Maximum number of open connections to the database.", nil, poolLabels)
	poolWaitDesc = prometheus.NewDesc("go_sql_wait_count_total", "The total number of connections waited for.", nil, poolLabels)
	poolWaitDur  = prometheus.NewDesc("go_sql_wait_duration_seconds_total", "The total time blocked waiting for a new connection.", nil, poolLabels)
)

func (p poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolOpenDesc, poolUseDesc, poolMaxDesc, poolWaitDesc, poolWaitDur} {
		ch <- d
	}
}

func (p poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := p.stats()
	ch <- prometheus.MustNewConstMetric(poolOpenDesc, prometheus.GaugeValue, float64(st.OpenConnections))
	ch <- prometheus.MustNewConstMetric(poolUseDesc, prometheus.GaugeValue, float64(st.InUse))
	ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(st.MaxOpenConnections))
	ch <- prometheus.MustNewConstMetric(poolWaitDesc, prometheus.CounterValue, float64(st.WaitCount))
	ch <- prometheus.MustNewConstMetric(poolWaitDur, prometheus.CounterValue, st.WaitDuration.Seconds())
}

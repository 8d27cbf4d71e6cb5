// Package metrics is the server's Prometheus registry: the Go runtime and
// process, GraphQL operations, storage calls, the fan-out and the
// websockets, served at /metrics.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"

	"herald/server/ws"
	"herald/store/service"
	"herald/store/storage"
)

// maxOperationNames bounds the operation label: names are chosen by
// clients, and every distinct one would be a new series in Prometheus.
const maxOperationNames = 100

// Operation label values besides the operations' own names.
const (
	opAnonymous = "anonymous"
	opOther     = "other"
)

// latencyBuckets span an embedded store call (tens of µs) to a slow
// MongoDB request (seconds).
var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// opLatencyBuckets are finer from 0.5 to 10 ms, where a timeline read's
// latency and its 5 ms objective lie, so that quantiles estimated from them
// (histogram_quantile, herald bench) are close to the truth.
var opLatencyBuckets = []float64{.00025, .0005, .00075, .001, .0015, .002, .003, .004, .005, .0075, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// Metrics is the server's Prometheus registry, separate from the global
// one so that /metrics shows what Herald registers and nothing a library
// registers behind its back.
type Metrics struct {
	reg   *prometheus.Registry
	ops   *opMetrics
	store *storeMetrics
}

// New returns a registry holding the Go runtime and process collectors,
// the GraphQL operation metrics and the storage call metrics.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), ops: newOpMetrics(), store: newStoreMetrics()}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.ops.total, m.ops.duration,
		m.store.total, m.store.duration,
	)
	return m
}

// WrapBackend returns b instrumented with the storage metrics; with no
// metrics (nil m), b itself.
func (m *Metrics) WrapBackend(b storage.Backend) storage.Backend {
	if m == nil {
		return b
	}
	if sh, ok := b.(storageHealth); ok {
		m.reg.MustRegister(storageCollector{sh})
	}
	return m.store.wrap(b)
}

// storageHealth is what the embedded store tells of its disk.
type storageHealth interface {
	Health() error
	DamagedWALTails() int
}

// storageCollector exports storageHealth at each scrape.
type storageCollector struct{ st storageHealth }

var (
	descStorageWritable = prometheus.NewDesc("herald_storage_writable",
		"1 while the embedded store takes writes, 0 while it refuses them with STORAGE_FULL (its disk is full).", nil, nil)
	descWALDamaged = prometheus.NewDesc("herald_storage_wal_damaged_total",
		"Write-ahead logs found at start ending with a damaged record, which was dropped (it may have been an acknowledged write).", nil, nil)
)

// Describe implements prometheus.Collector.
func (storageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descStorageWritable
	ch <- descWALDamaged
}

// Collect implements prometheus.Collector.
func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	writable := 1.0
	if c.st.Health() != nil {
		writable = 0
	}
	ch <- prometheus.MustNewConstMetric(descStorageWritable, prometheus.GaugeValue, writable)
	ch <- prometheus.MustNewConstMetric(descWALDamaged, prometheus.CounterValue, float64(c.st.DamagedWALTails()))
}

// Operations returns the gqlgen extension that counts and times GraphQL
// operations, for the GraphQL server to use.
func (m *Metrics) Operations() graphql.HandlerExtension { return m.ops }

// Handler serves the registry in the Prometheus text (or protobuf) format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Watch registers the gauges and counters read from svc and wsa at each
// scrape, and the counter of refused websockets, which wsa feeds.
func (m *Metrics) Watch(svc *service.Service, wsa *ws.Adapter) {
	m.reg.MustRegister(serviceCollector{svc: svc}, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "herald_websocket_connections",
		Help: "Open websocket connections.",
	}, func() float64 { return float64(wsa.Len()) }))
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_websocket_refused_total",
		Help: "Websockets refused or closed, and subscriptions refused, by reason: subprotocol, connections_total, connections_address, connections_user, subscriptions, token_expired, token_revoked.",
	}, []string{"reason"})
	byReason := make(map[string]prometheus.Counter, len(ws.RefusedReasons))
	for _, r := range ws.RefusedReasons {
		byReason[r] = refused.WithLabelValues(r)
	}
	m.reg.MustRegister(refused)
	wsa.Refused = func(reason string) { byReason[reason].Inc() }
}

// WatchEvents registers herald_events_change_stream, read from changeStream
// at each scrape: whether inbox events cross instances through a MongoDB
// change stream (true) or by polling (false); ok is false while that is
// not decided yet, and the gauge is then left out.
func (m *Metrics) WatchEvents(changeStream func() (v, ok bool)) {
	m.reg.MustRegister(eventsCollector(changeStream))
}

// eventsCollector exports WatchEvents' gauge.
type eventsCollector func() (v, ok bool)

var descEventsChangeStream = prometheus.NewDesc("herald_events_change_stream",
	"1 while inbox events cross instances through a MongoDB change stream, 0 while by polling the events collection (MongoDB without change streams, or -mongodb-events poll).", nil, nil)

// Describe implements prometheus.Collector.
func (eventsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descEventsChangeStream }

// Collect implements prometheus.Collector.
func (c eventsCollector) Collect(ch chan<- prometheus.Metric) {
	v, ok := c()
	if !ok {
		return
	}
	f := 0.0
	if v {
		f = 1
	}
	ch <- prometheus.MustNewConstMetric(descEventsChangeStream, prometheus.GaugeValue, f)
}

// serviceCollector exports service.Service.Stats, read once per scrape so
// that the figures of one scrape agree with each other.
type serviceCollector struct{ svc *service.Service }

var (
	descJobsQueued = prometheus.NewDesc("herald_fanout_jobs_queued",
		"Stored fan-out jobs waiting to run in this process.", nil, nil)
	descJobsRunning = prometheus.NewDesc("herald_fanout_jobs_running",
		"Stored fan-out jobs running in this process (at most one a lane).", nil, nil)
	descLaneHeld = prometheus.NewDesc("herald_fanout_lane_held",
		"1 if this process runs the fan-out lane's stored jobs (without a shared store always; else while it holds the lane's lease), else 0.", []string{"lane"}, nil)
	descLaneQueue = prometheus.NewDesc("herald_fanout_lane_queue_jobs",
		"Stored fan-out jobs waiting on the lane in this process (on owner lanes: the lane's shares of message jobs and its owners' jobs).", []string{"lane"}, nil)
	descJobsDone = prometheus.NewDesc("herald_fanout_jobs_done_total",
		"Stored fan-out jobs run to their end, by kind.", []string{"kind"}, nil)
	descDeliveries = prometheus.NewDesc("herald_fanout_deliveries_total",
		"Inbox entries added by delivery jobs (strategy cache: active followers reached); rate() gives deliveries per second.", nil, nil)
	descRebuilds = prometheus.NewDesc("herald_inbox_rebuilds_total",
		"Inbox rebuilds of returning users run to their end.", nil, nil)
	descRebuildsStarted = prometheus.NewDesc("herald_inbox_rebuilds_started_total",
		"Inbox rebuilds of returning users started by this process.", nil, nil)
	descSubscriptions = prometheus.NewDesc("herald_subscriptions",
		"Open inbox subscriptions in this process.", nil, nil)
	descDropped = prometheus.NewDesc("herald_subscribers_dropped_total",
		"Subscribers dropped because they fell too far behind.", nil, nil)
	descFanoutLag = prometheus.NewDesc("herald_fanout_lag_seconds",
		"Age of the oldest stored fan-out job not yet finished (0: none): how far delivery is behind. Every process reports it, the lease holder from its queue, the others from storage read at most every 5 s.", nil, nil)
	descFanoutQueue = prometheus.NewDesc("herald_fanout_queue_jobs",
		"Stored fan-out jobs not yet finished, the running one included, as herald_fanout_lag_seconds sees them.", nil, nil)
)

// backlogTimeout bounds the storage read a scrape may make to learn the
// fan-out backlog (a process that does not hold the fan-out lease).
const backlogTimeout = 2 * time.Second

// jobKinds names the stored job kinds in the kind label.
var jobKinds = []struct {
	kind storage.JobKind
	name string
}{
	{storage.JobDeliver, "deliver"},
	{storage.JobRetract, "retract"},
	{storage.JobFollow, "follow"},
	{storage.JobUnfollow, "unfollow"},
	{storage.JobRebuild, "rebuild"},
	{storage.JobHideReposts, "hide_reposts"},
}

// Describe implements prometheus.Collector.
func (serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobsQueued, descJobsRunning, descLaneHeld, descLaneQueue, descJobsDone, descDeliveries, descRebuilds, descRebuildsStarted, descSubscriptions, descDropped, descFanoutLag, descFanoutQueue} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c serviceCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descJobsQueued, float64(st.JobsQueued))
	gauge(descJobsRunning, float64(st.JobsRunning))
	for i, l := range st.Lanes {
		held := 0.0
		if l.Held {
			held = 1
		}
		lane := strconv.Itoa(i)
		gauge(descLaneHeld, held, lane)
		gauge(descLaneQueue, float64(l.Queued), lane)
	}
	for _, k := range jobKinds {
		counter(descJobsDone, st.JobsDone[k.kind], k.name)
	}
	counter(descDeliveries, st.Delivered)
	counter(descRebuilds, st.JobsDone[storage.JobRebuild])
	counter(descRebuildsStarted, st.RebuildsStarted)
	gauge(descSubscriptions, float64(st.Events.Subscriptions))
	counter(descDropped, st.Events.Dropped)
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	// If storage cannot tell, the two are left out of the scrape, which
	// an alert sees as absent rather than as a lag of 0.
	if b, err := c.svc.FanoutBacklog(ctx); err == nil {
		gauge(descFanoutLag, b.Lag.Seconds())
		gauge(descFanoutQueue, float64(b.Jobs))
	}
}

// opMetrics is a gqlgen handler extension that counts GraphQL operations
// by name, type and outcome, and times them:
//
//   - ok: executed without errors; error: executed, with errors in the
//     response (partial data included); refused: rejected before execution
//     (parse or validation failure, depth, complexity, rate limit).
//   - A subscription is counted once, at its first response: its first
//     event (or its end), ok, or its refusal by the resolver, error. Its
//     events are not counted, and it is not timed.
//   - The duration runs from the start of the request (of a batch: of the
//     batch) to the response; refused operations are not timed.
//
// The series of a name are resolved once and kept, so an operation costs
// a map lookup under a read lock and no allocation.
type opMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec

	mu     sync.RWMutex
	series map[opKey]*opSeries
	names  map[string]bool // names with series, at most maxOperationNames
}

type opKey struct {
	name string
	typ  string
}

type opSeries struct {
	ok, err, refused prometheus.Counter
	duration         prometheus.Observer
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
	graphql.ResponseInterceptor
} = (*opMetrics)(nil)

func newOpMetrics() *opMetrics {
	return &opMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_graphql_operations_total",
			Help: "GraphQL operations by name (at most 100 names, the rest as other), type and outcome (ok, error, refused).",
		}, []string{"operation", "type", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herald_graphql_operation_duration_seconds",
			Help:    "Time from the request to the response of executed queries and mutations.",
			Buckets: opLatencyBuckets,
		}, []string{"operation", "type"}),
		series: make(map[opKey]*opSeries),
		names:  make(map[string]bool),
	}
}

// ExtensionName implements graphql.HandlerExtension.
func (*opMetrics) ExtensionName() string { return "Metrics" }

// Validate implements graphql.HandlerExtension.
func (*opMetrics) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation implements graphql.OperationInterceptor. It counts
// subscriptions only; queries and mutations are counted with their
// response in InterceptResponse, which gqlgen calls once per event for a
// subscription but not for a subscription the resolver refuses.
func (m *opMetrics) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	opCtx := graphql.GetOperationContext(ctx)
	if opCtx.Operation == nil || opCtx.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	s := m.lookup(opCtx.Operation.Name, string(ast.Subscription), true)
	h := next(ctx)
	first := true
	return func(ctx context.Context) *graphql.Response {
		resp := h(ctx)
		if first {
			first = false
			if resp != nil && len(resp.Errors) > 0 {
				s.err.Inc()
			} else {
				s.ok.Inc()
			}
		}
		return resp
	}
}

// InterceptResponse implements graphql.ResponseInterceptor. A request
// refused before execution reaches it with its errors already recorded;
// an executed operation's response context starts empty.
func (m *opMetrics) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	refused := len(graphql.GetErrors(ctx)) > 0
	resp := next(ctx)
	if resp == nil || !graphql.HasOperationContext(ctx) {
		return resp
	}
	opCtx := graphql.GetOperationContext(ctx)
	if refused {
		name, typ := opCtx.OperationName, "unknown"
		if op := opCtx.Operation; op != nil {
			name, typ = op.Name, string(op.Operation)
		}
		m.lookup(name, typ, false).refused.Inc()
		return resp
	}
	op := opCtx.Operation
	if op == nil || op.Operation == ast.Subscription {
		return resp // a subscription's event: counted in InterceptOperation
	}
	s := m.lookup(op.Name, string(op.Operation), true)
	if len(resp.Errors) > 0 {
		s.err.Inc()
	} else {
		s.ok.Inc()
	}
	if start := opCtx.Stats.OperationStart; !start.IsZero() {
		s.duration.Observe(time.Since(start).Seconds())
	}
	return resp
}

// lookup returns the series of an operation name and type. Only an
// executed operation (its name then one the schema validated) may add a
// name; a refused one counts under a known name or as other, so malformed
// requests cannot use up the names.
func (m *opMetrics) lookup(name, typ string, mayAdd bool) *opSeries {
	if name == "" {
		name = opAnonymous
	}
	m.mu.RLock()
	s := m.series[opKey{name, typ}]
	if s == nil && !m.named(name, mayAdd) {
		s = m.series[opKey{opOther, typ}]
	}
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.named(name, mayAdd) {
		name = opOther
	} else if name != opAnonymous {
		m.names[name] = true
	}
	k := opKey{name, typ}
	if s = m.series[k]; s != nil {
		return s
	}
	s = &opSeries{
		ok:       m.total.WithLabelValues(name, typ, "ok"),
		err:      m.total.WithLabelValues(name, typ, "error"),
		refused:  m.total.WithLabelValues(name, typ, "refused"),
		duration: m.duration.WithLabelValues(name, typ),
	}
	m.series[k] = s
	return s
}

// named reports whether name has, or may get, series of its own. Callers
// hold mu.
func (m *opMetrics) named(name string, mayAdd bool) bool {
	return name == opAnonymous || m.names[name] || (mayAdd && len(m.names) < maxOperationNames)
}

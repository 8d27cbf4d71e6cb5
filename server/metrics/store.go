package metrics

import (
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herald/store"
	"herald/store/storage"
)

// storeMetrics counts and times the calls to the storage backend, by
// method: each is one round trip to storage. It is the storage.Observer of
// the backend the server runs on.
type storeMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// series are each method's series, resolved once: the map is only
	// read once built, so the calls of many requests share it unlocked.
	series map[string]*callSeries
}

func newStoreMetrics() *storeMetrics {
	m := &storeMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_store_calls_total",
			Help: "Storage backend calls by method and outcome (ok, not_found, conflict, error).",
		}, []string{"method", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herald_store_call_duration_seconds",
			Help:    "Duration of storage backend calls, by method.",
			Buckets: latencyBuckets,
		}, []string{"method"}),
		series: map[string]*callSeries{},
	}
	// Every method of the contract and of its optional interfaces, read
	// from their types so that a new method has its series at once.
	for _, t := range []reflect.Type{reflect.TypeFor[storage.Backend](), reflect.TypeFor[storage.Leaser](), reflect.TypeFor[storage.GroupDeliverer]()} {
		for i := range t.NumMethod() {
			name := t.Method(i).Name
			m.series[name] = &callSeries{
				ok:       m.total.WithLabelValues(name, "ok"),
				notFound: m.total.WithLabelValues(name, "not_found"),
				conflict: m.total.WithLabelValues(name, "conflict"),
				failed:   m.total.WithLabelValues(name, "error"),
				duration: m.duration.WithLabelValues(name),
			}
		}
	}
	return m
}

// wrap returns b with its calls measured.
func (m *storeMetrics) wrap(b storage.Backend) storage.Backend { return storage.Observe(b, m) }

// Observe implements storage.Observer.
func (m *storeMetrics) Observe(method string, start time.Time, err error) {
	if c := m.series[method]; c != nil {
		c.done(start, err)
	}
}

// callSeries are one method's series.
type callSeries struct {
	ok, notFound, conflict, failed prometheus.Counter
	duration                       prometheus.Observer
}

// done records a call that started at start and returned err.
func (c *callSeries) done(start time.Time, err error) {
	c.duration.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		c.ok.Inc()
	case store.ErrorCode(err) == store.ENOTFOUND:
		c.notFound.Inc()
	case store.ErrorCode(err) == store.ECONFLICT:
		c.conflict.Inc()
	default:
		c.failed.Inc()
	}
}

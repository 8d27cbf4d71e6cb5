package httpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"herald/store"
	"herald/store/service"
)

// health serves /healthz and /readyz. Liveness is unconditional while the
// process serves HTTP; readiness is true once storage is open and fan-out
// runs, and false again as soon as shutdown begins, so a load balancer stops
// sending traffic before connections are closed. It is false too while the
// storage's own check fails (the embedded store's disk is full), with the
// reason in the body.
//
// Asked for detail (?detail, or Accept: application/json), /readyz answers
// with the same status a JSON object instead (readyDetail): the reason, and
// the fan-out backlog, which does not change readiness: every instance
// shares the one backlog, so taking them out of the load balancer would
// not drain it (-fanout-max-lag holds off new posts instead).
type health struct {
	ready Readiness
	svc   *service.Service // nil: no fan-out detail
}

// readyDetail is /readyz's JSON answer.
type readyDetail struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	// Fanout is left out if it cannot be learnt (storage does not answer).
	Fanout *fanoutDetail `json:"fanout,omitempty"`
}

// fanoutDetail is the fan-out backlog as /readyz shows it.
type fanoutDetail struct {
	// LagSeconds is the age of the oldest stored job not finished, as
	// herald_fanout_lag_seconds; QueueJobs their number.
	LagSeconds float64 `json:"lagSeconds"`
	QueueJobs  int     `json:"queueJobs"`
	// MaxLagSeconds is -fanout-max-lag (0: off); Behind tells whether the
	// lag is past it, so that posts and reposts are refused.
	MaxLagSeconds float64 `json:"maxLagSeconds"`
	Behind        bool    `json:"behind"`
}

// wantsDetail reports whether r asks /readyz for its JSON detail.
func wantsDetail(r *http.Request) bool {
	return r.URL.Query().Has("detail") || strings.Contains(r.Header.Get("Accept"), "application/json")
}

// detail returns the JSON answer of /readyz, with why it is not ready.
func (h *health) detail(ctx context.Context, why string) readyDetail {
	d := readyDetail{Ready: why == "", Reason: why}
	if h.svc == nil {
		return d
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if b, err := h.svc.FanoutBacklog(ctx); err == nil {
		limit := h.svc.FanoutMaxLag()
		d.Fanout = &fanoutDetail{LagSeconds: b.Lag.Seconds(), QueueJobs: b.Jobs, MaxLagSeconds: limit.Seconds(),
			Behind: limit > 0 && b.Lag > limit}
	}
	return d
}

// Readiness is the server's readiness: a flag that startup, the backend's
// readiness loop and shutdown set, and the storage's check, asked at each
// /readyz.
type Readiness struct {
	ok     atomic.Bool
	check  atomic.Pointer[func() error]
	detail atomic.Pointer[func() string]
}

// Detail makes /readyz add the line detail returns (how inbox events cross
// instances, on MongoDB) after its status, ready or not.
func (r *Readiness) Detail(detail func() string) { r.detail.Store(&detail) }

// detailLine returns the detail's line, "" without one.
func (r *Readiness) detailLine() string {
	if d := r.detail.Load(); d != nil {
		if s := (*d)(); s != "" {
			return s + "\n"
		}
	}
	return ""
}

// Store sets the flag.
func (r *Readiness) Store(ok bool) { r.ok.Store(ok) }

// Load returns the flag, whatever the storage's check would say.
func (r *Readiness) Load() bool { return r.ok.Load() }

// Watch makes /readyz also ask check, which returns why the storage cannot
// take writes, or nil.
func (r *Readiness) Watch(check func() error) { r.check.Store(&check) }

// reason returns why the server is not ready, "" if it is.
func (r *Readiness) reason() string {
	if !r.ok.Load() {
		return "not ready"
	}
	if c := r.check.Load(); c != nil {
		if err := (*c)(); err != nil {
			return "not ready: " + store.ErrorMessage(err)
		}
	}
	return ""
}

func (h *health) live(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func (h *health) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	why := h.ready.reason()
	if wantsDetail(r) {
		w.Header().Set("Content-Type", "application/json")
		if why != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(h.detail(r.Context(), why))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, why+"\n"+h.ready.detailLine())
		return
	}
	_, _ = io.WriteString(w, "ok\n"+h.ready.detailLine())
}

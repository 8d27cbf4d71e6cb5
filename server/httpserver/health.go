package httpserver

import (
	"io"
	"net/http"
	"sync/atomic"

	"herald/store"
)

// health serves /healthz and /readyz. Liveness is unconditional while the
// process serves HTTP; readiness is true once storage is open and fan-out
// runs, and false again as soon as shutdown begins, so a load balancer stops
// sending traffic before connections are closed. It is false too while the
// storage's own check fails (the embedded store's disk is full), with the
// reason in the body.
type health struct {
	ready Readiness
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

func (h *health) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if why := h.ready.reason(); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, why+"\n"+h.ready.detailLine())
		return
	}
	_, _ = io.WriteString(w, "ok\n"+h.ready.detailLine())
}

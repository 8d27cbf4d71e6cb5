package httpserver

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// StartPprof serves the runtime profiles (net/http/pprof: CPU, heap,
// allocations, blocking, goroutines, traces) on addr, a listener of their
// own: never on the API's address, since a profile shows the server's
// internals and costs CPU while it runs. Bind addr to loopback or to an
// operators' network.
func StartPprof(addr string, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ps := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() { _ = ps.Serve(ln) }()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return ps, nil
}

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// benchServer is the server a benchmark measures: a child process bench
// started on a data directory of its own, or a running one at a URL.
type benchServer struct {
	base    string // http://host:port
	pprof   string // http://host:port of the profiles, "" if not served
	dataDir string // "" for a server at a URL
	client  *http.Client
	cmd     *exec.Cmd
	exited  chan struct{}
}

func newBenchClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute,
			// Compression would measure gzip, not Herald.
			DisableCompression: true,
		},
	}
}

// startBenchServer starts this binary as a server on dataDir, listening on
// a free loopback port with the runtime profiles on another, with the
// given extra flags, and waits until it is ready. Its warnings and errors
// go to stderr.
func startBenchServer(ctx context.Context, dataDir string, flags []string, stderr io.Writer) (*benchServer, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: find this binary: %w", err)
	}
	args := append([]string{
		"-addr", "127.0.0.1:0", "-pprof", "127.0.0.1:0", "-data", dataDir, "-log-format", "json",
		"-rate-limit-user", "0", "-rate-limit-address", "0",
		"-rate-limit-query-user", "0", "-rate-limit-query-address", "0",
		// Bench measures how far delivery falls behind: back-pressure on
		// posts would hide it.
		"-fanout-max-lag", "0",
		// Every subscriber connects from 127.0.0.1.
		"-max-websockets-per-address", "0",
	}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the server: %w", err)
	}
	s := &benchServer{dataDir: dataDir, client: newBenchClient(128), cmd: cmd, exited: make(chan struct{})}
	addrs := make(chan [2]string, 1)
	go func() {
		// The addresses come in the first log lines; after them only
		// warnings and errors are passed on. The goroutine clears its
		// own copy of addrs, which the caller goes on reading.
		addrs := addrs
		var api, pprof string
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec struct {
				Level, Msg, Addr string
			}
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				fmt.Fprintf(stderr, "server: %s\n", sc.Bytes())
				continue
			}
			switch {
			case rec.Msg == "listening":
				api = rec.Addr
			case rec.Msg == "pprof listening":
				pprof = rec.Addr
			case rec.Level == "WARN" || rec.Level == "ERROR":
				fmt.Fprintf(stderr, "server: %s\n", sc.Bytes())
			}
			if api != "" && pprof != "" && addrs != nil {
				addrs <- [2]string{api, pprof}
				addrs = nil
			}
		}
		_ = cmd.Wait()
		close(s.exited)
	}()
	select {
	case a := <-addrs:
		s.base, s.pprof = "http://"+a[0], "http://"+a[1]
	case <-s.exited:
		return nil, fmt.Errorf("bench: the server exited at start: %v", cmd.ProcessState)
	case <-time.After(2 * time.Minute):
		s.stop()
		return nil, errors.New("bench: the server did not start within 2 minutes")
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := s.client.Get(s.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("bench: the server was not ready within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts a started server down gracefully, and kills it if it takes
// over a minute. A server at a URL is left running.
func (s *benchServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// gql runs one GraphQL operation and decodes its data into out. A
// response with errors is an error.
func (s *benchServer) gql(ctx context.Context, token, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message    string `json:"message"`
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if len(r.Errors) > 0 {
		return fmt.Errorf("%s: %s", r.Errors[0].Extensions.Code, r.Errors[0].Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Data, out)
}

// metricsSnapshot is one scrape of /metrics.
type metricsSnapshot map[string]*dto.MetricFamily

func (s *benchServer) scrape(ctx context.Context) (metricsSnapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: scrape metrics: HTTP %d (is -metrics off?)", resp.StatusCode)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("bench: parse metrics: %w", err)
	}
	return fams, nil
}

// collectGarbage has the server run a garbage collection, through the
// heap profile's gc parameter, so that heap figures count live memory.
func (s *benchServer) collectGarbage(ctx context.Context) error {
	if s.pprof == "" {
		return errors.New("bench: the server serves no profiles (-pprof)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.pprof+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// matches reports whether m has every label of want.
func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// sum adds the values of the counters or gauges named name with labels.
func (ms metricsSnapshot) sum(name string, labels map[string]string) float64 {
	total := 0.0
	for _, m := range ms[name].GetMetric() {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// histogram is the cumulative buckets of one histogram, added over the
// series with the given labels.
type histogram struct {
	bounds []float64
	counts []float64 // cumulative, by bound
	count  float64
}

func (ms metricsSnapshot) histogram(name string, labels map[string]string) histogram {
	var h histogram
	for _, m := range ms[name].GetMetric() {
		if !matches(m, labels) || m.Histogram == nil {
			continue
		}
		hist := m.GetHistogram()
		if h.bounds == nil {
			for _, b := range hist.GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
			h.counts = make([]float64, len(h.bounds))
		}
		for i, b := range hist.GetBucket() {
			if i < len(h.counts) {
				h.counts[i] += float64(b.GetCumulativeCount())
			}
		}
		h.count += float64(hist.GetSampleCount())
	}
	return h
}

// since returns the observations made between earlier and h.
func (h histogram) since(earlier histogram) histogram {
	d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts), count: h.count - earlier.count}
	for i := range d.counts {
		if i < len(earlier.counts) {
			d.counts[i] -= earlier.counts[i]
		}
	}
	return d
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linearly within the bucket it falls in.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			if c == below {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.bounds[i], c
	}
	return lower // above the last bound: the last bound is all it knows
}

// dirSize returns the bytes in the files under dir.
func dirSize(dir string) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file compacted away meanwhile
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	return size, err
}

// splitInts parses a comma-separated list of positive integers.
func splitInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &n); err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

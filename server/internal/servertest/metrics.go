package servertest

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
)

// Scraped is one scrape of /metrics.
type Scraped map[string]*dto.MetricFamily

// Scrape reads base+"/metrics" in the text format.
func Scrape(t testing.TB, base string) Scraped {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// Find returns the metric of family name whose labels are exactly labels
// ("k=v" pairs), or nil.
func (s Scraped) Find(name string, labels ...string) *dto.Metric {
	f := s[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for i, l := range m.GetLabel() {
			if l.GetName()+"="+l.GetValue() != labels[i] {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// Value returns the value of a counter or gauge, 0 if absent.
func (s Scraped) Value(name string, labels ...string) float64 {
	m := s.Find(name, labels...)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Samples returns a histogram's sample count, 0 if absent.
func (s Scraped) Samples(name string, labels ...string) uint64 {
	if m := s.Find(name, labels...); m != nil && m.Histogram != nil {
		return m.Histogram.GetSampleCount()
	}
	return 0
}

// Op returns the count of herald_graphql_operations_total for one series.
func (s Scraped) Op(name, typ, outcome string) float64 {
	return s.Value("herald_graphql_operations_total", "operation="+name, "outcome="+outcome, "type="+typ)
}

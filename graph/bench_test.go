package graph_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"herald/graph"
	"herald/store/service"
)

// BenchmarkInboxQuery measures the timeline read as a client makes it, in
// process and without the network: a POST of inbox(first: 50) with authors
// and counts through the HTTP transport, the resolvers, the loaders and the
// response encoding, on the embedded store under each strategy. It reports
// the backend calls per read beside time and allocations.
//
//	go test -run '^$' -bench InboxQuery -benchmem ./graph/
//
// The bucket/executor variant resolves the page with gqlgen's executor
// alone, without the inbox fast path: what the fast path saves.
func BenchmarkInboxQuery(b *testing.B) {
	b.Run(backendEmbedded, func(b *testing.B) {
		for _, st := range service.Strategies {
			b.Run(string(st), func(b *testing.B) { benchmarkInboxQuery(b, true) })
		}
		b.Run("bucket/executor", func(b *testing.B) { benchmarkInboxQuery(b, false) })
	})
}

func benchmarkInboxQuery(b *testing.B, fast bool) {
	e := newEnv(b, nil)
	reader := timelineOfFive(b, e, 120, "message %d, of an ordinary length for a timeline")
	body := `{"query":"query Home { inbox(first: 50) { totalCount unreadCount edges { cursor node { id text createdAt author { handle displayName } } } pageInfo { hasNextPage endCursor } } }"}`
	h := withViewer(e.tokens, e.srv)
	if !fast {
		h = withViewer(e.tokens, graph.NewServerWithoutFastPaths(e.cfg))
	}
	read := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+reader)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	// Warm: the parsed-query cache, and under cache the cached inbox.
	if rec := read(); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"message 119`) {
		b.Fatalf("warm-up read: %d %s", rec.Code, rec.Body.String())
	}
	e.backend.Reset()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if rec := read(); rec.Code != http.StatusOK {
			b.Fatalf("read: %d %s", rec.Code, rec.Body.String())
		}
	}
	b.StopTimer()
	_, calls := e.backend.Snapshot()
	b.ReportMetric(float64(calls)/float64(b.N), "backend-calls/op")
}

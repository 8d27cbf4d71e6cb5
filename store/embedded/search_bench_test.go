package embedded_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// BenchmarkSearchUsers measures a typeahead page (searchUsers, first 10,
// one and two letter prefixes) among 10,000 and 100,000 users with
// generated names: the time of a page, p50 and p99, should not grow with
// the number of users, since a search reads at most SearchCandidates index
// entries. go test ./store/embedded -run '^$' -bench SearchUsers -benchtime 2000x
func BenchmarkSearchUsers(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("users=%d", n), func(b *testing.B) {
			st, err := embedded.Open(b.TempDir(), embedded.Options{})
			require.NoError(b, err)
			b.Cleanup(func() { _ = st.Close() })
			loadNamedUsers(b, st, n)
			svc := service.NewService(st, pubsub.NewHub(), service.Options{})
			rng := rand.New(rand.NewPCG(1, 2))
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				q := string(rune('a' + rng.IntN(26)))
				if rng.IntN(2) == 0 {
					q += string(rune('a' + rng.IntN(26)))
				}
				start := time.Now()
				_, err := svc.SearchUsers(context.Background(), q, 10, nil)
				times = append(times, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// loadNamedUsers bulk-loads n users named from syllables, so that every
// short prefix is shared by many.
func loadNamedUsers(b *testing.B, st *embedded.Store, n int) {
	b.Helper()
	syl := []string{"an", "be", "co", "da", "el", "fi", "go", "ha", "is", "jo", "ka", "li", "mo", "na", "ol", "pe", "qu", "ra", "si", "to", "ul", "vi", "wa", "xe", "yo", "zu"}
	rng := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		w := ""
		for range 2 + rng.IntN(2) {
			w += syl[rng.IntN(len(syl))]
		}
		return w
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const chunk = 5_000
	for i := 0; i < n; i += chunk {
		bk := &storage.Bulk{}
		for j := i; j < min(i+chunk, n); j++ {
			at := now.Add(time.Duration(j) * time.Millisecond)
			bk.Users = append(bk.Users, &store.User{ID: store.NewID(at), Handle: fmt.Sprintf("%s_%d", word(), j), DisplayName: word() + " " + word(),
				CreatedAt: at, LastSeenAt: at, FollowerCount: rng.IntN(1000)})
		}
		require.NoError(b, st.LoadBulk(context.Background(), bk))
	}
}

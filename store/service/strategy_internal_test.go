package service

import (
	"testing"
	"time"

	"herald/store"
	"herald/store/storage"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMergeItems(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := make([]store.ID, 8)
	for i := range ids {
		ids[i] = store.NewID(base.Add(time.Duration(i) * time.Second))
	}
	list := func(is ...int) []store.InboxItem {
		out := make([]store.InboxItem, len(is))
		for k, i := range is {
			out[k] = store.InboxItem{InboxEntry: store.InboxEntry{MessageID: ids[i]}}
		}
		return out
	}
	idx := func(items []store.InboxItem) []int {
		var out []int
		for _, it := range items {
			for i, id := range ids {
				if id == it.MessageID {
					out = append(out, i)
				}
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		n     int
		asc   bool
		lists [][]store.InboxItem
		want  []int
	}{
		{"Ascending", 10, true, [][]store.InboxItem{list(1, 4, 7), list(0, 5, 6), list(2, 3)}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"AscendingLimitOnceEach", 3, true, [][]store.InboxItem{list(1, 3, 5), list(1, 2)}, []int{1, 2, 3}},
		{"Interleaved", 10, false, [][]store.InboxItem{list(7, 4, 1), list(6, 5, 0), list(3, 2)}, []int{7, 6, 5, 4, 3, 2, 1, 0}},
		{"Limit", 3, false, [][]store.InboxItem{list(7, 4, 1), list(6, 5, 0)}, []int{7, 6, 5}},
		{"OnceEach", 10, false, [][]store.InboxItem{list(7, 5, 3), list(5, 3, 1)}, []int{7, 5, 3, 1}},
		{"Empty", 10, false, [][]store.InboxItem{nil, list(2), nil}, []int{2}},
		{"None", 10, false, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, idx(mergeItems(tc.n, tc.asc, tc.lists...)))
		})
	}
}

func TestParseStrategy(t *testing.T) {
	for _, st := range Strategies {
		got, err := ParseStrategy(string(st))
		require.NoError(t, err)
		assert.Equal(t, st, got)
	}
	_, err := ParseStrategy("buckets")
	assert.ErrorContains(t, err, "unknown fan-out strategy")
	assert.Equal(t, storage.LayoutBuckets, StrategyHybrid.Layout())
	assert.Equal(t, storage.LayoutNone, StrategyRead.Layout())
}

// BenchmarkMergeItems measures hybrid's read-time merge: a page of 51 from
// the stored inbox with 51 of the celebrities' pulled messages.
func BenchmarkMergeItems(b *testing.B) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stored, pulled := make([]store.InboxItem, 51), make([]store.InboxItem, 51)
	for i := range 51 {
		// Newest first, interleaved.
		stored[i] = store.InboxItem{InboxEntry: store.InboxEntry{MessageID: store.NewID(base.Add(time.Duration(200-2*i) * time.Second))}}
		pulled[i] = store.InboxItem{InboxEntry: store.InboxEntry{MessageID: store.NewID(base.Add(time.Duration(199-2*i) * time.Second))}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if out := mergeItems(51, false, stored, pulled); len(out) != 51 {
			b.Fatalf("%d items", len(out))
		}
	}
}

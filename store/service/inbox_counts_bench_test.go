package service_test

import (
	"context"
	"testing"

	"herald/store"
	"herald/store/service"
)

// manyGraph is a reader who follows 1,200 authors, each with a few
// messages: where fan-out on read costs the most, and where counting the
// followees' outboxes costs as much as the page.
var manyGraph = strategyGraph{Authors: 1199, AuthorFollowers: 1, Messages: 3, CelebFollowers: 10}

// BenchmarkInboxManyFollowees measures a first page of that reader's home
// timeline under read and cache (a hit), with and without its counts.
//
//	go test -run '^$' -bench InboxManyFollowees -count=5 ./store/service
func BenchmarkInboxManyFollowees(b *testing.B) {
	gr := buildGraph(b, manyGraph)
	for _, s := range []service.Strategy{service.StrategyRead, service.StrategyCache} {
		b.Run(string(s), func(b *testing.B) {
			x := newBench(b, gr, manyGraph, s)
			ctx := context.Background()
			for _, counts := range []bool{true, false} {
				name := map[bool]string{true: "counts", false: "nocounts"}[counts]
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						page, err := x.svc.InboxWith(ctx, x.reader, store.Forward(store.NilID, pageSize), service.InboxOptions{Counts: counts})
						if err != nil {
							b.Fatal(err)
						}
						if len(page.Items) != pageSize || (page.Counts.Total > 0) != counts {
							b.Fatalf("%d items, counts %+v", len(page.Items), page.Counts)
						}
					}
				})
			}
		})
	}
}

package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// testBlocksAtHome checks blocks and mutes in home timelines under every
// strategy (docs/design.md#blocks-and-mutes): after ann blocks bo and cy
// mutes dee, ann's timeline has no message of bo's and no repost of one,
// bo's none of ann's, cy's none of dee's, before or after; pages stay full
// and the counts count what the pages show; later messages never arrive,
// not even as live events; the block removed the follows both ways and
// refuses new ones; unmuting brings dee's messages back. Every strategy
// shows the same timelines.
func testBlocksAtHome(t *testing.T, open OpenFunc) {
	got := make(map[service.Strategy]map[string]homeTimeline)
	for _, st := range service.Strategies {
		t.Run(string(st), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			// eve, with three followers, is a celebrity under hybrid: her
			// posts are pulled, her reposts pushed.
			svc, hub := newServiceWith(t, b, c, service.Options{Strategy: st, CelebrityThreshold: 2})
			users := make(map[string]store.ID)
			for _, h := range []string{"ann", "bo", "cy", "dee", "eve", "fay"} {
				users[h] = mustSignUp(t, svc, "user_"+h).ID
			}
			for _, f := range [][2]string{{"ann", "bo"}, {"bo", "ann"}, {"ann", "eve"}, {"ann", "fay"}, {"bo", "eve"}, {"cy", "dee"}, {"cy", "eve"}} {
				_, err := svc.Follow(ctx, users[f[0]], users[f[1]])
				require.NoError(t, err)
			}
			labels := make(map[store.ID]string)
			posts := make(map[string]*store.Message)
			postAs := func(h, label string) {
				m, err := svc.PostMessage(ctx, users[h], service.PostInput{Text: label})
				require.NoError(t, err)
				posts[label], labels[m.ID] = m, label
			}
			repost := func(h, label string) {
				_, err := svc.Repost(ctx, users[h], posts[label].ID)
				require.NoError(t, err)
				ids, err := b.FindReposts(ctx, users[h], []store.MessageKey{posts[label].Key()})
				require.NoError(t, err)
				labels[ids[0]] = h + " reposts " + label
			}
			for _, p := range [][2]string{{"bo", "bo1"}, {"ann", "ann1"}, {"dee", "dee1"}, {"fay", "fay1"}, {"fay", "fay2"}, {"eve", "eve1"}, {"fay", "fay3"}} {
				postAs(p[0], p[1])
			}
			for _, l := range []string{"bo1", "ann1", "dee1"} {
				repost("eve", l)
			}
			waitIdle(t, svc)
			before := labelled(t, svc, users["cy"], labels)
			require.Contains(t, before.Items, "dee1", "cy follows dee")

			// Events are labelled once the test has stopped writing labels.
			var mu sync.Mutex
			added := make(map[string][]store.ID)
			for _, h := range []string{"ann", "bo", "cy"} {
				require.NoError(t, hub.SubscribeFunc(t.Context(), users[h], func(ev store.Event) bool {
					mu.Lock()
					defer mu.Unlock()
					if ev.Type == store.EventAdded {
						added[h] = append(added[h], ev.MessageID)
					}
					return true
				}, func() {}))
			}

			_, err := svc.Block(ctx, users["ann"], users["bo"])
			require.NoError(t, err)
			_, err = svc.Block(ctx, users["ann"], users["bo"])
			require.NoError(t, err, "blocking twice changes nothing")
			_, err = svc.Mute(ctx, users["cy"], users["dee"])
			require.NoError(t, err)
			waitIdle(t, svc)

			for _, f := range [][2]string{{"ann", "bo"}, {"bo", "ann"}} {
				_, err := svc.Follow(ctx, users[f[0]], users[f[1]])
				assert.Equal(t, store.EFORBIDDEN, store.ErrorCode(err), "%s follows %s", f[0], f[1])
			}
			follows, err := svc.FindFollowing(ctx, users["ann"], []store.ID{users["bo"]})
			require.NoError(t, err)
			assert.Equal(t, []bool{false}, follows, "ann no longer follows bo")
			follows, err = svc.FindFollowing(ctx, users["bo"], []store.ID{users["ann"]})
			require.NoError(t, err)
			assert.Equal(t, []bool{false}, follows, "bo no longer follows ann")
			follows, err = svc.FindFollowing(ctx, users["cy"], []store.ID{users["dee"]})
			require.NoError(t, err)
			assert.Equal(t, []bool{true}, follows, "a mute keeps the follow")

			// Later messages and reposts, read after they arrive.
			for _, p := range [][2]string{{"bo", "bo2"}, {"ann", "ann2"}, {"dee", "dee2"}, {"fay", "fay4"}} {
				postAs(p[0], p[1])
			}
			for _, l := range []string{"bo2", "ann2", "dee2", "fay4"} {
				repost("eve", l)
			}
			waitIdle(t, svc)

			tl := make(map[string]homeTimeline)
			for _, h := range []string{"ann", "bo", "cy"} {
				tl[h] = labelled(t, svc, users[h], labels)
			}
			hides := map[string]string{"ann": "bo", "bo": "ann", "cy": "dee"}
			for h, hidden := range hides {
				own := 0
				for _, l := range tl[h].Items {
					assert.NotContains(t, l, hidden, "%s's timeline shows nothing of %s", h, hidden)
					if strings.HasPrefix(l, h) {
						own++
					}
				}
				others := len(tl[h].Items) - own
				assert.Equal(t, homeTimeline{Items: tl[h].Items, Total: others, Unread: others}, tl[h], "%s's counts count what the pages show", h)
			}
			mu.Lock()
			for h, hidden := range hides {
				require.NotEmpty(t, added[h], "%s hears of what reaches them", h)
				for _, m := range added[h] {
					assert.NotContains(t, labels[m], hidden, "a live event to %s", h)
				}
			}
			mu.Unlock()

			// Unmuting brings dee's messages back to cy's timeline.
			_, err = svc.Unmute(ctx, users["cy"], users["dee"])
			require.NoError(t, err)
			waitIdle(t, svc)
			tl["cy unmuted"] = labelled(t, svc, users["cy"], labels)
			assert.Subset(t, tl["cy unmuted"].Items, []string{"dee1", "dee2"})
			_, err = svc.Unblock(ctx, users["ann"], users["bo"])
			require.NoError(t, err)
			follows, err = svc.FindFollowing(ctx, users["ann"], []store.ID{users["bo"]})
			require.NoError(t, err)
			assert.Equal(t, []bool{false}, follows, "an unblock leaves the follows removed")
			_, err = svc.Follow(ctx, users["bo"], users["ann"])
			require.NoError(t, err, "after an unblock they may follow again")
			got[st] = tl
		})
	}
	want := got[service.StrategyBucket]
	require.NotNil(t, want)
	assert.Equal(t, []string{"eve reposts dee2", "fay4", "ann2", "eve reposts dee1", "fay3", "eve1", "fay2", "fay1", "ann1"}, want["ann"].Items,
		"ann: neither bo's messages nor eve's reposts of them, though ann no longer follows bo")
	assert.Equal(t, []string{"eve reposts fay4", "eve reposts dee2", "bo2", "eve reposts dee1", "eve1", "bo1"}, want["bo"].Items,
		"bo: neither ann's messages nor eve's reposts of them")
	assert.Equal(t, []string{"eve reposts fay4", "eve reposts ann2", "eve reposts bo2", "eve reposts ann1", "eve reposts bo1", "eve1"}, want["cy"].Items,
		"cy: nothing of dee's, though cy follows dee")
	for _, st := range service.Strategies[1:] {
		if got[st] != nil {
			assert.Equal(t, want, got[st], "strategy %s against %s", st, service.StrategyBucket)
		}
	}
}

// testBlockCosts measures what blocks and mutes cost in storage calls (a
// round trip each on MongoDB): a home page under each strategy with no
// relation and with some (the filter's cost per page: the hidden set, two
// reads made at once, under the strategies that read outboxes; nothing
// under those that store inboxes), and block, mute and unmute requests
// with the jobs they start.
func testBlockCosts(t *testing.T, open OpenFunc) {
	for _, st := range service.Strategies {
		t.Run(string(st), func(t *testing.T) {
			counter := &callCounter{calls: map[string]int{}}
			b, c := openBackend(t, open), newClock()
			// ann, with two followers, is a celebrity under hybrid.
			svc, _ := newServiceWith(t, storage.Observe(b, counter), c, service.Options{Strategy: st, CelebrityThreshold: 1})
			users := make(map[string]store.ID)
			for _, h := range []string{"reader", "ann", "bo", "cy", "fan"} {
				users[h] = mustSignUp(t, svc, "user_"+h).ID
			}
			for _, f := range [][2]string{{"reader", "ann"}, {"reader", "bo"}, {"reader", "cy"}, {"fan", "ann"}} {
				_, err := svc.Follow(ctx, users[f[0]], users[f[1]])
				require.NoError(t, err)
			}
			for _, h := range []string{"ann", "bo", "cy", "ann", "bo", "cy"} {
				_, err := svc.PostMessage(ctx, users[h], service.PostInput{Text: h})
				require.NoError(t, err)
			}
			waitIdle(t, svc)
			page := func() (map[string]int, int) {
				counter.take()
				p, err := svc.Inbox(ctx, users["reader"], store.Forward(store.NilID, 3))
				require.NoError(t, err)
				require.Len(t, p.Items, 3, "a full page")
				return counter.take()
			}
			plainCalls, plain := page()
			op := func(what string, f func(ctx context.Context, viewer, target store.ID) (*store.User, error), viewer, target string) {
				counter.take()
				_, err := f(ctx, users[viewer], users[target])
				require.NoError(t, err)
				waitIdle(t, svc)
				calls, n := counter.take()
				t.Logf("%s: %d storage calls with the jobs it starts: %v", what, n, calls)
			}
			op("mute a followee", svc.Mute, "reader", "bo")
			calls, filtered := page()
			t.Logf("a home page of 3: %d storage calls with no relation, %d with a mute (ListFiltered %d, ListBlockers %d)",
				plain, filtered, calls["ListFiltered"], calls["ListBlockers"])
			want := 1 // the hidden set, once a page, whether there are relations or not
			if st == service.StrategyWrite || st == service.StrategyBucket {
				want = 0 // a stored inbox was filtered on write
			}
			for _, cs := range []map[string]int{plainCalls, calls} {
				assert.Equal(t, want, cs["ListFiltered"])
				assert.Equal(t, want, cs["ListBlockers"])
			}
			op("block a follower who is followed", svc.Block, "fan", "ann")
			op("unmute", svc.Unmute, "reader", "bo")
			op("unblock", svc.Unblock, "fan", "ann")
		})
	}
}

// testMuteJobResumes: the job a mute stores before its relation is durable
// and reads the relation when it runs. Stored as a mute stores it, with the
// service stopped (a kill -9 right after the request), it removes the
// muted user's entries when a service starts again; stored without the
// relation (a crash between the two writes), or with the mute taken back
// before it runs, it leaves them.
func testMuteJobResumes(t *testing.T, open OpenFunc) {
	for _, st := range []service.Strategy{service.StrategyWrite, service.StrategyBucket, service.StrategyHybrid} {
		for _, tc := range []struct {
			name         string
			mute, unmute bool
			want         int
		}{{"muted", true, false, 0}, {"no relation", false, false, 2}, {"unmuted since", true, true, 2}} {
			t.Run(string(st)+"/"+tc.name, func(t *testing.T) {
				b, c := openBackend(t, open), newClock()
				opts := service.Options{Strategy: st}
				svc, _ := newServiceWith(t, b, c, opts)
				reader, author := mustSignUp(t, svc, "user_reader"), mustSignUp(t, svc, "user_author")
				_, err := svc.Follow(ctx, reader.ID, author.ID)
				require.NoError(t, err)
				for _, text := range []string{"one", "two"} {
					_, err := svc.PostMessage(ctx, author.ID, service.PostInput{Text: text})
					require.NoError(t, err)
				}
				waitIdle(t, svc)
				cctx, cancel := contextWithTimeout()
				defer cancel()
				require.NoError(t, svc.Close(cctx))

				job := &storage.Job{ID: store.NewID(c.Now()), Kind: storage.JobUnfollow, Layout: st.Layout(), AuthorID: author.ID, OwnerID: reader.ID, CreatedAt: c.Now()}
				require.NoError(t, b.StoreJob(ctx, job))
				if tc.mute {
					_, err := b.Block(ctx, reader.ID, author.ID, store.RelationMute, c.Now())
					require.NoError(t, err)
				}
				if tc.unmute {
					_, err := b.Unblock(ctx, reader.ID, author.ID, store.RelationMute)
					require.NoError(t, err)
				}
				svc, _ = newServiceWith(t, b, c, opts)
				waitIdle(t, svc)
				items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: reader.ID, Layout: st.Layout(), Range: store.Forward(store.NilID, 10)})
				require.NoError(t, err)
				assert.Len(t, items, tc.want, "the stored entries")
				assert.Equal(t, tc.want, counts.Total, "counted exactly")
				assert.Equal(t, tc.want, counts.Unread)
				jobs, err := b.PendingJobs(ctx)
				require.NoError(t, err)
				assert.Empty(t, jobs, "the job ended")
				follows, err := svc.FindFollowing(ctx, reader.ID, []store.ID{author.ID})
				require.NoError(t, err)
				assert.Equal(t, []bool{true}, follows, "a mute keeps the follow")
			})
		}
	}
}

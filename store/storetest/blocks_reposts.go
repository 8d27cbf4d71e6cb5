package storetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// testHideReposts checks, under the strategies that store inboxes, that a
// mute or a block removes from the reader's stored inbox the reposts by
// others of the hidden user's messages delivered before it
// (JobHideReposts): cy, whom rea follows and x does not, reposts two of
// x's posts; after rea mutes x, blocks x, or is blocked by x, rea's
// inbox holds neither repost and counts exactly what the pages show. The
// fan-out's chunk of 2 makes the job walk the inbox in several chunks.
func testHideReposts(t *testing.T, open OpenFunc) {
	for _, st := range []service.Strategy{service.StrategyWrite, service.StrategyBucket, service.StrategyHybrid} {
		for _, rel := range []string{"mute", "block", "blocked"} {
			t.Run(string(st)+"/"+rel, func(t *testing.T) {
				b, c := openBackend(t, open), newClock()
				svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st, ChunkSize: 2})
				rea, x, cy := mustSignUp(t, svc, "user_rea").ID, mustSignUp(t, svc, "user_x").ID, mustSignUp(t, svc, "user_cy").ID
				_, err := svc.Follow(ctx, rea, cy)
				require.NoError(t, err)
				labels := hideRepostsFixture(t, svc, b, x, cy)
				waitIdle(t, svc)
				before := labelled(t, svc, rea, labels)
				require.Equal(t, homeTimeline{Items: []string{"cy3", "cy reposts x2", "cy2", "cy reposts x1", "cy1"}, Total: 5, Unread: 5}, before)

				switch rel {
				case "mute":
					_, err = svc.Mute(ctx, rea, x)
				case "block":
					_, err = svc.Block(ctx, rea, x)
				case "blocked":
					_, err = svc.Block(ctx, x, rea)
				}
				require.NoError(t, err)
				waitIdle(t, svc)
				after := labelled(t, svc, rea, labels)
				assert.Equal(t, homeTimeline{Items: []string{"cy3", "cy2", "cy1"}, Total: 3, Unread: 3}, after, "the reposts of x's posts left the inbox, counts with them")
				items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: rea, Layout: st.Layout(), Range: store.Forward(store.NilID, 10)})
				require.NoError(t, err)
				assert.Len(t, items, 3, "the stored entries")
				assert.Equal(t, 3, counts.Total)
				jobs, err := b.PendingJobs(ctx)
				require.NoError(t, err)
				assert.Empty(t, jobs, "the jobs ended")
				cyTL := labelled(t, svc, cy, labels)
				assert.Equal(t, before.Items, cyTL.Items, "cy's own timeline (its own messages) is untouched")
			})
		}
	}
}

// hideRepostsFixture has cy post three times and repost each of x's two
// posts between, and returns the messages' labels.
func hideRepostsFixture(t *testing.T, svc *service.Service, b storage.Backend, x, cy store.ID) map[store.ID]string {
	t.Helper()
	labels := make(map[store.ID]string)
	for i, step := range []string{"cy1", "x1", "cy2", "x2", "cy3"} {
		author := cy
		if i%2 == 1 {
			author = x
		}
		m, err := svc.PostMessage(ctx, author, service.PostInput{Text: step})
		require.NoError(t, err)
		labels[m.ID] = step
		if author == x {
			_, err := svc.Repost(ctx, cy, m.ID)
			require.NoError(t, err)
			ids, err := b.FindReposts(ctx, cy, []store.MessageKey{m.Key()})
			require.NoError(t, err)
			labels[ids[0]] = "cy reposts " + step
		}
	}
	return labels
}

// testHideRepostsResumes: a JobHideReposts is durable. Stored as a mute
// stores it, with a chunk already applied and the service stopped (a
// kill -9 mid-job), it removes the rest of the reposts when a service
// starts again; stored without the relation (a crash between the two
// writes), it leaves them.
func testHideRepostsResumes(t *testing.T, open OpenFunc) {
	for _, st := range []service.Strategy{service.StrategyWrite, service.StrategyBucket, service.StrategyHybrid} {
		for _, tc := range []struct {
			name string
			mute bool
			want int
		}{{"muted", true, 3}, {"no relation", false, 5}} {
			t.Run(string(st)+"/"+tc.name, func(t *testing.T) {
				b, c := openBackend(t, open), newClock()
				opts := service.Options{Strategy: st, ChunkSize: 2}
				svc, _ := newServiceWith(t, b, c, opts)
				rea, x, cy := mustSignUp(t, svc, "user_rea").ID, mustSignUp(t, svc, "user_x").ID, mustSignUp(t, svc, "user_cy").ID
				_, err := svc.Follow(ctx, rea, cy)
				require.NoError(t, err)
				labels := hideRepostsFixture(t, svc, b, x, cy)
				waitIdle(t, svc)
				cctx, cancel := contextWithTimeout()
				defer cancel()
				require.NoError(t, svc.Close(cctx))

				job := &storage.Job{ID: store.NewID(c.Now()), Kind: storage.JobHideReposts, Layout: st.Layout(), AuthorID: x, OwnerID: rea, CreatedAt: c.Now()}
				require.NoError(t, b.StoreJob(ctx, job))
				if tc.mute {
					_, err := b.Block(ctx, rea, x, store.RelationMute, c.Now())
					require.NoError(t, err)
				}
				// The first chunk (cy3, and x2's repost) was applied
				// before the crash.
				items, _, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: rea, Layout: st.Layout(), Range: store.Forward(store.NilID, 2)})
				require.NoError(t, err)
				require.Len(t, items, 2)
				first := storage.OwnerRemoval{Job: job, Cursor: items[1].MessageID[:]}
				if tc.mute {
					first.MessageIDs = []store.ID{items[1].MessageID}
				}
				_, err = b.RemoveOwnerEntries(ctx, first)
				require.NoError(t, err)

				svc, _ = newServiceWith(t, b, c, opts)
				waitIdle(t, svc)
				items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: rea, Layout: st.Layout(), Range: store.Forward(store.NilID, 10)})
				require.NoError(t, err)
				assert.Len(t, items, tc.want, "the stored entries")
				assert.Equal(t, tc.want, counts.Total, "counted exactly")
				assert.Equal(t, tc.want, counts.Unread)
				for _, it := range items {
					if tc.mute {
						assert.NotContains(t, labels[it.MessageID], "reposts", "no repost of x's stays")
					}
				}
				jobs, err := b.PendingJobs(ctx)
				require.NoError(t, err)
				assert.Empty(t, jobs, "the job ended")
			})
		}
	}
}

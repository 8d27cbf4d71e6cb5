package mongostore_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// repostState is what a repost's steps left: the original's RepostCount,
// its pending-operation markers, the reposter's message count, the
// reposter's guards of the pair, and FindReposts' answer.
type repostState struct {
	reposts, markers, posted, guards int
	found                            store.ID
}

func readRepost(t *testing.T, st *mongostore.Store, orig *store.Message, user store.ID) repostState {
	t.Helper()
	ctx := context.Background()
	var raw bson.M
	require.NoError(t, st.Database().Collection("messages").FindOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(orig.ID)}}).Decode(&raw))
	var s repostState
	if po, ok := raw["po"].(bson.A); ok {
		s.markers = len(po)
	}
	got, err := st.FindMessageByID(ctx, orig.ID)
	require.NoError(t, err)
	s.reposts = got.RepostCount
	u, err := st.FindUserByID(ctx, user)
	require.NoError(t, err)
	s.posted = u.MessageCount
	n, err := st.Database().Collection("reposts").CountDocuments(ctx, bson.D{{Key: "u", Value: primitive.ObjectID(user)}, {Key: "o", Value: primitive.ObjectID(orig.ID)}})
	require.NoError(t, err)
	s.guards = int(n)
	found, err := st.FindReposts(ctx, user, []store.MessageKey{orig.Key()})
	require.NoError(t, err)
	s.found = found[0]
	return s
}

// mkRepost stores user's repost of orig with its JobDeliver, made at now,
// the process dying where fail says.
func mkRepost(st *mongostore.Store, f *faults, fail func(f *faults), user store.ID, orig *store.Message, now time.Time) (*store.Message, *storage.Job, error) {
	m := &store.Message{ID: store.NewID(now), AuthorID: user, Kind: store.KindRepost, CreatedAt: now, RepostOfID: orig.ID, RepostOfAuthorID: orig.AuthorID}
	j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: user, CreatedAt: now}
	fail(f)
	return m, j, st.CreateMessage(context.Background(), m, j)
}

// The steps of a repost's count after its insert are a reply's
// (replyFaults): the reposter's count, the original's, the counted flag,
// the markers forgotten. A repost whose process dies at each, then its
// job's first chunk: the original counts it exactly once, and the pair
// stays held (a second repost is CONFLICT).
func TestFaults_RepostCountedByJob(t *testing.T) {
	ctx := context.Background()
	for _, c := range replyFaults {
		t.Run(c.name, func(t *testing.T) {
			st, f := openFaulty(t)
			a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
			orig, _ := mkPost(t, st, a)
			m, j, err := mkRepost(st, f, c.fail, x, orig, tickClock())
			require.ErrorIs(t, err, errInjected)
			half := repostState{reposts: c.half.replies, markers: c.half.markers, posted: c.half.posted, guards: 1, found: m.ID}
			assert.Equal(t, half, readRepost(t, st, orig, x), "repost cut short")
			f.msgsSkip.Store(0)
			_, _, err = mkRepost(st, f, func(*faults) {}, x, orig, tickClock())
			assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "the repost is stored: a second one is refused: %v", err)
			_, err = st.DeliverInbox(ctx, storage.Delivery{Job: j, At: tickClock(), Done: true})
			require.NoError(t, err)
			want := repostState{reposts: 1, markers: jobLeavesMarker, posted: 1, guards: 1, found: m.ID}
			assert.Equal(t, want, readRepost(t, st, orig, x), "job repeated the count")
		})
	}
}

// A repost whose process dies before its message is stored: at its guard,
// or between the guard and the message. Nothing is counted, and the user
// reposts again: at once when the guard was not written; when it was,
// once its claim expired (before that, the guard might be a repost still
// being stored, so a second repost is CONFLICT).
func TestFaults_RepostNotStored(t *testing.T) {
	for _, c := range []struct {
		name   string
		fail   func(f *faults)
		guards int
	}{
		{"GuardFails", func(f *faults) { f.repostsWrite.Store(1) }, 0},
		{"MessageFails", func(f *faults) { f.msgsInsert.Store(1) }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, f := openFaulty(t)
			a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
			orig, _ := mkPost(t, st, a)
			_, _, err := mkRepost(st, f, c.fail, x, orig, time.Now())
			require.ErrorIs(t, err, errInjected)
			assert.Equal(t, repostState{guards: c.guards}, readRepost(t, st, orig, x), "nothing counted, nothing found")
			if c.guards > 0 {
				_, _, err = mkRepost(st, f, func(*faults) {}, x, orig, time.Now())
				assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "a fresh guard holds the pair: %v", err)
				defer mongostore.SetRepostClaimTTL(anyClaimStale)()
			}
			m, _, err := mkRepost(st, f, func(*faults) {}, x, orig, time.Now())
			require.NoError(t, err)
			assert.Equal(t, repostState{reposts: 1, posted: 1, guards: 1, found: m.ID}, readRepost(t, st, orig, x))
		})
	}
}

// The steps of an unrepost (DeleteMessage with its retraction) after the
// deletion mark: the guard released, then the count's steps.
var unrepostFaults = append([]struct {
	name string
	fail func(f *faults)
	half threadState
}{{"GuardFails", func(f *faults) { f.repostsWrite.Store(1) }, threadState{}}}, replyFaults...)

// A repost counted, then its unrepost cut short at each step, then the
// retraction's first chunk repeating it: the original's count ends at 0,
// never below, the guard is gone, and the user may repost again.
func TestFaults_UnrepostRetried(t *testing.T) {
	ctx := context.Background()
	for _, c := range unrepostFaults {
		t.Run(c.name, func(t *testing.T) {
			st, f := openFaulty(t)
			a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
			orig, _ := mkPost(t, st, a)
			m, _, err := mkRepost(st, f, func(*faults) {}, x, orig, tickClock())
			require.NoError(t, err)
			require.Equal(t, repostState{reposts: 1, posted: 1, guards: 1, found: m.ID}, readRepost(t, st, orig, x))
			deletionFails(c.fail)(f)
			r := retractJob(m)
			require.ErrorIs(t, st.DeleteMessage(ctx, m.ID, r), errInjected)
			assert.Equal(t, store.NilID, readRepost(t, st, orig, x).found, "a repost being deleted is not found")
			f.msgsSkip.Store(0)
			_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: r, Done: true})
			require.NoError(t, err)
			got := readRepost(t, st, orig, x)
			assert.Equal(t, 0, got.reposts, "uncounted once")
			assert.Equal(t, 0, got.posted)
			assert.Equal(t, 0, got.guards, "the retraction released the guard")
			again, _, err := mkRepost(st, f, func(*faults) {}, x, orig, tickClock())
			require.NoError(t, err)
			assert.Equal(t, repostState{reposts: 1, markers: got.markers, posted: 1, guards: 1, found: again.ID}, readRepost(t, st, orig, x))
		})
	}
}

// A repost whose count was cut short at each step, unreposted before its
// job ran (with a retraction, or with none): the deletion finishes the
// original's half-done increment before taking it back, so the count ends
// at 0 and never goes below, and a repost afterwards counts from there.
func TestFaults_RepostDeletedBeforeCounted(t *testing.T) {
	ctx := context.Background()
	for _, withJob := range []bool{true, false} {
		for _, c := range replyFaults {
			name := c.name + "/Retracted"
			if !withJob {
				name = c.name + "/NoJob"
			}
			t.Run(name, func(t *testing.T) {
				st, f := openFaulty(t)
				a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
				orig, _ := mkPost(t, st, a)
				m, _, err := mkRepost(st, f, c.fail, x, orig, tickClock())
				require.ErrorIs(t, err, errInjected)
				f.msgsSkip.Store(0)
				var r *storage.Job
				if withJob {
					r = retractJob(m)
				}
				require.NoError(t, st.DeleteMessage(ctx, m.ID, r))
				if withJob {
					_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: r, Done: true})
					require.NoError(t, err)
				}
				got := readRepost(t, st, orig, x)
				assert.Equal(t, 0, got.reposts)
				assert.Equal(t, 0, got.posted)
				assert.Equal(t, 0, got.guards)
				again, _, err := mkRepost(st, f, func(*faults) {}, x, orig, tickClock())
				require.NoError(t, err)
				got = readRepost(t, st, orig, x)
				assert.Equal(t, 1, got.reposts)
				assert.Equal(t, again.ID, got.found)
			})
		}
	}
}

// An unrepost without a job whose process dies after its counts, at its
// guard's release (the last step): the counts are right, and the pair is
// not lost: the guard's repost is gone, so once its claim expired a
// repost takes the guard over.
func TestFaults_UnrepostNoJobGuardLeft(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	orig, _ := mkPost(t, st, a)
	m, _, err := mkRepost(st, f, func(*faults) {}, x, orig, time.Now())
	require.NoError(t, err)
	f.repostsWrite.Store(1)
	require.ErrorIs(t, st.DeleteMessage(ctx, m.ID, nil), errInjected)
	assert.Equal(t, repostState{guards: 1}, readRepost(t, st, orig, x), "deleted and uncounted, the guard left")
	_, _, err = mkRepost(st, f, func(*faults) {}, x, orig, time.Now())
	assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "a fresh guard might be a repost being stored: %v", err)
	defer mongostore.SetRepostClaimTTL(anyClaimStale)()
	again, _, err := mkRepost(st, f, func(*faults) {}, x, orig, time.Now())
	require.NoError(t, err)
	assert.Equal(t, repostState{reposts: 1, posted: 1, guards: 1, found: again.ID}, readRepost(t, st, orig, x))
}

// TestFaults_LoadBulkRepostCut: a bulk load killed between a repost's
// guard and the repost leaves the guard alone, and loading the batch
// again, as a resumed seed does, finishes it: one guard, the repost found,
// and a second repost of the pair CONFLICT.
func TestFaults_LoadBulkRepostCut(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, y := mkUser(t, st, "a"), mkUser(t, st, "y")
	orig, _ := mkPost(t, st, a)
	now := tickClock()
	r := &store.Message{ID: store.NewID(now), AuthorID: y, Kind: store.KindRepost, CreatedAt: now, RepostOfID: orig.ID, RepostOfAuthorID: a}
	b := &storage.Bulk{Messages: []*store.Message{r}}
	f.msgsBulk.Store(1)
	require.ErrorIs(t, st.LoadBulk(ctx, b), errInjected)
	s := readRepost(t, st, orig, y)
	assert.Equal(t, 1, s.guards, "the guard goes first")
	assert.Equal(t, store.NilID, s.found, "the repost was not stored")

	require.NoError(t, st.LoadBulk(ctx, b))
	s = readRepost(t, st, orig, y)
	assert.Equal(t, 1, s.guards)
	assert.Equal(t, r.ID, s.found)
	at := tickClock()
	again := &store.Message{ID: store.NewID(at), AuthorID: y, Kind: store.KindRepost, CreatedAt: at, RepostOfID: orig.ID, RepostOfAuthorID: a}
	err := st.CreateMessage(ctx, again, nil)
	assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "%v", err)
}

// anyClaimStale makes every unstored repost's guard stale, however new its
// claim: IDs never go back within a process, so after a test whose clock
// runs ahead (the conversation sweeper's), a claim made now can carry a
// later time, and a TTL of 0 would still find it fresh.
const anyClaimStale = time.Duration(math.MinInt64)

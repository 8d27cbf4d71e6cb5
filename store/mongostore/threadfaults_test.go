package mongostore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// threadState is what a reply's counting left: the parent's ReplyCount,
// its pending-operation markers, and the reply author's message count.
type threadState struct {
	replies, markers, posted int
}

func readThread(t *testing.T, st *mongostore.Store, parent *store.Message, author store.ID) threadState {
	t.Helper()
	ctx := context.Background()
	var raw bson.M
	require.NoError(t, st.Database().Collection("messages").FindOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(parent.ID)}}).Decode(&raw))
	var s threadState
	if po, ok := raw["po"].(bson.A); ok {
		s.markers = len(po)
	}
	got, err := st.FindMessageByID(ctx, parent.ID)
	require.NoError(t, err)
	s.replies = got.ReplyCount
	u, err := st.FindUserByID(ctx, author)
	require.NoError(t, err)
	s.posted = u.MessageCount
	return s
}

// mkReply stores a reply by author to parent with its JobDeliver, the
// process dying where fail says.
func mkReply(t *testing.T, st *mongostore.Store, f *faults, fail func(f *faults), author store.ID, parent *store.Message) (*store.Message, *storage.Job, error) {
	now := tickClock()
	m := &store.Message{ID: store.NewID(now), AuthorID: author, Text: "re", Kind: store.KindReply, CreatedAt: now,
		ReplyToID: parent.ID, ReplyToAuthorID: parent.AuthorID, RootID: parent.ID, RootAuthorID: parent.AuthorID}
	j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: author, CreatedAt: now}
	fail(f)
	return m, j, st.CreateMessage(context.Background(), m, j)
}

// The steps of a reply's count after its insert: the author's count
// (users), the parent's (messages), the counted flag (messages), then the
// markers forgotten (users, messages).
var replyFaults = []struct {
	name string
	fail func(f *faults)
	half threadState // what the cut-short step leaves
}{
	{"AuthorCountFails", func(f *faults) { f.usersUpdate.Store(1) }, threadState{}},
	{"ParentCountFails", func(f *faults) { f.msgsUpdate.Store(1) }, threadState{posted: 1}},
	{"FlagFails", func(f *faults) { f.msgsSkip.Store(1); f.msgsUpdate.Store(1) }, threadState{replies: 1, markers: 1, posted: 1}},
	{"ForgetFails", func(f *faults) { f.msgsSkip.Store(2); f.msgsUpdate.Store(1) }, threadState{replies: 1, markers: 1, posted: 1}},
}

// jobLeavesMarker is the parent's markers left once the job has repeated a
// count cut short: one, whatever the step. Before the poster's flag, the
// job cannot tell a dead poster from one still about to count, so it
// leaves the marker (see count); after it (ForgetFails), the retry finds
// nothing to do, and the marker stays, stale and unused.
const jobLeavesMarker = 1

// deletionFails is fail for a deletion: the faults of messages' updates
// count from after the deletion mark, a findAndModify of the message.
func deletionFails(fail func(f *faults)) func(f *faults) {
	return func(f *faults) {
		fail(f)
		if f.msgsUpdate.Load() > 0 {
			f.msgsSkip.Store(max(f.msgsSkip.Load(), 0) + 1)
		}
	}
}

// A reply whose process dies at each step of its count, then its job's
// first chunk, which repeats the step: the parent counts it exactly once.
func TestFaults_ReplyCountedByJob(t *testing.T) {
	ctx := context.Background()
	for _, c := range replyFaults {
		t.Run(c.name, func(t *testing.T) {
			st, f := openFaulty(t)
			a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
			parent, _ := mkPost(t, st, a)
			_, j, err := mkReply(t, st, f, c.fail, x, parent)
			require.ErrorIs(t, err, errInjected)
			assert.Equal(t, c.half, readThread(t, st, parent, x), "reply cut short")
			f.msgsSkip.Store(0)
			_, err = st.DeliverInbox(ctx, storage.Delivery{Job: j, At: tickClock(), Done: true})
			require.NoError(t, err)
			assert.Equal(t, threadState{replies: 1, markers: jobLeavesMarker, posted: 1}, readThread(t, st, parent, x), "job repeated the count")
		})
	}
}

// A reply counted, then its deletion cut short at each step of its
// uncount, then the retraction's first chunk repeating it: the parent's
// count ends at 0, never below.
func TestFaults_ReplyDeleteRetried(t *testing.T) {
	ctx := context.Background()
	for _, c := range replyFaults {
		t.Run(c.name, func(t *testing.T) {
			st, f := openFaulty(t)
			a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
			parent, _ := mkPost(t, st, a)
			m, _, err := mkReply(t, st, f, func(*faults) {}, x, parent)
			require.NoError(t, err)
			require.Equal(t, threadState{replies: 1, posted: 1}, readThread(t, st, parent, x))
			deletionFails(c.fail)(f)
			r := retractJob(m)
			require.ErrorIs(t, st.DeleteMessage(ctx, m.ID, r), errInjected)
			f.msgsSkip.Store(0)
			_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: r, Done: true})
			require.NoError(t, err)
			got := readThread(t, st, parent, x)
			assert.Equal(t, 0, got.replies, "uncounted once")
			assert.Equal(t, 0, got.posted)
		})
	}
}

// A reply whose count was cut short at each step, deleted before its job
// ran (with a retraction, or with none): the deletion finishes the parent's
// half-done increment before taking it back, so the count ends at 0 and
// never goes below.
func TestFaults_ReplyDeletedBeforeCounted(t *testing.T) {
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
				parent, _ := mkPost(t, st, a)
				m, _, err := mkReply(t, st, f, c.fail, x, parent)
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
				got := readThread(t, st, parent, x)
				assert.Equal(t, 0, got.replies, "job %v", withJob)
				assert.Equal(t, 0, got.posted)
				// A reply afterwards counts from there.
				_, _, err = mkReply(t, st, f, func(*faults) {}, x, parent)
				require.NoError(t, err)
				assert.Equal(t, 1, readThread(t, st, parent, x).replies)
			})
		}
	}
}

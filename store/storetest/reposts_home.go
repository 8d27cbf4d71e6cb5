package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// homeTimeline is a timeline as labels: what a reader sees, newest first,
// and its counts.
type homeTimeline struct {
	Items         []string
	Total, Unread int
}

// labelled pages through owner's whole timeline and returns it as labels,
// requiring every page size, forward and backward, to show the same: a
// page skipping a repost the rule leaves out is refilled.
func labelled(t *testing.T, svc *service.Service, owner store.ID, labels map[store.ID]string) homeTimeline {
	t.Helper()
	read := func(size int, backward bool) []string {
		var out []string
		from := store.NilID
		for {
			r := store.Forward(from, size)
			if backward {
				r = store.Backward(from, size)
			}
			page, err := svc.Inbox(ctx, owner, r)
			require.NoError(t, err)
			require.True(t, len(page.Items) == size || !page.HasMore, "a page with more beyond it is full")
			var got []string
			for _, it := range page.Items {
				require.NotNil(t, it.Message)
				l, ok := labels[it.MessageID]
				require.True(t, ok, "an unknown message %s", it.MessageID)
				got = append(got, l)
			}
			if backward {
				out = append(got, out...)
			} else {
				out = append(out, got...)
			}
			if !page.HasMore {
				return out
			}
			if backward {
				from = page.Items[0].MessageID
			} else {
				from = page.Items[len(page.Items)-1].MessageID
			}
		}
	}
	items := read(50, false)
	for _, size := range []int{1, 2, 3} {
		require.Equal(t, items, read(size, false), "page size %d", size)
		require.Equal(t, items, read(size, true), "backward, page size %d", size)
	}
	c, err := svc.InboxCounts(ctx, owner)
	require.NoError(t, err)
	return homeTimeline{Items: items, Total: c.Total, Unread: c.Unread}
}

// storeRepost stores who's repost of orig as the service does, marked
// hidden from who's home if who wrote orig or follows its author, with its
// JobDeliver under layout l (none under LayoutNone): the job runs when a
// service starts.
func storeRepost(t *testing.T, b storage.Backend, c *clock, l storage.Layout, who store.ID, orig *store.Message) *store.Message {
	t.Helper()
	r := newRepost(c, who, orig)
	follows, err := b.FindFollowing(ctx, who, []store.ID{orig.AuthorID})
	require.NoError(t, err)
	r.HomeHidden = orig.AuthorID == who || follows[0]
	var job *storage.Job
	if l != storage.LayoutNone {
		job = newDeliverJob(r, l)
		job.RepostOfAuthorID = orig.AuthorID
	}
	require.NoError(t, b.CreateMessage(ctx, r, job))
	return r
}

// testRepostsAtHome checks the home timeline's rule for reposts under
// every strategy (docs/design.md#reposts-at-home): a repost reaches a
// reader unless the reader wrote its original or follows its author, one's
// own reposts included; a follow's backfill brings only the reposts the
// rule shows; pages stay full and the counts count what the pages show.
// Every strategy shows every reader the same timeline.
func testRepostsAtHome(t *testing.T, open OpenFunc) {
	got := make(map[service.Strategy]map[string]homeTimeline)
	for _, st := range service.Strategies {
		t.Run(string(st), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			// ann, with three followers, is a celebrity under hybrid: her
			// posts are pulled, her reposts pushed.
			opts := service.Options{Strategy: st, CelebrityThreshold: 2}
			svc, _ := newServiceWith(t, b, c, opts)
			users := make(map[string]store.ID)
			for _, h := range []string{"ann", "bo", "cel", "dan", "eve", "r1", "r2", "r3"} {
				users[h] = mustSignUp(t, svc, "user_"+h).ID
			}
			for _, f := range [][2]string{{"r1", "ann"}, {"r1", "bo"}, {"r2", "ann"}, {"r3", "ann"}, {"r3", "cel"}} {
				_, err := svc.Follow(ctx, users[f[0]], users[f[1]])
				require.NoError(t, err)
			}
			labels := make(map[store.ID]string)
			posts := make(map[string]*store.Message)
			for _, h := range []string{"eve", "bo", "cel", "r1", "r2", "ann"} {
				m, err := svc.PostMessage(ctx, users[h], service.PostInput{Text: h})
				require.NoError(t, err)
				posts[h], labels[m.ID] = m, h
			}
			waitIdle(t, svc)
			for _, r := range []string{"r1", "r2", "r3"} {
				labelled(t, svc, users[r], labels) // under cache: caches the reposts are appended to
			}

			// Reposts are stored as the service stores them, and their jobs
			// run when the service starts again.
			cctx, cancel := contextWithTimeout()
			defer cancel()
			require.NoError(t, svc.Close(cctx))
			l := st.Layout()
			for _, rp := range [][2]string{
				{"ann", "bo"}, {"ann", "cel"}, {"ann", "r1"}, {"ann", "ann"},
				{"r1", "r2"}, {"r1", "r1"}, {"r1", "bo"},
				{"dan", "ann"}, {"dan", "eve"}, {"dan", "r2"},
			} {
				m := storeRepost(t, b, c, l, users[rp[0]], posts[rp[1]])
				labels[m.ID] = rp[0] + " reposts " + rp[1]
			}
			svc, _ = newServiceWith(t, b, c, opts)
			waitIdle(t, svc)
			_, err := svc.Follow(ctx, users["r2"], users["dan"]) // backfill: dan's reposts
			require.NoError(t, err)
			waitIdle(t, svc)

			got[st] = make(map[string]homeTimeline)
			for _, r := range []string{"ann", "r1", "r2", "r3"} {
				got[st][r] = labelled(t, svc, users[r], labels)
			}
		})
	}
	want := got[service.StrategyBucket]
	require.NotNil(t, want)
	assert.Equal(t, homeTimeline{Items: []string{"ann reposts r1", "ann reposts cel", "ann reposts bo", "ann"}}, want["ann"],
		"ann's own reposts are home but that of her own message; her own are not counted")
	assert.Equal(t, homeTimeline{Items: []string{"r1 reposts r2", "ann reposts cel", "ann", "r1", "bo"}, Total: 3, Unread: 3}, want["r1"],
		"r1 follows bo and wrote r1: only ann's repost of cel and r1's own of r2")
	assert.Equal(t, homeTimeline{Items: []string{"dan reposts eve", "ann reposts r1", "ann reposts cel", "ann reposts bo", "ann", "r2"}, Total: 5, Unread: 5}, want["r2"],
		"r2 follows ann and wrote r2: of dan's reposts the backfill brings only that of eve")
	assert.Equal(t, homeTimeline{Items: []string{"ann reposts r1", "ann reposts bo", "ann", "cel"}, Total: 4, Unread: 4}, want["r3"],
		"r3 follows cel")
	for _, st := range service.Strategies[1:] {
		if got[st] != nil {
			assert.Equal(t, want, got[st], "strategy %s against %s", st, service.StrategyBucket)
		}
	}
}

// callCounter counts a backend's calls by method.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) Observe(method string, _ time.Time, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
}

// take returns the calls counted since the last take, and their sum.
func (c *callCounter) take() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, n := c.calls, 0
	for _, k := range out {
		n += k
	}
	c.calls = map[string]int{}
	return out, n
}

// testHomeRuleCosts measures what reposts at home cost in storage calls (a
// round trip each on MongoDB): one FindFollowers a chunk of a repost's
// delivery, none for a repost of one's own; a page holding reposts one
// read of their originals (a repost of a deleted message is skipped), and
// one's own reposts nothing more: whether they are at home was decided
// when they were made.
func testHomeRuleCosts(t *testing.T, open OpenFunc) {
	counter := &callCounter{calls: map[string]int{}}
	b, c := openBackend(t, open), newClock()
	ob := storage.Observe(b, counter)
	opts := service.Options{Strategy: service.StrategyBucket}
	svc, _ := newServiceWith(t, ob, c, opts) // chunks of 7
	ann, bo, reader := mustSignUp(t, svc, "cost_ann"), mustSignUp(t, svc, "cost_bo"), mustSignUp(t, svc, "cost_reader")
	const fans = 20 // 3 chunks
	for i := range fans - 1 {
		f := mustSignUp(t, svc, fmt.Sprintf("cost_fan%d", i))
		_, err := svc.Follow(ctx, f.ID, ann.ID)
		require.NoError(t, err)
	}
	for _, followee := range []*store.User{ann, bo} {
		_, err := svc.Follow(ctx, reader.ID, followee.ID)
		require.NoError(t, err)
	}
	ofBo, err := svc.PostMessage(ctx, bo.ID, service.PostInput{Text: "bo"})
	require.NoError(t, err)
	ofAnn, err := svc.PostMessage(ctx, ann.ID, service.PostInput{Text: "ann"})
	require.NoError(t, err)
	stranger := mustSignUp(t, svc, "cost_stranger")
	ofStranger, err := svc.PostMessage(ctx, stranger.ID, service.PostInput{Text: "stranger"})
	require.NoError(t, err)
	waitIdle(t, svc)

	// Delivery: a post and two reposts by ann to her 20 followers.
	restart := func() {
		cctx, cancel := contextWithTimeout()
		defer cancel()
		require.NoError(t, svc.Close(cctx))
		svc, _ = newServiceWith(t, ob, c, opts)
		waitIdle(t, svc)
	}
	deliveryCalls := func(store func()) (map[string]int, int) {
		cctx, cancel := contextWithTimeout()
		defer cancel()
		require.NoError(t, svc.Close(cctx))
		store()
		counter.take()
		svc, _ = newServiceWith(t, ob, c, opts)
		waitIdle(t, svc)
		return counter.take()
	}
	postCalls, postN := deliveryCalls(func() {
		m := newMessage(c, ann.ID, "post")
		require.NoError(t, b.CreateMessage(ctx, m, newDeliverJob(m, storage.LayoutBuckets)))
	})
	repostCalls, repostN := deliveryCalls(func() { storeRepost(t, b, c, storage.LayoutBuckets, ann.ID, ofBo) })
	ownCalls, ownN := deliveryCalls(func() { storeRepost(t, b, c, storage.LayoutBuckets, ann.ID, ofAnn) })
	t.Logf("delivery to %d followers in 3 chunks, storage calls: post %d, repost %d (FindFollowers %d), repost of one's own %d",
		fans, postN, repostN, repostCalls["FindFollowers"], ownN)
	assert.Zero(t, postCalls["FindFollowers"])
	assert.Equal(t, 3, postCalls["FindBlockers"], "who hides the author: one a chunk")
	assert.Equal(t, 3, repostCalls["FindFollowers"], "one a chunk")
	assert.Equal(t, 6, repostCalls["FindBlockers"], "who hides the author, and the original's author: one each a chunk")
	assert.Equal(t, 3, repostCalls["FindBlocked"], "whom the original's author blocks: one a chunk")
	assert.Equal(t, postN+3+3+3, repostN, "the FindFollowers and the original author's relations are all a repost adds")
	assert.Zero(t, ownCalls["FindFollowers"], "a repost of one's own reaches no follower, and checks none")

	// A page of the reader's timeline, as their own outbox changes.
	page := func() (map[string]int, int, []store.ID) {
		counter.take()
		p, err := svc.Inbox(ctx, reader.ID, store.Forward(store.NilID, 50))
		require.NoError(t, err)
		calls, n := counter.take()
		return calls, n, itemIDs(p.Items)
	}
	_, plainN, _ := page()
	ofStranger2, err := svc.PostMessage(ctx, stranger.ID, service.PostInput{Text: "stranger 2"})
	require.NoError(t, err)
	annStranger := storeRepost(t, b, c, storage.LayoutBuckets, ann.ID, ofStranger2)
	restart()
	calls, withRepost, items := page()
	assert.Contains(t, items, annStranger.ID)
	assert.Equal(t, 2, calls["FindMessagesByKeys"], "the page's messages, then its reposts' originals")
	assert.Equal(t, plainN+2, withRepost, "the reposts' originals, read once, and the visibility rule of their authors: the users (the page's with them, and the reader's own)")
	assert.Zero(t, calls["FindBlockers"], "a reader nobody has blocked needs no check of who blocks them")
	// Once someone blocks the reader (anyone: the relation may be with a
	// reposted author), the check is one read for the page.
	_, err = b.Block(ctx, mustCreateUser(t, b, c).ID, reader.ID, store.RelationBlock, c.Now())
	require.NoError(t, err)
	restart()
	calls, blockedN, items := page()
	assert.Contains(t, items, annStranger.ID)
	assert.Equal(t, withRepost+1, blockedN)
	assert.Equal(t, 1, calls["FindBlockers"], "one check of the originals' authors")
	withRepost = blockedN
	ofStrangerRepost := storeRepost(t, b, c, storage.LayoutBuckets, reader.ID, ofStranger)
	ofBoRepost := storeRepost(t, b, c, storage.LayoutBuckets, reader.ID, ofBo)
	restart()
	calls, own, items := page()
	assert.Contains(t, items, ofStrangerRepost.ID, "one's own repost of a stranger is home")
	assert.NotContains(t, items, ofBoRepost.ID, "one's own repost of a followee is not")
	assert.Zero(t, calls["FindFollowing"], "one's own reposts need no check of the follow graph")
	assert.Equal(t, 1, calls["FindOutbox"], "one's own outbox is read once")
	assert.Equal(t, 2, calls["FindMessagesByKeys"], "the page's messages, then its reposts' originals")
	t.Logf("a page of 50: %d storage calls; holding a repost %d; and one's own reposts, of a stranger and of a followee %d", plainN, withRepost, own)
	assert.Equal(t, withRepost, own, "one's own reposts cost nothing more")

	// Deleting a message: its reposts are listed only if it counts some.
	plain, err := svc.PostMessage(ctx, stranger.ID, service.PostInput{Text: "never reposted"})
	require.NoError(t, err)
	waitIdle(t, svc)
	counter.take()
	require.NoError(t, svc.DeleteMessage(ctx, stranger.ID, plain.ID))
	waitIdle(t, svc)
	calls, plainDel := counter.take()
	assert.Zero(t, calls["ListReposts"], "a message with no reposts is not looked up")
	require.NoError(t, svc.DeleteMessage(ctx, stranger.ID, ofStranger.ID))
	waitIdle(t, svc)
	calls, reposted := counter.take()
	assert.Equal(t, 1, calls["ListReposts"])
	assert.Equal(t, 2, calls["DeleteMessage"], "the message and its one repost")
	t.Logf("deleting a message, its retraction included: %d storage calls; with one repost %d", plainDel, reposted)
}

// testListReposts checks ListReposts: a message's live reposts, newest
// first, paged both ways, without another message's, an unreposted one
// gone, and still listed once their original is deleted (what deleting it
// then deletes).
func testListReposts(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, u1, u2, u3 := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	orig, other := storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID)
	r1 := mustRepost(t, b, c, u1.ID, orig)
	mustRepost(t, b, c, u1.ID, other)
	r2 := mustRepost(t, b, c, u2.ID, orig)
	r3 := mustRepost(t, b, c, u3.ID, orig)
	list := func(r store.Range) []store.ID {
		t.Helper()
		ms, err := b.ListReposts(ctx, orig.ID, r)
		require.NoError(t, err)
		for _, m := range ms {
			assert.Equal(t, store.KindRepost, m.Kind)
			assert.Equal(t, orig.ID, m.RepostOfID)
		}
		return idsOf(ms...)
	}
	assert.Equal(t, idsOf(r3, r2, r1), list(store.Forward(store.NilID, 10)))
	assert.Equal(t, idsOf(r2), list(store.Forward(r3.ID, 1)))
	assert.Equal(t, idsOf(r2), list(store.Backward(r1.ID, 1)))
	assert.Equal(t, idsOf(r2, r3), list(store.Backward(r1.ID, 10)), "a backward page nearest first")

	require.NoError(t, b.DeleteMessage(ctx, r2.ID, nil))
	assert.Equal(t, idsOf(r3, r1), list(store.Forward(store.NilID, 10)), "an unreposted message is gone")
	again := mustRepost(t, b, c, u2.ID, orig)
	assert.Equal(t, idsOf(again, r3, r1), list(store.Forward(store.NilID, 10)))

	require.NoError(t, b.DeleteMessage(ctx, orig.ID, nil))
	assert.Equal(t, idsOf(again, r3, r1), list(store.Forward(store.NilID, 10)), "the original's deletion leaves its reposts, listed")
	none, err := b.ListReposts(ctx, r1.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, none, "a repost has no reposts")
}

// testRepostsOfDeleted checks, under every strategy, that deleting a
// message deletes its reposts, so they leave every timeline and its counts;
// and that reposts left behind by a deletion interrupted after the
// original (as a crash leaves them) are skipped by the first timeline read
// that meets them, which deletes them, pages staying full.
func testRepostsOfDeleted(t *testing.T, open OpenFunc) {
	for _, st := range service.Strategies {
		t.Run(string(st), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			opts := service.Options{Strategy: st}
			svc, _ := newServiceWith(t, b, c, opts)
			ann, bo, r1, r2, f1, f2 := mustSignUp(t, svc, "del_ann"), mustSignUp(t, svc, "del_bo"), mustSignUp(t, svc, "del_r1"), mustSignUp(t, svc, "del_r2"), mustSignUp(t, svc, "del_f1"), mustSignUp(t, svc, "del_f2")
			for _, f := range [][2]*store.User{{f1, r1}, {f1, bo}, {f2, r2}, {f2, bo}} {
				_, err := svc.Follow(ctx, f[0].ID, f[1].ID)
				require.NoError(t, err)
			}
			labels := make(map[store.ID]string)
			postAs := func(u *store.User, text string) *store.Message {
				m, err := svc.PostMessage(ctx, u.ID, service.PostInput{Text: text})
				require.NoError(t, err)
				labels[m.ID] = text
				return m
			}
			postAs(bo, "bo 0")
			gone, crashed := postAs(ann, "gone"), postAs(ann, "crashed")
			postAs(bo, "bo 1")
			postAs(r1, "r1 post")
			waitIdle(t, svc)
			restart := func() {
				t.Helper()
				cctx, cancel := contextWithTimeout()
				defer cancel()
				require.NoError(t, svc.Close(cctx))
				svc, _ = newServiceWith(t, b, c, opts)
				waitIdle(t, svc)
			}
			for _, rp := range []struct {
				who  *store.User
				orig *store.Message
			}{{r1, gone}, {r2, gone}, {r1, crashed}, {r2, crashed}} {
				m := storeRepost(t, b, c, st.Layout(), rp.who.ID, rp.orig)
				labels[m.ID] = rp.who.Handle[len("del_"):] + " reposts " + labels[rp.orig.ID]
			}
			postAs(bo, "bo 2")
			restart() // the reposts' jobs run
			require.Equal(t, homeTimeline{Items: []string{"bo 2", "r2 reposts crashed", "r2 reposts gone", "bo 1", "bo 0"}, Total: 5, Unread: 5},
				labelled(t, svc, f2.ID, labels))

			require.NoError(t, svc.DeleteMessage(ctx, ann.ID, gone.ID))
			waitIdle(t, svc)
			left, err := b.ListReposts(ctx, gone.ID, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			assert.Empty(t, left, "the original's deletion deleted its reposts")
			assert.Equal(t, homeTimeline{Items: []string{"bo 2", "r1 reposts crashed", "r1 post", "bo 1", "bo 0"}, Total: 5, Unread: 5}, labelled(t, svc, f1.ID, labels))
			assert.Equal(t, homeTimeline{Items: []string{"bo 2", "r2 reposts crashed", "bo 1", "bo 0"}, Total: 4, Unread: 4}, labelled(t, svc, f2.ID, labels))
			r2Msgs, err := svc.Messages(ctx, r2.ID, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			assert.Equal(t, []string{"r2 reposts crashed"}, messageLabels(r2Msgs.Messages, labels), "the reposter's own timeline has lost it too")

			// A crash between the original's deletion and its reposts':
			// the original is deleted as the service deletes it, and the
			// process restarts.
			var retract *storage.Job
			if l := st.Layout(); l.Stores() || l == storage.LayoutCache {
				retract = newRetractJob(crashed, l)
			}
			require.NoError(t, b.DeleteMessage(ctx, crashed.ID, retract))
			restart()
			left, err = b.ListReposts(ctx, crashed.ID, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			require.Len(t, left, 2, "the reposts are left behind")
			// The reposter's own messages skip theirs, and delete it.
			r1Msgs, err := svc.Messages(ctx, r1.ID, store.Forward(store.NilID, 1))
			require.NoError(t, err)
			assert.Equal(t, []string{"r1 post"}, messageLabels(r1Msgs.Messages, labels), "the page stays full")
			assert.False(t, r1Msgs.HasMore)
			// A home timeline skips the other, and deletes it.
			page, err := svc.Inbox(ctx, f2.ID, store.Forward(store.NilID, 2))
			require.NoError(t, err)
			assert.Equal(t, []string{"bo 2", "bo 1"}, pageLabels(page, labels), "the read skips the repost of a deleted message, and the page stays full")
			waitIdle(t, svc)
			left, err = b.ListReposts(ctx, crashed.ID, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			assert.Empty(t, left, "the reads deleted them")
			assert.Equal(t, homeTimeline{Items: []string{"bo 2", "r1 post", "bo 1", "bo 0"}, Total: 4, Unread: 4}, labelled(t, svc, f1.ID, labels))
			assert.Equal(t, homeTimeline{Items: []string{"bo 2", "bo 1", "bo 0"}, Total: 3, Unread: 3}, labelled(t, svc, f2.ID, labels),
				"the repair leaves every timeline, and the counts, as a deletion does")
		})
	}
}

func messageLabels(ms []*store.Message, labels map[store.ID]string) []string {
	var out []string
	for _, m := range ms {
		out = append(out, labels[m.ID])
	}
	return out
}

func pageLabels(page service.InboxPage, labels map[store.ID]string) []string {
	var out []string
	for _, it := range page.Items {
		out = append(out, labels[it.MessageID])
	}
	return out
}

// testRepostJob checks that a repost's JobDeliver keeps the original's
// author (RepostOfAuthorID) when stored and after a chunk, as a reply's
// keeps the user it answers: a job resumed after a restart applies the
// home timeline's rule as the first run did.
func testRepostJob(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author, other, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	orig := storeMessage(t, b, c, other.ID)
	r := newRepost(c, author.ID, orig)
	job := newDeliverJob(r, l)
	job.RepostOfAuthorID = other.ID
	require.NoError(t, b.CreateMessage(ctx, r, job))
	reply := newMessage(c, author.ID, "reply")
	reply.Kind, reply.ReplyToID, reply.ReplyToAuthorID, reply.RootID, reply.RootAuthorID = store.KindReply, orig.ID, other.ID, orig.ID, other.ID
	replyJob := newDeliverJob(reply, l)
	replyJob.ReplyToAuthorID = other.ID
	require.NoError(t, b.CreateMessage(ctx, reply, replyJob))
	pending, err := b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []*storage.Job{job, replyJob}, pending)

	_, err = b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: []store.ID{owner.ID}, At: c.Now(), Cursor: owner.ID[:]})
	require.NoError(t, err)
	pending, err = b.PendingJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	assert.Equal(t, other.ID, pending[0].RepostOfAuthorID, "kept with the job's progress")
	assert.Equal(t, owner.ID[:], pending[0].Cursor)
}

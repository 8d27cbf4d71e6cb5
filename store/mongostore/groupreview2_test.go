package mongostore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// Second review of the group commit's claims (c9fb46f).

// hasEntry reports whether o's inbox holds m.
func hasEntry(t *testing.T, ctx context.Context, st *mongostore.Store, o, m store.ID) bool {
	items, _, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: o, Layout: storage.LayoutEntries, Range: store.Backward(store.NilID, 100)})
	require.NoError(t, err)
	for _, it := range items {
		if it.MessageID == m {
			return true
		}
	}
	return false
}

// TestGroupReview2_AbortReleasesClaimsOfCountingRun: two runs of one plan
// g. The worker stores g; the lane's poll (PendingJobs → finishGroup)
// reads g before g.cl is set. The worker claims A and B, records cl and
// starts its count. Message A is deleted (its job becomes a retraction,
// keeping its claim), and o1 marks its inbox read (iv moves). The poll's
// claimGroup (its copy of g has no cl) is refused on A, so it releases
// every claim of g (B's, which the worker holds and is counting under)
// and drops the plan. The worker's count misses on o1, it reads o1 again,
// groupHeld finds the claims gone and concludes that "the advance had
// begun": it advances B without counting o1 and without writing any
// entry or record (o2 was counted for A and B, no entries).
//
// Fails on the branch: o1 never gets B (lost), o2's total is 2 with no
// entry.
func TestGroupReview2_AbortReleasesClaimsOfCountingRun(t *testing.T) {
	abortRace(t, true)
}

// TestGroupReview2_AbortRaceControl: the same deletion and mark-read
// without the poll's run: passes (the worker counts o1 again and writes
// every entry), so the poll's release is the fault.
func TestGroupReview2_AbortRaceControl(t *testing.T) {
	abortRace(t, false)
}

func abortRace(t *testing.T, withPoll bool) {
	ctx, worker, poll, other, fw, fp := twoStores(t)

	o1, o2, ms, js := groupPosts(t, ctx, other, 2)

	pReady, pGo, pDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var pOnce sync.Once
	ph := func(coll string) {
		if coll == "messages" { // the poll's claimGroup, from a plan read without cl
			pOnce.Do(func() {
				close(pReady)
				<-pGo
			})
		}
	}
	fp.onWrite.Store(&ph)
	stage := 0
	wh := func(coll string) {
		switch {
		case stage == 0 && coll == "leases": // the worker stores g
			stage = 1
		case stage == 1 && coll == "messages": // the worker claims: the poll has read g
			stage = 2
			if !withPoll {
				close(pDone)
				return
			}
			go func() {
				defer close(pDone)
				_, err := poll.PendingJobs(ctx)
				t.Logf("poll's PendingJobs: err=%v", err)
			}()
			<-pReady
		case stage == 2 && coll == "users": // the worker's count (claims made, cl recorded)
			stage = 3
			m := ms[0]
			require.NoError(t, other.DeleteMessage(ctx, m.ID, &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: storage.LayoutEntries,
				MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}))
			_, err := other.MarkInboxRead(ctx, o1, storage.LayoutEntries, store.NewID(time.Unix(1, 0)))
			require.NoError(t, err)
			if withPoll {
				close(pGo)
			}
			<-pDone
		}
	}
	fw.onWrite.Store(&wh)
	r, err := worker.DeliverInboxes(ctx, groupDeliveries(js, o1, o2))
	fw.onWrite.Store(nil)
	fp.onWrite.Store(nil)
	t.Logf("worker's DeliverInboxes: %v err=%v", r, err)
	require.Equal(t, 3, stage, "interleaving reached")
	// The Service retries the group.
	r, err = worker.DeliverInboxes(ctx, groupDeliveries(js, o1, o2))
	t.Logf("worker's retry: %v err=%v", r, err)

	for _, o := range []store.ID{o1, o2} {
		n, c := inboxOf(t, ctx, other, o)
		assert.True(t, hasEntry(t, ctx, other, o, ms[1].ID), "B's entry in %s's inbox", fmt.Sprint(o))
		assert.Equal(t, n, c.Total, "total counts the entries")
	}
}

// TestGroupReview2_RetractedGroupKeepsClaimsAfterDrop: every job of a
// group g is deleted after g claimed them. The worker counts g, writes
// its entries and records, fails to advance either job (retractions now,
// each keeping g's claim until its retraction's chunk settles it), drops
// g, and goes on to its next group g2 on the same owners (the retraction
// shares run after the deliveries queued before them). The lane's poll,
// which read g's plan (with cl) while the worker was counting, now reads
// the owners: g2's mark, a fresh iv. groupHeld is true (both jobs still
// hold g's claim although g's advance and drop are done), so the poll
// counts g's entries a second time.
//
// Fails on the branch: each owner's total is 6 for 4 entries.
func TestGroupReview2_RetractedGroupKeepsClaimsAfterDrop(t *testing.T) {
	ctx, worker, poll, other, fw, fp := twoStores(t)

	o1, o2, ms, js := groupPosts(t, ctx, other, 4)

	// The poll starts at the worker's count of g (claims made and recorded)
	// and is parked once it read g's plan, with cl: it reads g's owners
	// next. Meanwhile g's messages are deleted.
	release := parkPollAtCount(t, ctx, poll, fw, fp, func() {
		for _, m := range ms[:2] {
			require.NoError(t, other.DeleteMessage(ctx, m.ID, &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: storage.LayoutEntries,
				MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}))
		}
	})
	r, err := worker.DeliverInboxes(ctx, groupDeliveries(js[:2], o1, o2)) // g: both deleted meanwhile
	require.NoError(t, err)
	t.Logf("g: %v", r)
	r, err = worker.DeliverInboxes(ctx, groupDeliveries(js[2:], o1, o2)) // g2, same owners
	require.NoError(t, err)
	t.Logf("g2: %v", r)
	fw.onWrite.Store(nil)
	release()

	// g's entries are still there (their retractions have not run): 4.
	assertTotals(t, ctx, other, 4, o1, o2)
}

// TestGroupReview2_StaleOneJobAdvanceTakesClaim: a stale holder S runs a
// one-job chunk of job A with no owners (its last, empty chunk: no chunk
// plan is stored, so nothing conditional on gc is written) and stalls
// before advancing it. The new holder H groups A with B, claims both,
// records cl and starts counting. S's advanceJob, conditional only on
// A's cursor, ends A ($unset j), taking H's claim with it. One owner
// marks its inbox read, H's count misses on it, H reads it again and
// groupHeld (A's claim gone) says the advance had begun: H advances B
// and drops the plan without counting that owner or writing any entry.
//
// Fails on the branch: B's entry is missing from both inboxes, o2's total
// is 2 with no entry.
func TestGroupReview2_StaleOneJobAdvanceTakesClaim(t *testing.T) {
	ctx, stale, holder, other, fs, fh := twoStores(t)

	o1, o2, ms, js := groupPosts(t, ctx, other, 2)

	hReady, hGo, hDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	hStage := 0
	hh := func(coll string) {
		switch {
		case hStage == 0 && coll == "leases": // H stores its plan
			hStage = 1
		case hStage == 1 && coll == "users": // H's count: claims made and recorded
			hStage = 2
			close(hReady)
			<-hGo
		}
	}
	fh.onWrite.Store(&hh)
	var sOnce sync.Once
	sh := func(coll string) {
		if coll == "messages" { // S is about to advance A
			sOnce.Do(func() {
				go func() {
					defer close(hDone)
					r, err := holder.DeliverInboxes(ctx, groupDeliveries(js, o1, o2))
					t.Logf("H's group: %v err=%v", r, err)
				}()
				<-hReady
			})
		}
	}
	fs.onWrite.Store(&sh)
	_, err := stale.DeliverInbox(ctx, groupDeliveries(js[:1])[0])
	t.Logf("S's empty chunk: err=%v", err)
	fs.onWrite.Store(nil)
	_, err = other.MarkInboxRead(ctx, o1, storage.LayoutEntries, store.NewID(time.Unix(1, 0)))
	require.NoError(t, err)
	close(hGo)
	<-hDone
	fh.onWrite.Store(nil)
	require.Equal(t, 2, hStage, "interleaving reached")

	for _, o := range []store.ID{o1, o2} {
		n, c := inboxOf(t, ctx, other, o)
		assert.True(t, hasEntry(t, ctx, other, o, ms[1].ID), "B's entry in %s's inbox", fmt.Sprint(o))
		assert.Equal(t, n, c.Total, "total counts the entries")
	}
}

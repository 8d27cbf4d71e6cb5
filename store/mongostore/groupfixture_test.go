package mongostore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// Shared fixtures of the group commit's tests.

// openEngine opens an in-memory database, closed when the test ends.
func openEngine(t *testing.T) (context.Context, lungo.IClient) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(func() { engine.Close() })
	return ctx, client
}

// indexedStore opens a store on client, its indexes made.
func indexedStore(t *testing.T, ctx context.Context, client lungo.IClient) *mongostore.Store {
	st := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	return st
}

// twoStores opens one database with two stores, worker and poll, each
// through a faulty client of its own (fw, fp), and a clean one.
func twoStores(t *testing.T) (ctx context.Context, worker, poll, other *mongostore.Store, fw, fp *faults) {
	ctx, client := openEngine(t)
	fw, fp = &faults{}, &faults{}
	worker = indexedStore(t, ctx, fClient{client, fw})
	poll = indexedStore(t, ctx, fClient{client, fp})
	other = indexedStore(t, ctx, client)
	return ctx, worker, poll, other, fw, fp
}

// groupDeliveries delivers each job (a copy) to owners, done, at the
// next tick of the clock.
func groupDeliveries(js []*storage.Job, owners ...store.ID) []storage.Delivery {
	var ds []storage.Delivery
	for _, j := range js {
		jj := *j
		ds = append(ds, storage.Delivery{Job: &jj, Owners: slices.Clone(owners), At: tickClock(), Done: true})
	}
	return ds
}

// assertTotals checks that each owner's inbox holds want entries and
// counts them once in its total.
func assertTotals(t *testing.T, ctx context.Context, st *mongostore.Store, want int, owners ...store.ID) {
	t.Helper()
	assertInboxCounts(t, ctx, st, want, false, owners...)
}

// assertInboxes checks that each owner's inbox holds want entries,
// counted once in its total and its unread.
func assertInboxes(t *testing.T, ctx context.Context, st *mongostore.Store, want int, owners ...store.ID) {
	t.Helper()
	assertInboxCounts(t, ctx, st, want, true, owners...)
}

func assertInboxCounts(t *testing.T, ctx context.Context, st *mongostore.Store, want int, unread bool, owners ...store.ID) {
	t.Helper()
	for _, o := range owners {
		n, c := inboxOf(t, ctx, st, o)
		assert.Equal(t, want, n, "entries")
		assert.Equal(t, want, c.Total, "total counted once")
		if unread {
			assert.Equal(t, want, c.Unread, "unread counted once")
		}
	}
}

// failFirstWrite makes the first write to coll fail: f's write hook sets
// its next write (that one) to fail, once.
func failFirstWrite(f *faults, coll string) {
	failed := false
	hook := func(c string) {
		if c == coll && !failed {
			failed = true
			f.anyWrite.Store(1)
		}
	}
	f.onWrite.Store(&hook)
}

// parkPollAtCount starts the lane's poll (poll.PendingJobs, in a
// goroutine) when the worker (whose faults are fw) first writes users,
// its count of a group, and parks the poll before its first read of
// users (fp are the poll's faults): the poll has read the group's plan
// and reads its owners next. The worker's hook waits until the poll is
// parked, then runs atCount (if any). release lets the poll go on and
// waits for its end.
func parkPollAtCount(t *testing.T, ctx context.Context, poll *mongostore.Store, fw, fp *faults, atCount func()) (release func()) {
	pReady, pGo, pDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var readyOnce sync.Once
	rh := func(f *faults, coll string) {
		if f == fp && coll == "users" {
			readyOnce.Do(func() {
				close(pReady)
				<-pGo
			})
		}
	}
	readHook.Store(&rh)
	t.Cleanup(func() { readHook.Store(nil) })
	var startOnce sync.Once
	wh := func(coll string) {
		if coll == "users" {
			startOnce.Do(func() {
				go func() {
					defer close(pDone)
					_, err := poll.PendingJobs(ctx)
					t.Logf("poll's PendingJobs: err=%v", err)
				}()
				<-pReady
				if atCount != nil {
					atCount()
				}
			})
		}
	}
	fw.onWrite.Store(&wh)
	return func() {
		close(pGo)
		<-pDone
	}
}

// groupPosts makes the owners o1 and o2, then n authors (a0, a1, …), and
// posts one post of each author, with its delivery job.
func groupPosts(t *testing.T, ctx context.Context, st *mongostore.Store, n int) (o1, o2 store.ID, ms []*store.Message, js []*storage.Job) {
	o1, o2 = mkUser(t, st, "o1"), mkUser(t, st, "o2")
	var as []store.ID
	for i := range n {
		as = append(as, mkUser(t, st, fmt.Sprintf("a%d", i)))
	}
	ms, js = postJobs(t, ctx, st, as)
	return o1, o2, ms, js
}

package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// storedLayouts are the layouts whose entries and counts a backend keeps.
var storedLayouts = []storage.Layout{storage.LayoutEntries, storage.LayoutBuckets}

// allLayouts are every layout, stored or not.
var allLayouts = []storage.Layout{storage.LayoutNone, storage.LayoutEntries, storage.LayoutBuckets, storage.LayoutCache}

func layoutName(l storage.Layout) string {
	switch l {
	case storage.LayoutNone:
		return "None"
	case storage.LayoutEntries:
		return "Entries"
	case storage.LayoutBuckets:
		return "Buckets"
	case storage.LayoutCache:
		return "Cache"
	}
	return fmt.Sprintf("Layout%d", l)
}

// forStoredLayouts runs test once per stored layout, each on a fresh backend.
func forStoredLayouts(t *testing.T, open OpenFunc, name string, test func(t *testing.T, b storage.Backend, c *clock, l storage.Layout)) {
	for _, l := range storedLayouts {
		t.Run(name+"/"+layoutName(l), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			test(t, b, c, l)
		})
	}
}

func newDeliverJob(m *store.Message, l storage.Layout) *storage.Job {
	return &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: l, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
}

func newRetractJob(m *store.Message, l storage.Layout) *storage.Job {
	return &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: l, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
}

// newOwnerJob returns a JobFollow or JobUnfollow of owner and author, with
// an ID of its own.
func newOwnerJob(c *clock, kind storage.JobKind, l storage.Layout, owner, author store.ID) *storage.Job {
	return &storage.Job{ID: store.NewID(c.Now()), Kind: kind, Layout: l, OwnerID: owner, AuthorID: author}
}

func newRebuildJob(l storage.Layout, owner store.ID) *storage.Job {
	return &storage.Job{ID: owner, Kind: storage.JobRebuild, Layout: l, OwnerID: owner}
}

// post stores a message by author with its JobDeliver and delivers it to
// owners in one chunk, ending the job.
func post(t *testing.T, b storage.Backend, c *clock, l storage.Layout, author store.ID, owners ...store.ID) *store.Message {
	t.Helper()
	m := newMessage(c, author, "hello")
	job := newDeliverJob(m, l)
	require.NoError(t, b.CreateMessage(ctx, m, job))
	_, err := b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: owners, At: c.Now(), Done: true})
	require.NoError(t, err)
	return m
}

// storeMessage stores a message by author that no job delivers: what a
// follow or a rebuild brings in.
func storeMessage(t *testing.T, b storage.Backend, c *clock, author store.ID) *store.Message {
	t.Helper()
	m := newMessage(c, author, "stored")
	require.NoError(t, b.CreateMessage(ctx, m, nil))
	return m
}

func entryOf(m *store.Message) store.InboxEntry {
	return store.InboxEntry{MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
}

func entriesOf(msgs ...*store.Message) []store.InboxEntry {
	out := make([]store.InboxEntry, len(msgs))
	for i, m := range msgs {
		out[i] = entryOf(m)
	}
	return out
}

// ids maps xs to the ids id gives, in order.
func ids[T any](xs []T, id func(T) store.ID) []store.ID {
	out := make([]store.ID, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
}

func idsOf(msgs ...*store.Message) []store.ID {
	return ids(msgs, func(m *store.Message) store.ID { return m.ID })
}

func itemIDs(items []store.InboxItem) []store.ID {
	return ids(items, func(it store.InboxItem) store.ID { return it.MessageID })
}

func changeIDs(changes []storage.InboxChange) []store.ID {
	return ids(changes, func(c storage.InboxChange) store.ID { return c.MessageID })
}

func changeOwners(changes []storage.InboxChange) []store.ID {
	return ids(changes, func(c storage.InboxChange) store.ID { return c.Owner })
}

// inboxOf returns owner's whole inbox (up to 1000 entries) and its counts.
func inboxOf(t *testing.T, b storage.Backend, owner store.ID, l storage.Layout) ([]store.ID, store.InboxCounts) {
	t.Helper()
	items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: l, Range: store.Forward(store.NilID, 1000)})
	require.NoError(t, err)
	return itemIDs(items), counts
}

func countsOf(t *testing.T, b storage.Backend, owner store.ID, l storage.Layout) store.InboxCounts {
	t.Helper()
	_, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: l})
	require.NoError(t, err)
	return counts
}

// pageAll pages through an inbox with Before and the given page size.
func pageAll(t *testing.T, b storage.Backend, owner store.ID, l storage.Layout, size int) []store.ID {
	t.Helper()
	var all []store.ID
	before := store.NilID
	for {
		items, _, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: l, Range: store.Forward(before, size)})
		require.NoError(t, err)
		require.LessOrEqual(t, len(items), size)
		all = append(all, itemIDs(items)...)
		if len(items) < size {
			return all
		}
		before = items[len(items)-1].MessageID
	}
}

// retract deletes m and runs its whole JobRetract in chunks of two refs.
func retract(t *testing.T, b storage.Backend, m *store.Message, l storage.Layout) []storage.InboxChange {
	t.Helper()
	job := newRetractJob(m, l)
	require.NoError(t, b.DeleteMessage(ctx, m.ID, job))
	var changes []storage.InboxChange
	for {
		refs, next, err := b.FindDeliveries(ctx, m.ID, job.Cursor, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, len(refs), 2)
		got, err := b.RemoveInboxEntries(ctx, storage.Removal{Job: job, Refs: refs, Cursor: next, Done: next == nil})
		require.NoError(t, err)
		changes = append(changes, got...)
		if next == nil {
			return changes
		}
		job.Cursor = next
	}
}

func reversed(ids []store.ID) []store.ID {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

// step is one named step of a scenario; the steps of a scenario share its
// state, each building on what the ones before it left.
type step struct {
	name string
	run  func(t *testing.T)
}

// runSteps runs steps in order, each as a subtest. A step that stops
// (require, t.FailNow) ends the scenario, since the steps after it build
// on what it did not finish; one that only reports failures (assert) lets
// them run. A step that -run leaves out runs all the same, outside any
// subtest, so that a step it selects finds the state it builds on.
func runSteps(t *testing.T, steps ...step) {
	t.Helper()
	for _, s := range steps {
		ran, finished := false, false
		t.Run(s.name, func(t *testing.T) {
			ran = true
			s.run(t)
			finished = true
		})
		if !ran {
			s.run(t)
			continue
		}
		if !finished {
			return
		}
	}
}

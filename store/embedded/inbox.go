package embedded

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/storage"
)

const (
	entrySize = 12 + 8 + 8 // author, created ms, delivered ms
	ownerSize = len(store.ID{})
)

// insertMark ends the key of an InsertInbox delivery record, so that it
// never collides with a chunk record keyed by the same (message, owner).
const insertMark = "x"

func encodeEntry(author store.ID, created, delivered time.Time) []byte {
	return appendEntry(make([]byte, 0, entrySize), author, created, delivered)
}

// appendEntry appends the inbox entry value to dst.
func appendEntry(dst []byte, author store.ID, created, delivered time.Time) []byte {
	dst = append(dst, author[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(created.UnixMilli()))
	return binary.BigEndian.AppendUint64(dst, uint64(delivered.UnixMilli()))
}

func decodeEntry(owner, id store.ID, v []byte) (store.InboxItem, error) {
	var it store.InboxItem
	if len(v) != entrySize {
		return it, fmt.Errorf("decode inbox entry %s of %s: %d bytes, want %d (a data directory of an older format?)", id, owner, len(v), entrySize)
	}
	it.MessageID = id
	copy(it.AuthorID[:], v[0:12])
	it.CreatedAt = time.UnixMilli(int64(binary.BigEndian.Uint64(v[12:20]))).UTC()
	it.DeliveredAt = time.UnixMilli(int64(binary.BigEndian.Uint64(v[20:28]))).UTC()
	return it, nil
}

// storedLayout refuses a job that writes no stored inbox where one is needed.
func storedLayout(j *storage.Job) error {
	if !j.Layout.Stores() {
		return fmt.Errorf("job %s (kind %d) writes layout %d, which stores no entries", j.ID, j.Kind, j.Layout)
	}
	return nil
}

// DeliverInbox implements storage.Backend. The stored layouts read no head
// from disk: counts, read marks and last-seen times come from the heads in
// memory, and the chunk is one synced batch.
func (s *Store) DeliverInbox(_ context.Context, d storage.Delivery) ([]storage.InboxChange, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	r, err := s.deliver([]storage.Delivery{d})
	if err != nil {
		return nil, err
	}
	return r[0].Changes, r[0].Err
}

// DeliverInboxes implements storage.GroupDeliverer: the chunks as one
// synced batch, each with its own delivery and journal records and its
// job's advance. A group holding a LayoutCache chunk is delivered a chunk
// at a time: a cache is read from disk to be appended to, so two chunks
// in one batch would each append to the cache as it was before both.
func (s *Store) DeliverInboxes(_ context.Context, ds []storage.Delivery) ([]storage.Delivered, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	if len(ds) > 1 && slices.ContainsFunc(ds, func(d storage.Delivery) bool { return d.Job.Layout == storage.LayoutCache }) {
		out := make([]storage.Delivered, 0, len(ds))
		for _, d := range ds {
			r, err := s.deliver([]storage.Delivery{d})
			if err != nil {
				return out, err
			}
			out = append(out, r[0])
		}
		return out, nil
	}
	return s.deliver(ds)
}

// deliver stores ds in one synced batch. A chunk whose job is gone is
// reported NOT_FOUND and skipped. Callers hold inboxMu.
func (s *Store) deliver(ds []storage.Delivery) ([]storage.Delivered, error) {
	out := make([]storage.Delivered, len(ds))
	size := 0
	for _, d := range ds {
		size += len(d.Owners)
	}
	b := s.db.NewBatchWithSize(size * 128)
	defer b.Close()
	// The heads the chunks before have changed, so that a chunk counts on
	// top of them; the last of each owner's is the one to publish.
	var raised map[store.ID]int
	var heads []ownerHead
	if len(ds) > 1 {
		raised = make(map[store.ID]int, size)
	}
	raise := func(oh ownerHead) {
		if i, ok := raised[oh.owner]; ok {
			heads[i] = oh
			return
		}
		if raised != nil {
			raised[oh.owner] = len(heads)
		}
		heads = append(heads, oh)
	}
	seq := s.journalSeq
	var advanced bool
	for i, d := range ds {
		job, err := s.checkJob(d.Job)
		switch {
		case store.ErrorCode(err) == store.ENOTFOUND:
			out[i].Err = err
			continue
		case err != nil:
			return nil, err
		case job == nil:
			continue // applied before
		}
		changes, rec, added, err := s.stageDelivery(b, job, d, func(owner store.ID) head {
			if j, ok := raised[owner]; ok {
				return heads[j].head
			}
			return s.heads[owner]
		})
		if err != nil {
			return nil, err
		}
		for _, oh := range added {
			raise(oh)
		}
		if len(rec) > 0 {
			_ = b.Set(key(pDelivery, job.MessageID, d.Owners[len(d.Owners)-1]), rec, nil)
		}
		// The heads are counted by a journal record, not written (journal.go).
		if len(added) > 0 {
			seq++
			s.journal(b, seq, job.MessageID, rec)
		}
		if err := advanceJob(b, job, d.Cursor, d.Done); err != nil {
			return nil, err
		}
		advanced = true
		out[i].Changes = changes
	}
	if !advanced {
		return out, nil
	}
	if err := s.commitRaising(b, heads, true); err != nil {
		return nil, err
	}
	if seq != s.journalSeq {
		s.journalSeq, s.journalHas = seq, true
	}
	return out, nil
}

// stageDelivery adds to b the entries of one chunk of job, reading each
// owner's head through headOf, and returns the changes, the delivery
// record's owners, and the heads it raised.
func (s *Store) stageDelivery(b *pebble.Batch, job *storage.Job, d storage.Delivery, headOf func(store.ID) head) ([]storage.InboxChange, []byte, []ownerHead, error) {
	entry := job.Entry()
	changes := make([]storage.InboxChange, 0, len(d.Owners))
	heads := make([]ownerHead, 0, len(d.Owners))
	rec := make([]byte, 0, ownerSize*len(d.Owners))
	// Owners come from ListFollowers, ascending; a list that is not (a
	// caller's own) is deduplicated by a map.
	var seen map[store.ID]struct{}
	if !slices.IsSortedFunc(d.Owners, func(a, b store.ID) int { return cmp.Or(a.Compare(b), -1) }) {
		seen = make(map[store.ID]struct{}, len(d.Owners))
	}
	hs := make([]head, len(d.Owners))
	s.headsMu.RLock()
	for i, owner := range d.Owners {
		hs[i] = headOf(owner)
	}
	s.headsMu.RUnlock()
	value := encodeEntry(entry.AuthorID, entry.CreatedAt, d.At)
	// One scratch key: Set copies it into the batch.
	ek := append(make([]byte, 0, 1+2*ownerSize), pInbox)
	for i, owner := range d.Owners {
		if seen != nil {
			if _, dup := seen[owner]; dup {
				continue
			}
			seen[owner] = struct{}{}
		}
		h := hs[i]
		if !h.active(d.ActiveSince) {
			continue
		}
		change := storage.InboxChange{InboxRef: storage.InboxRef{Owner: owner}, MessageID: entry.MessageID}
		switch {
		case job.Layout.Stores():
			h.add(entry.MessageID)
			ek = append(append(ek[:1], owner[:]...), entry.MessageID[:]...)
			_ = b.Set(ek, value, nil)
			heads = append(heads, ownerHead{owner, h})
			rec = append(rec, owner[:]...)
			change.Counts = h.counts(job.Layout)
		case job.Layout == storage.LayoutCache:
			added, err := s.appendCache(b, owner, store.InboxItem{InboxEntry: entry, DeliveredAt: entry.CreatedAt}, d.At, d.CacheCap)
			if err != nil {
				return nil, nil, nil, err
			}
			if added {
				rec = append(rec, owner[:]...)
			}
			change.NoCounts = true
		default:
			// LayoutNone stores nothing; the owner reads the message from
			// the outbox, and still hears of it.
			change.NoCounts = true
		}
		changes = append(changes, change)
	}
	return changes, rec, heads, nil
}

// InsertInbox implements storage.Backend. It reads each entry's key (and its
// message's outbox key) first: an insertion is at most a few hundred
// entries, and dedupe is what makes a backfill safe to overlap deliveries.
func (s *Store) InsertInbox(_ context.Context, ins storage.Insertion) ([]storage.InboxChange, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	job, err := s.findJob(ins.Job)
	if err != nil {
		return nil, err
	}
	if err := storedLayout(job); err != nil {
		return nil, err
	}
	owner := job.OwnerID
	h, _ := s.headOf(owner)
	if job.Kind == storage.JobRebuild {
		h.rebuilding = false // in every change's counts: the step ends it
	}
	b := s.db.NewBatch()
	defer b.Close()
	var changes []storage.InboxChange
	seen := make(map[store.ID]struct{}, len(ins.Entries))
	for _, e := range ins.Entries {
		if _, dup := seen[e.MessageID]; dup {
			continue
		}
		seen[e.MessageID] = struct{}{}
		ek := key(pInbox, owner, e.MessageID)
		if _, ok, err := s.get(ek); err != nil {
			return nil, err
		} else if ok {
			continue
		}
		// A message deleted since the caller read it may already be
		// retracted everywhere; an entry for it now would never be.
		if _, ok, err := s.get(key(pOutbox, e.AuthorID, e.MessageID)); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		h.add(e.MessageID)
		_ = b.Set(ek, encodeEntry(e.AuthorID, e.CreatedAt, ins.At), nil)
		_ = b.Set(key(pDelivery, e.MessageID, owner, insertMark), owner[:], nil)
		changes = append(changes, storage.InboxChange{InboxRef: storage.InboxRef{Owner: owner}, MessageID: e.MessageID, Counts: h.counts(job.Layout)})
	}
	_ = b.Set(key(pHead, owner), s.stamp(h), nil)
	if err := advanceJob(b, job, nil, true); err != nil {
		return nil, err
	}
	if err := s.commitRaising(b, []ownerHead{{owner, h}}, false); err != nil {
		return nil, err
	}
	return changes, nil
}

// RemoveAuthorEntries implements storage.Backend. It walks the author's
// outbox, newest first, and point-checks the owner's inbox for each
// message, stopping at the owner's oldest entry: an owner's inbox holds
// the entries of every followee, usually far more than one author's
// messages since that oldest entry, so this reads less than a scan of the
// inbox would. An entry whose message was deleted is not in the outbox; its
// retraction removes it.
func (s *Store) RemoveAuthorEntries(_ context.Context, r storage.AuthorRemoval) ([]storage.InboxChange, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	job, err := s.findJob(r.Job)
	if err != nil {
		return nil, err
	}
	if err := storedLayout(job); err != nil {
		return nil, err
	}
	owner, author := job.OwnerID, job.AuthorID
	h, _ := s.headOf(owner)
	b := s.db.NewBatch()
	defer b.Close()
	var changes []storage.InboxChange
	oldest, has, err := s.oldestEntry(owner)
	if err != nil {
		return nil, err
	}
	if has {
		p := key(pOutbox, author)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: key(pOutbox, author, oldest), UpperBound: prefixEnd(p)})
		if err != nil {
			return nil, fmt.Errorf("embedded iter: %w", err)
		}
		for ok := it.Last(); ok; ok = it.Prev() {
			var id store.ID
			copy(id[:], it.Key()[len(p):])
			ek := key(pInbox, owner, id)
			_, found, err := s.get(ek)
			if err != nil {
				it.Close()
				return nil, err
			} else if !found {
				continue
			}
			h.remove(id)
			_ = b.Delete(ek, nil)
			changes = append(changes, storage.InboxChange{InboxRef: storage.InboxRef{Owner: owner}, MessageID: id, Counts: h.counts(job.Layout)})
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return nil, err
		}
	}
	_ = b.Set(key(pHead, owner), s.stamp(h), nil)
	if err := s.commitChunk(b, job, nil, true, []ownerHead{{owner, h}}); err != nil {
		return nil, err
	}
	return changes, nil
}

// RemoveOwnerEntries implements storage.Backend: a point read of each
// listed entry, and one synced batch deleting the ones there with the
// owner's head and the job's cursor.
func (s *Store) RemoveOwnerEntries(_ context.Context, r storage.OwnerRemoval) ([]storage.InboxChange, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	job, err := s.checkJob(r.Job)
	if err != nil || job == nil {
		return nil, err
	}
	if err := storedLayout(job); err != nil {
		return nil, err
	}
	owner := job.OwnerID
	h, _ := s.headOf(owner)
	b := s.db.NewBatch()
	defer b.Close()
	var changes []storage.InboxChange
	seen := make(map[store.ID]struct{}, len(r.MessageIDs))
	for _, id := range r.MessageIDs {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		ek := key(pInbox, owner, id)
		if _, found, err := s.get(ek); err != nil {
			return nil, err
		} else if !found {
			continue
		}
		h.remove(id)
		_ = b.Delete(ek, nil)
		changes = append(changes, storage.InboxChange{InboxRef: storage.InboxRef{Owner: owner}, MessageID: id, Counts: h.counts(job.Layout)})
	}
	var heads []ownerHead
	if len(changes) > 0 {
		_ = b.Set(key(pHead, owner), s.stamp(h), nil)
		heads = []ownerHead{{owner, h}}
	}
	if err := s.commitChunk(b, job, r.Cursor, r.Done, heads); err != nil {
		return nil, err
	}
	return changes, nil
}

// oldestEntry returns the message of owner's oldest stored entry.
func (s *Store) oldestEntry(owner store.ID) (store.ID, bool, error) {
	p := key(pInbox, owner)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return store.NilID, false, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var id store.ID
	if !it.First() {
		return id, false, it.Error()
	}
	copy(id[:], it.Key()[len(p):])
	return id, true, nil
}

// ReadInbox implements storage.Backend.
func (s *Store) ReadInbox(_ context.Context, f storage.InboxFilter) ([]store.InboxItem, store.InboxCounts, error) {
	if !f.Layout.Stores() {
		h, _ := s.headOf(f.Owner)
		return nil, h.counts(f.Layout), nil
	}
	// The counts come from the head in memory, read after the snapshot
	// the entries come from: writers raise counts before their entries
	// show and lower them after their entries are gone, so a page never
	// holds more items than its counts say.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	h, _ := s.headOf(f.Owner)
	counts := h.counts(f.Layout)
	if f.Limit <= 0 {
		return nil, counts, nil
	}
	p := key(pInbox, f.Owner)
	sp := spanOf(p, f.Range, true)
	it, err := snap.NewIter(sp.iterOptions())
	if err != nil {
		return nil, counts, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	items := make([]store.InboxItem, 0, min(f.Limit, 1024))
	for ok := sp.first(it); ok && len(items) < f.Limit; ok = sp.next(it) {
		id := idAfter(p, it.Key())
		item, err := decodeEntry(f.Owner, id, it.Value())
		if err != nil {
			return nil, counts, err
		}
		items = append(items, item)
	}
	return items, counts, it.Error()
}

// MarkInboxRead implements storage.Backend. Unread is recounted whatever the
// layout, so the head stays exact for the stored layouts; it costs a scan
// of the entries above the new mark only.
func (s *Store) MarkInboxRead(_ context.Context, owner store.ID, layout storage.Layout, mark store.ID) (store.InboxCounts, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	h, ok := s.headOf(owner)
	if !ok {
		return store.InboxCounts{}, store.Errorf(store.ENOTFOUND, "user not found")
	}
	if mark.Compare(h.mark) <= 0 {
		return h.counts(layout), nil
	}
	h.mark = mark
	if h.total > 0 {
		n, err := s.countAbove(owner, mark)
		if err != nil {
			return store.InboxCounts{}, err
		}
		h.unread = n
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(key(pHead, owner), s.stamp(h), nil)
	if err := s.commit(b); err != nil {
		return store.InboxCounts{}, err
	}
	s.setHeads([]ownerHead{{owner, h}})
	return h.counts(layout), nil
}

// countAbove counts owner's entries newer than mark.
func (s *Store) countAbove(owner, mark store.ID) (int, error) {
	p := key(pInbox, owner)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: append(key(pInbox, owner, mark), 0), UpperBound: prefixEnd(p)})
	if err != nil {
		return 0, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Error()
}

// FindDeliveries implements storage.Backend. The cursor is the key suffix of
// the delivery record to resume in, then the number of its owners already
// returned (4 bytes), so a page never exceeds limit.
func (s *Store) FindDeliveries(_ context.Context, messageID store.ID, cursor []byte, limit int) ([]storage.InboxRef, []byte, error) {
	p := key(pDelivery, messageID)
	lower, skip := p, 0
	var resume []byte
	if len(cursor) > 0 {
		if len(cursor) <= 4 {
			return nil, nil, store.Errorf(store.EINVALID, "malformed delivery cursor")
		}
		resume = key(pDelivery, messageID, cursor[:len(cursor)-4])
		skip = int(binary.BigEndian.Uint32(cursor[len(cursor)-4:]))
		lower = resume
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var refs []storage.InboxRef
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		if len(v)%ownerSize != 0 {
			return nil, nil, fmt.Errorf("decode delivery record of %s: %d bytes, not whole owners", messageID, len(v))
		}
		start := 0
		if resume != nil && bytes.Equal(it.Key(), resume) {
			start = skip * ownerSize
		}
		for i := start; i < len(v); i += ownerSize {
			if len(refs) >= limit {
				next := binary.BigEndian.AppendUint32(bytes.Clone(it.Key()[len(p):]), uint32(i/ownerSize))
				return refs, next, nil
			}
			var r storage.InboxRef
			copy(r.Owner[:], v[i:i+ownerSize])
			refs = append(refs, r)
		}
	}
	return refs, nil, it.Error()
}

// RemoveInboxEntries implements storage.Backend.
func (s *Store) RemoveInboxEntries(_ context.Context, r storage.Removal) ([]storage.InboxChange, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	job, err := s.checkJob(r.Job)
	if err != nil || job == nil {
		return nil, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	changes := make([]storage.InboxChange, 0, len(r.Refs))
	var heads []ownerHead
	// An owner can have two records for one message (delivered, removed
	// by an unfollow, inserted again by a follow); the entry goes once.
	done := make(map[store.ID]struct{}, len(r.Refs))
	for _, ref := range r.Refs {
		if _, dup := done[ref.Owner]; dup {
			continue
		}
		done[ref.Owner] = struct{}{}
		change := storage.InboxChange{InboxRef: storage.InboxRef{Owner: ref.Owner}, MessageID: job.MessageID}
		switch {
		case job.Layout.Stores():
			ek := key(pInbox, ref.Owner, job.MessageID)
			if _, ok, err := s.get(ek); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
			h, _ := s.headOf(ref.Owner)
			h.remove(job.MessageID)
			_ = b.Delete(ek, nil)
			_ = b.Set(key(pHead, ref.Owner), s.stamp(h), nil)
			heads = append(heads, ownerHead{ref.Owner, h})
			change.Counts = h.counts(job.Layout)
		case job.Layout == storage.LayoutCache:
			removed, err := s.removeFromCache(b, ref.Owner, job.MessageID)
			if err != nil {
				return nil, err
			} else if !removed {
				continue
			}
			change.NoCounts = true
		default:
			continue
		}
		changes = append(changes, change)
	}
	if r.Done {
		p := key(pDelivery, job.MessageID)
		_ = b.DeleteRange(p, prefixEnd(p), nil)
	}
	if err := s.commitChunk(b, job, r.Cursor, r.Done, heads); err != nil {
		return nil, err
	}
	return changes, nil
}

// commitRaising commits a batch that only adds entries, its jobs advanced
// in it already: its heads are published before the commit (raiseHeads:
// counts go up before the entries show) and taken back if it fails.
// journaled says the heads are counted by the batch's journal records,
// not written.
func (s *Store) commitRaising(b *pebble.Batch, heads []ownerHead, journaled bool) error {
	if err := s.disk.writable(); err != nil {
		return err // before the heads show counts that would be taken back
	}
	undo := s.raiseHeads(heads, journaled)
	if err := s.commit(b); err != nil {
		undo()
		return err
	}
	return nil
}

// commitChunk advances job (see advanceJob) in b, commits b, and then, the
// chunk being stored, caches the inbox heads it changed.
func (s *Store) commitChunk(b *pebble.Batch, job *storage.Job, cursor []byte, done bool, heads []ownerHead) error {
	if err := advanceJob(b, job, cursor, done); err != nil {
		return err
	}
	if err := s.commit(b); err != nil {
		return err
	}
	s.setHeads(heads)
	return nil
}

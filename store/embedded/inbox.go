package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

const (
	entrySize = 12 + 12 + 8 + 8 // message, author, created ms, delivered ms
	headSize  = 4 * 8           // seq, read seq, total, unread
	refSize   = 12 + 8          // owner, seq
)

func encodeEntry(e store.InboxEntry, delivered time.Time) []byte {
	v := make([]byte, 0, entrySize)
	v = append(v, e.MessageID[:]...)
	v = append(v, e.AuthorID[:]...)
	v = binary.BigEndian.AppendUint64(v, uint64(e.CreatedAt.UnixMilli()))
	return binary.BigEndian.AppendUint64(v, uint64(delivered.UnixMilli()))
}

func decodeEntry(v []byte) (store.InboxItem, error) {
	var it store.InboxItem
	if len(v) != entrySize {
		return it, fmt.Errorf("decode inbox entry: %d bytes", len(v))
	}
	copy(it.MessageID[:], v[0:12])
	copy(it.AuthorID[:], v[12:24])
	it.CreatedAt = time.UnixMilli(int64(binary.BigEndian.Uint64(v[24:32]))).UTC()
	it.DeliveredAt = time.UnixMilli(int64(binary.BigEndian.Uint64(v[32:40]))).UTC()
	return it, nil
}

func encodeHead(h store.InboxCounts) []byte {
	v := make([]byte, 0, headSize)
	v = binary.BigEndian.AppendUint64(v, h.Seq)
	v = binary.BigEndian.AppendUint64(v, h.ReadSeq)
	v = binary.BigEndian.AppendUint64(v, uint64(h.Total))
	return binary.BigEndian.AppendUint64(v, uint64(h.Unread))
}

func decodeHead(v []byte) (store.InboxCounts, error) {
	if len(v) != headSize {
		return store.InboxCounts{}, fmt.Errorf("decode inbox head: %d bytes", len(v))
	}
	return store.InboxCounts{
		Seq:     binary.BigEndian.Uint64(v[0:8]),
		ReadSeq: binary.BigEndian.Uint64(v[8:16]),
		Total:   int(binary.BigEndian.Uint64(v[16:24])),
		Unread:  int(binary.BigEndian.Uint64(v[24:32])),
	}, nil
}

// head returns an inbox's head from the cache or, on a miss, from the
// database. Only writers (holding inboxMu) put heads into the cache: a
// reader's copy could be older than a write committed meanwhile.
func (s *Store) head(owner store.ID) (store.InboxCounts, bool, error) {
	s.headsMu.RLock()
	h, ok := s.heads[owner]
	s.headsMu.RUnlock()
	if ok {
		return h, true, nil
	}
	v, found, err := s.get(key(pHead, owner))
	if err != nil || !found {
		return store.InboxCounts{}, false, err
	}
	h, err = decodeHead(v)
	return h, false, err
}

// cacheHeads stores heads after their batch committed. Callers hold inboxMu.
func (s *Store) cacheHeads(changes []store.InboxChange) {
	s.headsMu.Lock()
	for _, c := range changes {
		s.heads[c.Owner] = c.Counts
	}
	s.headsMu.Unlock()
}

// checkJob returns the stored job of a chunk if the chunk should apply:
// NOT_FOUND if the job is gone, nil if the job has moved past the chunk.
func (s *Store) checkJob(j *store.Job) (*store.Job, error) {
	stored, err := s.findJob(j.MessageID)
	if err != nil {
		return nil, err
	}
	if stored.Kind != j.Kind {
		return nil, store.Errorf(store.ENOTFOUND, "job not found")
	}
	if !bytes.Equal(stored.Cursor, j.Cursor) {
		return nil, nil
	}
	return stored, nil
}

// advanceJob records a job's progress in b, or removes the job when done.
func advanceJob(b *pebble.Batch, j *store.Job, cursor []byte, done bool) error {
	if done {
		return b.Delete(key(pJob, j.MessageID), nil)
	}
	next := *j
	next.Cursor = cursor
	return setJob(b, &next)
}

// DeliverInbox implements store.Backend.
func (s *Store) DeliverInbox(_ context.Context, d store.Delivery) ([]store.InboxChange, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	job, err := s.checkJob(d.Job)
	if err != nil || job == nil {
		return nil, err
	}
	b := s.db.NewBatchWithSize(len(d.Owners) * 128)
	defer b.Close()
	changes := make([]store.InboxChange, len(d.Owners))
	rec := make([]byte, 0, refSize*len(d.Owners))
	for i, owner := range d.Owners {
		h, _, err := s.head(owner)
		if err != nil {
			return nil, err
		}
		h.Seq++
		h.Total++
		h.Unread++
		_ = b.Set(key(pInbox, owner, h.Seq), encodeEntry(job.Entry(), d.At), nil)
		_ = b.Set(key(pHead, owner), encodeHead(h), nil)
		rec = append(rec, owner[:]...)
		rec = binary.BigEndian.AppendUint64(rec, h.Seq)
		changes[i] = store.InboxChange{InboxRef: store.InboxRef{Owner: owner, Seq: h.Seq}, Counts: h}
	}
	if len(d.Owners) > 0 {
		_ = b.Set(key(pDelivery, job.MessageID, d.Owners[len(d.Owners)-1]), rec, nil)
	}
	if err := advanceJob(b, job, d.Cursor, d.Done); err != nil {
		return nil, err
	}
	if err := s.commit(b); err != nil {
		return nil, err
	}
	s.cacheHeads(changes)
	return changes, nil
}

// ReadInbox implements store.Backend.
func (s *Store) ReadInbox(_ context.Context, f store.InboxFilter) ([]store.InboxItem, store.InboxCounts, error) {
	counts, _, err := s.head(f.Owner)
	if err != nil || f.Limit <= 0 {
		return nil, counts, err
	}
	p := key(pInbox, f.Owner)
	upper := prefixEnd(p)
	if f.Before > 0 {
		upper = key(pInbox, f.Owner, f.Before)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upper})
	if err != nil {
		return nil, counts, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	items := make([]store.InboxItem, 0, f.Limit)
	for ok := it.Last(); ok && len(items) < f.Limit; ok = it.Prev() {
		item, err := decodeEntry(it.Value())
		if err != nil {
			return nil, counts, err
		}
		item.Seq = binary.BigEndian.Uint64(it.Key()[len(p):])
		items = append(items, item)
	}
	return items, counts, it.Error()
}

// MarkInboxRead implements store.Backend.
func (s *Store) MarkInboxRead(_ context.Context, owner store.ID) (store.InboxCounts, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	h, _, err := s.head(owner)
	if err != nil {
		return h, err
	}
	h.ReadSeq, h.Unread = h.Seq, 0
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(key(pHead, owner), encodeHead(h), nil)
	if err := s.commit(b); err != nil {
		return store.InboxCounts{}, err
	}
	s.cacheHeads([]store.InboxChange{{InboxRef: store.InboxRef{Owner: owner}, Counts: h}})
	return h, nil
}

// FindDeliveries implements store.Backend. The cursor is the key suffix
// (last owner) of the last delivery record returned.
func (s *Store) FindDeliveries(_ context.Context, messageID store.ID, cursor []byte, limit int) ([]store.InboxRef, []byte, error) {
	p := key(pDelivery, messageID)
	lower := p
	if len(cursor) > 0 {
		lower = append(key(pDelivery, messageID, cursor), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var refs []store.InboxRef
	var next []byte
	ok := it.First()
	for ; ok && len(refs) < limit; ok = it.Next() {
		v := it.Value()
		if len(v)%refSize != 0 {
			return nil, nil, fmt.Errorf("decode delivery record: %d bytes", len(v))
		}
		for i := 0; i < len(v); i += refSize {
			var r store.InboxRef
			copy(r.Owner[:], v[i:i+12])
			r.Seq = binary.BigEndian.Uint64(v[i+12 : i+refSize])
			refs = append(refs, r)
		}
		next = bytes.Clone(it.Key()[len(p):])
	}
	if err := it.Error(); err != nil {
		return nil, nil, err
	}
	if !ok {
		next = nil // no record left after these
	}
	return refs, next, nil
}

// RemoveInboxEntries implements store.Backend.
func (s *Store) RemoveInboxEntries(_ context.Context, r store.Removal) ([]store.InboxChange, error) {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	job, err := s.checkJob(r.Job)
	if err != nil || job == nil {
		return nil, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	changes := make([]store.InboxChange, 0, len(r.Refs))
	for _, ref := range r.Refs {
		ek := key(pInbox, ref.Owner, ref.Seq)
		v, ok, err := s.get(ek)
		if err != nil {
			return nil, err
		}
		if !ok || !bytes.Equal(v[:12], job.MessageID[:]) {
			continue
		}
		h, _, err := s.head(ref.Owner)
		if err != nil {
			return nil, err
		}
		h.Total--
		if ref.Seq > h.ReadSeq {
			h.Unread--
		}
		_ = b.Delete(ek, nil)
		_ = b.Set(key(pHead, ref.Owner), encodeHead(h), nil)
		changes = append(changes, store.InboxChange{InboxRef: ref, Counts: h})
	}
	if r.Done {
		p := key(pDelivery, job.MessageID)
		_ = b.DeleteRange(p, prefixEnd(p), nil)
	}
	if err := advanceJob(b, job, r.Cursor, r.Done); err != nil {
		return nil, err
	}
	if err := s.commit(b); err != nil {
		return nil, err
	}
	s.cacheHeads(changes)
	return changes, nil
}

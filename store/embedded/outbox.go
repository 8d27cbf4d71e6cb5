package embedded

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/storage"
)

// The outbox index value holds what fan-out on read needs of a message, so
// that FindOutbox and CountOutbox decode no message document: its creation
// time (Unix ms), a flags byte (pulled; for a repost, hidden from its
// author's own home) and, for a reply to another user, that user, or for a
// repost, the reposted message and its author: what the home timeline's
// rule (storage.HomeRule) reads. A value of outboxSize bytes is a post, a
// reply to oneself, or a message stored before replies were told apart;
// the three forms differ in length.
const (
	outboxSize       = 8 + 1
	outboxReplySize  = outboxSize + idLen
	outboxRepostSize = outboxSize + 2*idLen
)

// The flags byte's bits.
const (
	outboxPulled byte = 1 << iota
	outboxHomeHidden
)

func encodeOutbox(m *store.Message) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, outboxRepostSize), uint64(m.CreatedAt.UnixMilli()))
	flags := byte(0)
	if m.Pulled {
		flags |= outboxPulled
	}
	if m.Kind == store.KindRepost && m.HomeHidden {
		flags |= outboxHomeHidden
	}
	v = append(v, flags)
	switch {
	case m.Kind == store.KindReply && m.ReplyToAuthorID != m.AuthorID:
		v = append(v, m.ReplyToAuthorID[:]...)
	case m.Kind == store.KindRepost:
		v = append(append(v, m.RepostOfID[:]...), m.RepostOfAuthorID[:]...)
	}
	return v
}

// outboxRow is one decoded outbox index entry.
type outboxRow struct {
	entry      store.InboxEntry
	pulled     bool
	replyTo    store.ID         // the user replied to, if another than the author
	repostOf   store.MessageKey // the message reposted, for a repost
	homeHidden bool             // a repost not at its author's own home
}

func decodeOutbox(author, id store.ID, v []byte) (outboxRow, error) {
	if len(v) != outboxSize && len(v) != outboxReplySize && len(v) != outboxRepostSize {
		return outboxRow{}, fmt.Errorf("decode outbox index of message %s: %d bytes, want %d, %d or %d (a data directory of an older format?)", id, len(v), outboxSize, outboxReplySize, outboxRepostSize)
	}
	known := outboxPulled
	if len(v) == outboxRepostSize {
		known |= outboxHomeHidden
	}
	if f := v[8]; f&^known != 0 {
		return outboxRow{}, fmt.Errorf("decode outbox index of message %s: flags %#x in a value of %d bytes", id, f, len(v))
	}
	row := outboxRow{
		entry:      store.InboxEntry{MessageID: id, AuthorID: author, CreatedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(v[:8]))).UTC()},
		pulled:     v[8]&outboxPulled != 0,
		homeHidden: v[8]&outboxHomeHidden != 0,
	}
	switch len(v) {
	case outboxReplySize:
		row.replyTo = store.ID(v[outboxSize:])
	case outboxRepostSize:
		row.repostOf = store.MessageKey{ID: store.ID(v[outboxSize:outboxReplySize]), AuthorID: store.ID(v[outboxReplySize:])}
	}
	return row, nil
}

func (r outboxRow) matches(f storage.PullFilter, home *storage.HomeRule) bool {
	if !home.Keeps(r.entry.AuthorID, r.replyTo, r.repostOf.AuthorID, r.homeHidden) {
		return false
	}
	switch f {
	case storage.PushedOnly:
		return !r.pulled
	case storage.PulledOnly:
		return r.pulled
	}
	return true
}

// outboxHeap orders each author's current row: the newest on top, or the
// oldest when up.
type outboxHeap struct {
	rows []outboxRow
	up   bool
}

func (h outboxHeap) Len() int { return len(h.rows) }
func (h outboxHeap) Less(i, j int) bool {
	return (h.rows[i].entry.MessageID.Compare(h.rows[j].entry.MessageID) > 0) != h.up
}
func (h outboxHeap) Swap(i, j int) { h.rows[i], h.rows[j] = h.rows[j], h.rows[i] }
func (h *outboxHeap) Push(x any)   { h.rows = append(h.rows, x.(outboxRow)) }
func (h *outboxHeap) Pop() any {
	x := h.rows[len(h.rows)-1]
	h.rows = h.rows[:len(h.rows)-1]
	return x
}

// nextOutbox returns author's row nearest to from (NilID: the newest, or
// the oldest when up) on the side the reading goes, below from or (up)
// above it, that passes the filter, using the shared iterator it.
func nextOutbox(it *pebble.Iterator, author, from store.ID, up bool, f storage.PullFilter, home *storage.HomeRule) (outboxRow, bool, error) {
	p := key(pOutbox, author)
	var ok bool
	switch {
	case up && from.IsZero():
		ok = it.SeekGE(p)
	case up:
		ok = it.SeekGE(prefixEnd(key(pOutbox, author, from)))
	case from.IsZero():
		ok = it.SeekLT(prefixEnd(p))
	default:
		ok = it.SeekLT(key(pOutbox, author, from))
	}
	for ; ok; ok = step(it, up) {
		k := it.Key()
		if len(k) != len(p)+len(store.ID{}) || string(k[:len(p)]) != string(p) {
			break
		}
		id := idAfter(p, k)
		row, err := decodeOutbox(author, id, it.Value())
		if err != nil {
			return row, false, err
		}
		if row.matches(f, home) {
			return row, true, nil
		}
	}
	return outboxRow{}, false, it.Error()
}

// FindOutbox implements storage.Backend: a k-way merge over one iterator,
// each author's next row found by a seek, so a page reads about Limit plus
// one row per author whatever the outboxes' sizes.
func (s *Store) FindOutbox(ctx context.Context, f storage.OutboxFilter) ([]storage.OutboxEntry, error) {
	if f.Limit <= 0 || len(f.Authors) == 0 {
		return nil, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pOutbox}, UpperBound: []byte{pOutbox + 1}})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	up := f.Ascending(true)
	h := outboxHeap{rows: make([]outboxRow, 0, len(f.Authors)), up: up}
	done := make(map[store.ID]struct{}, len(f.Authors))
	for i, a := range f.Authors {
		if _, dup := done[a]; dup {
			continue
		}
		// One seek an author, for every followee of a reader under
		// fan-out on read: it stops when its request does.
		if i%scanCheckEvery == scanCheckEvery-1 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		done[a] = struct{}{}
		row, ok, err := nextOutbox(it, a, f.From, up, f.Pulled, f.Home)
		if err != nil {
			return nil, err
		} else if ok {
			h.rows = append(h.rows, row)
		}
	}
	heap.Init(&h)
	out := make([]storage.OutboxEntry, 0, min(f.Limit, 1024))
	for h.Len() > 0 && len(out) < f.Limit {
		top := h.rows[0]
		out = append(out, storage.OutboxEntry{InboxEntry: top.entry, ReplyToAuthorID: top.replyTo,
			RepostOfID: top.repostOf.ID, RepostOfAuthorID: top.repostOf.AuthorID, HomeHidden: top.homeHidden})
		row, ok, err := nextOutbox(it, top.entry.AuthorID, top.entry.MessageID, up, f.Pulled, f.Home)
		if err != nil {
			return nil, err
		}
		if ok {
			h.rows[0] = row
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	// A message's JobDeliver is keyed by the message's ID.
	for i := range out {
		v, ok, err := s.get(key(pJob, out[i].MessageID))
		if err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		j, err := decodeJob(v)
		if err != nil {
			return nil, err
		}
		out[i].Pending = j.Kind == storage.JobDeliver
	}
	return out, nil
}

// CountOutbox implements storage.Backend.
func (s *Store) CountOutbox(ctx context.Context, f storage.OutboxFilter) (int, error) {
	n := 0
	done := make(map[store.ID]struct{}, len(f.Authors))
	for _, a := range f.Authors {
		if _, dup := done[a]; dup {
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		done[a] = struct{}{}
		p := key(pOutbox, a)
		lower := p
		if !f.After.IsZero() {
			lower = append(key(pOutbox, a, f.After), 0)
		}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
		if err != nil {
			return 0, fmt.Errorf("embedded iter: %w", err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			if f.Pulled == storage.AnyMessage && f.Home == nil {
				n++
				continue
			}
			var id store.ID
			copy(id[:], it.Key()[len(p):])
			row, err := decodeOutbox(a, id, it.Value())
			if err != nil {
				it.Close()
				return 0, err
			}
			if row.matches(f.Pulled, f.Home) {
				n++
			}
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// ListPullAuthors implements storage.Backend from the p index, which
// CreateMessage and DeleteMessage keep with PulledCount.
func (s *Store) ListPullAuthors(_ context.Context) ([]store.ID, error) {
	p := []byte{pPullers}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var out []store.ID
	for ok := it.First(); ok; ok = it.Next() {
		var id store.ID
		copy(id[:], it.Key()[1:])
		out = append(out, id)
	}
	return out, it.Error()
}

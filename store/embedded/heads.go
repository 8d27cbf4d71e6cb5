package embedded

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/storage"
)

// head is one user's inbox head: the counts of the stored layouts (which
// share the entry keys), the read mark and rebuilding flag every layout
// has, and the last-seen time fan-out skips inactive owners by.
type head struct {
	total, unread int
	mark          store.ID
	rebuilding    bool
	seen          int64 // Unix milliseconds
	// seq is the last journal entry the stored head reflects (journal.go).
	seq uint64
}

const (
	headSize = 8 + 8 + 12 + 1 + 8 + 8
	// headSizeV1 is a head stored before the journal: it reflects no
	// journal entry.
	headSizeV1 = headSize - 8
)

func (h head) encode() []byte {
	v := make([]byte, 0, headSize)
	v = binary.BigEndian.AppendUint64(v, uint64(h.total))
	v = binary.BigEndian.AppendUint64(v, uint64(h.unread))
	v = append(v, h.mark[:]...)
	flag := byte(0)
	if h.rebuilding {
		flag = 1
	}
	v = append(v, flag)
	v = binary.BigEndian.AppendUint64(v, uint64(h.seen))
	return binary.BigEndian.AppendUint64(v, h.seq)
}

func decodeHead(owner store.ID, v []byte) (head, error) {
	var h head
	if len(v) != headSize && len(v) != headSizeV1 {
		return h, fmt.Errorf("decode inbox head of %s: %d bytes, want %d (a data directory of an older format?)", owner, len(v), headSize)
	}
	h.total = int(binary.BigEndian.Uint64(v[0:8]))
	h.unread = int(binary.BigEndian.Uint64(v[8:16]))
	copy(h.mark[:], v[16:28])
	h.rebuilding = v[28] == 1
	h.seen = int64(binary.BigEndian.Uint64(v[29:37]))
	if len(v) == headSize {
		h.seq = binary.BigEndian.Uint64(v[37:45])
	}
	return h, nil
}

// counts returns the counts the contract gives for layout: all of them for
// the stored layouts, only the read mark and rebuilding flag for the others.
func (h head) counts(layout storage.Layout) store.InboxCounts {
	c := store.InboxCounts{ReadMark: h.mark, Rebuilding: h.rebuilding}
	if layout.Stores() {
		c.Total, c.Unread = h.total, h.unread
	}
	return c
}

// add counts one entry of message id.
func (h *head) add(id store.ID) {
	h.total++
	if id.Compare(h.mark) > 0 {
		h.unread++
	}
}

// remove uncounts one entry of message id.
func (h *head) remove(id store.ID) {
	h.total--
	if id.Compare(h.mark) > 0 {
		h.unread--
	}
}

// active reports whether the owner was last seen at or after since (zero:
// everyone is).
func (h head) active(since time.Time) bool {
	return since.IsZero() || h.seen >= since.UnixMilli()
}

type ownerHead struct {
	owner store.ID
	head  head
}

// loadHeads reads every head into memory. It runs once, at open.
func (s *Store) loadHeads() error {
	p := []byte{pHead}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		var owner store.ID
		copy(owner[:], it.Key()[1:])
		h, err := decodeHead(owner, it.Value())
		if err != nil {
			return err
		}
		s.heads[owner] = h
	}
	return it.Error()
}

// headOf returns owner's head.
func (s *Store) headOf(owner store.ID) (head, bool) {
	s.headsMu.RLock()
	defer s.headsMu.RUnlock()
	h, ok := s.heads[owner]
	return h, ok
}

// setHeads publishes heads after their batch committed (CreateUser: before).
func (s *Store) setHeads(heads []ownerHead) {
	if len(heads) == 0 {
		return
	}
	s.headsMu.Lock()
	for _, oh := range heads {
		s.heads[oh.owner] = oh.head
	}
	s.headsMu.Unlock()
}

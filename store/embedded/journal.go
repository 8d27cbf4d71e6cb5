package embedded

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// The delivery journal keeps fan-out from writing a head per delivery.
//
// A delivery chunk writes one entry key per owner and, instead of each
// owner's head, one journal record in the same batch: the message and the
// owners it counted. The heads in memory are exact at once; the stored
// heads catch up at a checkpoint, every checkpointEvery, which writes every
// head changed since (once, however many deliveries it took) and deletes
// the journal up to the last record, in one batch. Opening replays the
// records left: a stored head says which record it reflects last (its
// seq), so a record is counted for an owner only if the head predates it.
// Every other head write (mark-read, removals, insertions) writes the
// whole head stamped with the current seq, under inboxMu, so it reflects
// every record already counted in memory.
//
// This halves the keys a delivery writes, and a follower receiving many
// posts between checkpoints has its head written once.

const pJournal = 'J'

// checkpointEvery is how often the stored heads catch up with the journal.
const checkpointEvery = time.Second

func journalKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pJournal}, seq)
}

// stamp encodes h for storing under inboxMu: it reflects every journal
// record written so far.
func (s *Store) stamp(h head) []byte {
	h.seq = s.journalSeq
	return h.encode()
}

// journal adds to b the record, numbered seq, of a delivery of message to
// owners. Callers hold inboxMu.
func (s *Store) journal(b *pebble.Batch, seq uint64, message store.ID, owners []byte) {
	v := make([]byte, 0, len(message)+len(owners))
	v = append(v, message[:]...)
	v = append(v, owners...)
	_ = b.Set(journalKey(seq), v, nil)
}

// raiseHeads publishes heads that count entries of a batch about to
// commit, marking them as ahead of their stored form, and returns how to
// take them back if the commit fails. Counts go up before the entries
// show, so a page never shows more items than its counts. Callers hold
// inboxMu.
func (s *Store) raiseHeads(heads []ownerHead, journaled bool) (undo func()) {
	old := make([]ownerHead, len(heads))
	s.headsMu.Lock()
	for i, oh := range heads {
		old[i] = ownerHead{oh.owner, s.heads[oh.owner]}
		s.heads[oh.owner] = oh.head
		if journaled {
			s.dirty[oh.owner] = struct{}{}
		}
	}
	s.headsMu.Unlock()
	return func() {
		s.headsMu.Lock()
		for _, oh := range old {
			s.heads[oh.owner] = oh.head
		}
		s.headsMu.Unlock()
	}
}

// replayJournal counts, at open, the journal records the stored heads do
// not reflect yet, and continues the seq after the highest one seen.
func (s *Store) replayJournal() error {
	for _, h := range s.heads {
		s.journalSeq = max(s.journalSeq, h.seq)
	}
	p := []byte{pJournal}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != 9 || len(v) < ownerSize || (len(v)-ownerSize)%ownerSize != 0 {
			return fmt.Errorf("decode journal record %x: %d bytes", k, len(v))
		}
		seq := binary.BigEndian.Uint64(k[1:])
		var message store.ID
		copy(message[:], v)
		for o := v[ownerSize:]; len(o) > 0; o = o[ownerSize:] {
			var owner store.ID
			copy(owner[:], o)
			h, ok := s.heads[owner]
			if !ok || h.seq >= seq {
				continue
			}
			h.add(message)
			s.heads[owner] = h
			s.dirty[owner] = struct{}{}
		}
		s.journalSeq = max(s.journalSeq, seq)
		s.journalHas = true
	}
	return it.Error()
}

// checkpoint stores the heads changed since the last one and deletes the
// journal they now reflect, in one batch. While the disk is full it waits:
// the journal is replayed at open anyway.
func (s *Store) checkpoint() error {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	if !s.journalHas || s.disk.writable() != nil {
		return nil
	}
	s.headsMu.RLock()
	heads := make([]ownerHead, 0, len(s.dirty))
	for owner := range s.dirty {
		heads = append(heads, ownerHead{owner, s.heads[owner]})
	}
	s.headsMu.RUnlock()
	b := s.db.NewBatchWithSize(len(heads) * (1 + ownerSize + headSize + 16))
	defer b.Close()
	for _, oh := range heads {
		_ = b.Set(key(pHead, oh.owner), s.stamp(oh.head), nil)
	}
	_ = b.DeleteRange(journalKey(0), journalKey(s.journalSeq+1), nil)
	if err := s.commit(b); err != nil {
		return err
	}
	s.headsMu.Lock()
	clear(s.dirty)
	s.headsMu.Unlock()
	s.journalHas = false
	return nil
}

// checkpoints runs checkpoint every checkpointEvery until stop closes.
func (s *Store) checkpoints(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := s.checkpoint(); err != nil {
				s.log.Error("store checkpoint of inbox heads failed; retrying", "err", err)
			}
		}
	}
}

package embedded

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// CreateMessage implements storage.Backend.
func (s *Store) CreateMessage(_ context.Context, m *store.Message, job *storage.Job) error {
	// The author's stripe for the counters; a reply's parent's against
	// anything else rewriting the parent's record (threads.go).
	unlock := s.lock(lockKeys(m, false)...)
	defer unlock()
	author, err := s.findUserDoc(m.AuthorID)
	if err != nil {
		return err
	}
	if m.Kind == store.KindRepost {
		if err := s.checkRepost(m); err != nil {
			return err
		}
	}
	author.Messages++
	b := s.db.NewBatch()
	defer b.Close()
	if err := setMessage(b, m); err != nil {
		return err
	}
	_ = b.Set(key(pOutbox, m.AuthorID, m.ID), encodeOutbox(m), nil)
	if err := s.writeReply(b, m, true); err != nil {
		return err
	}
	if err := s.writeRepost(b, m, true); err != nil {
		return err
	}
	if m.Pulled {
		author.Pulled++
		if author.Pulled == 1 {
			_ = b.Set(key(pPullers, m.AuthorID), nil, nil)
		}
	}
	if err := setUserDoc(b, author); err != nil {
		return err
	}
	if job != nil {
		if err := setJob(b, job); err != nil {
			return err
		}
	}
	return s.commit(b)
}

func setMessage(b *pebble.Batch, m *store.Message) error {
	v, err := docs.Marshal(docs.FromMessage(m))
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	return b.Set(key(pMessage, m.ID), v, nil)
}

func decodeMessage(v []byte) (*store.Message, error) {
	m := new(store.Message)
	if err := decodeMessageTo(v, m); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeMessageTo decodes v into m. It keeps nothing of v.
func decodeMessageTo(v []byte, m *store.Message) error {
	var d docs.Message
	if err := docs.UnmarshalMessage(v, &d); err != nil {
		return fmt.Errorf("decode message: %w", err)
	}
	d.StoreTo(m)
	return nil
}

func (s *Store) findMessage(id store.ID) (*store.Message, error) {
	return findDoc(s, key(pMessage, id), decodeMessage, "message not found")
}

// readMessage is findMessage for reads: through the cache of decoded
// messages. Read-modify-writes read Pebble (findMessage).
func (s *Store) readMessage(id store.ID) (*store.Message, error) {
	return cachedDoc(s, s.decoded.messages, key(pMessage, id), id, decodeMessage, "message not found")
}

// FindMessageByID implements storage.Backend.
func (s *Store) FindMessageByID(_ context.Context, id store.ID) (*store.Message, error) {
	return s.readMessage(id)
}

// FindMessagesByKeys implements storage.Backend. Messages are keyed by id
// alone here; the author part of a key is for sharded backends.
func (s *Store) FindMessagesByKeys(_ context.Context, keys []store.MessageKey) ([]*store.Message, error) {
	ids := make([]store.ID, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	// The cached messages of a batch are copied into one slice: one
	// allocation instead of one per message (a timeline page reads 50).
	slab := make([]store.Message, len(keys))
	return cachedDocs(s, s.decoded.messages, []byte{pMessage}, ids, func(i int) *store.Message { return &slab[i] }, decodeMessage)
}

// FindMessages implements storage.Backend.
func (s *Store) FindMessages(_ context.Context, f storage.MessageFilter) ([]*store.Message, error) {
	p := key(pOutbox, f.AuthorID)
	sp := spanOf(p, f.Range, true)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make([]*store.Message, 0, f.Limit)
	for ok := sp.first(it); ok && len(out) < f.Limit; ok = sp.next(it) {
		id := idAfter(p, it.Key())
		m, err := s.readMessage(id)
		if store.ErrorCode(err) == store.ENOTFOUND {
			continue // deleted since the iterator's snapshot
		} else if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, it.Error()
}

// UpdateMessage implements storage.Backend.
func (s *Store) UpdateMessage(_ context.Context, id store.ID, upd storage.MessageUpdate) (*store.Message, error) {
	// The message's stripe orders this against DeleteMessage, so an edit
	// cannot write a deleted message back, and against likes, so neither
	// loses the other's change to the record.
	unlock := s.lock(id[:])
	defer unlock()
	m, err := s.findMessage(id)
	if err != nil {
		return nil, err
	}
	if upd.Text != nil {
		m.Text = *upd.Text
	}
	if upd.EditedAt != nil {
		m.EditedAt = upd.EditedAt
	}
	if upd.Mentions != nil {
		m.Mentions = *upd.Mentions
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := setMessage(b, m); err != nil {
		return nil, err
	}
	return m, s.commit(b)
}

// DeleteMessage implements storage.Backend.
func (s *Store) DeleteMessage(_ context.Context, id store.ID, retract *storage.Job) error {
	m, err := s.findMessage(id)
	if err != nil {
		return err
	}
	// inboxMu orders the deletion against deliveries: a delivery either
	// committed before (and its records are retracted) or finds its job gone.
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	// The author's stripe for the counters, the message's against an edit
	// or a like writing the record back, a reply's parent's or a repost's
	// original's for its count.
	// The author and the parent never change, so m read unlocked names them.
	unlock := s.lock(lockKeys(m, true)...)
	defer unlock()
	if m, err = s.findMessage(id); err != nil {
		return err
	}
	author, err := s.findUserDoc(m.AuthorID)
	if err != nil {
		return err
	}
	author.Messages--
	b := s.db.NewBatch()
	defer b.Close()
	if m.Pulled {
		author.Pulled--
		if author.Pulled == 0 {
			_ = b.Delete(key(pPullers, m.AuthorID), nil)
		}
	}
	_ = b.Delete(key(pMessage, id), nil)
	_ = b.Delete(key(pOutbox, m.AuthorID, id), nil)
	_ = b.Delete(key(pJob, id), nil)
	if err := s.writeReply(b, m, false); err != nil {
		return err
	}
	if err := s.writeRepost(b, m, false); err != nil {
		return err
	}
	if err := setUserDoc(b, author); err != nil {
		return err
	}
	if retract != nil {
		if err := setJob(b, retract); err != nil {
			return err
		}
	}
	return s.commit(b)
}

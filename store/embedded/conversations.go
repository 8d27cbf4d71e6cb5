package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// Conversations (docs/design.md#conversations) are four kinds of keys,
// with a conversation ID always 24 bytes in a key (a group's 12 padded
// with zeros, which no user ID is), so that no conversation's keys are a
// prefix of another's:
//
//	C <conv>               docs.Conv: members, admins, last seq, read receipts
//	M <conv> <seq>         docs.ConvMsg: history is one range, newest first
//	U <user> <last> <conv> docs.ConvMsg of the last message (or empty): the
//	                       user's list, most recently active first
//	V <user> <conv>        <last> <seq>: where the user's U key of conv
//	                       is, and the seq of the last message it holds
//	W <user>               docs.ReadState: the user's read state, one key
//
// Every operation is one batch, committed under convMu: a send touches the
// keys of every member, more than lock's stripes can hold, and a batch is
// atomic, so nothing is ever pending.
const (
	pConv          = 'C'
	pConvMessage   = 'M'
	pConvList      = 'U'
	pConvListPlace = 'V'
	pConvReads     = 'W'
)

// convKey is c as keys hold it: 24 bytes.
func convKey(c store.ConversationID) []byte {
	k := make([]byte, 2*len(store.ID{}))
	copy(k, c)
	return k
}

// convOfKey is the conversation of a 24-byte key part.
func convOfKey(k []byte) store.ConversationID {
	if bytes.Equal(k[len(store.ID{}):], make([]byte, len(store.ID{}))) {
		return store.ConversationID(k[:len(store.ID{})])
	}
	return store.ConversationID(k)
}

func (s *Store) readConv(c store.ConversationID) (*docs.Conv, error) {
	v, ok, err := s.get(key(pConv, convKey(c)))
	if err != nil || !ok {
		return nil, err
	}
	var d docs.Conv
	if err := docs.Unmarshal(v, &d); err != nil {
		return nil, fmt.Errorf("embedded: bad conversation %x: %w", c, err)
	}
	return &d, nil
}

func setDoc(b *pebble.Batch, k []byte, d any) error {
	v, err := docs.Marshal(d)
	if err != nil {
		return err
	}
	return b.Set(k, v, nil)
}

// CreateConversation implements storage.Backend.
func (s *Store) CreateConversation(_ context.Context, c *store.Conversation) error {
	s.convMu.Lock()
	defer s.convMu.Unlock()
	if d, err := s.readConv(c.ID); err != nil {
		return err
	} else if d != nil {
		return store.Errorf(store.ECONFLICT, "conversation exists")
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := setDoc(b, key(pConv, convKey(c.ID)), docs.FromConv(c)); err != nil {
		return err
	}
	for _, m := range c.Members {
		if err := s.placeEntry(b, m, c.ID, c.ID.Group(), nil); err != nil {
			return err
		}
	}
	return s.commit(b)
}

// placeEntry puts conv in user's list, as mongostore's placeEntries
// does: with msg, the entry takes it as its last message unless it holds
// a later seq, and moves to last if that is later; without, it sits at
// last unless it is later already. The V key holds the entry's place and
// its last message's seq.
func (s *Store) placeEntry(b *pebble.Batch, user store.ID, conv store.ConversationID, last store.ID, msg *docs.ConvMsg) error {
	ck := convKey(conv)
	pk := key(pConvListPlace, user, ck)
	old, ok, err := s.get(pk)
	if err != nil {
		return err
	}
	var oldLast store.ID
	var oldSeq uint64
	if ok {
		if len(old) != len(oldLast)+8 {
			return fmt.Errorf("embedded: bad conversation place %x", pk)
		}
		oldLast, oldSeq = store.ID(old[:len(oldLast)]), binary.BigEndian.Uint64(old[len(oldLast):])
	}
	var v []byte
	seq := oldSeq
	switch {
	case msg != nil && ok && oldSeq >= uint64(msg.Seq):
		return nil
	case msg != nil:
		seq = uint64(msg.Seq)
		if v, err = docs.Marshal(msg.Snapshot()); err != nil {
			return err
		}
	case ok && oldLast.Compare(last) >= 0:
		return nil
	case ok:
		// Moved without a message: it keeps its last one.
		if v, _, err = s.get(key(pConvList, user, oldLast, ck)); err != nil {
			return err
		}
	}
	if ok {
		_ = b.Delete(key(pConvList, user, oldLast, ck), nil)
		if oldLast.Compare(last) > 0 {
			last = oldLast
		}
	}
	_ = b.Set(key(pConvList, user, last, ck), v, nil)
	return b.Set(pk, binary.BigEndian.AppendUint64(bytes.Clone(last[:]), seq), nil)
}

// FindConversations implements storage.Backend.
func (s *Store) FindConversations(_ context.Context, ids []store.ConversationID) ([]*store.Conversation, error) {
	out := make([]*store.Conversation, len(ids))
	for i, id := range ids {
		d, err := s.readConv(id)
		if err != nil {
			return nil, err
		}
		if d != nil {
			out[i] = d.Store()
		}
	}
	return out, nil
}

// raiseReadState raises, in b, user's last seq told in conv to seq, and
// its read seq too if read; never lowers either.
func (s *Store) raiseReadState(b *pebble.Batch, user store.ID, conv store.ConversationID, seq int64, read bool) error {
	st, err := s.readState(user)
	if err != nil {
		return err
	}
	p := st.V[conv.String()]
	p.Last = max(p.Last, seq)
	if read {
		p.Read = max(p.Read, seq)
	}
	st.V[conv.String()] = p
	return setDoc(b, key(pConvReads, user), st)
}

func (s *Store) readState(user store.ID) (*docs.ReadState, error) {
	v, ok, err := s.get(key(pConvReads, user))
	if err != nil {
		return nil, err
	}
	st := &docs.ReadState{V: map[string]docs.ReadPos{}}
	if ok {
		if err := docs.Unmarshal(v, st); err != nil {
			return nil, fmt.Errorf("embedded: bad read state of %s: %w", user, err)
		}
		if st.V == nil {
			st.V = map[string]docs.ReadPos{}
		}
	}
	return st, nil
}

// AppendConversationMessage implements storage.Backend: one batch.
func (s *Store) AppendConversationMessage(_ context.Context, m *store.ConversationMessage) (*store.Conversation, error) {
	s.convMu.Lock()
	defer s.convMu.Unlock()
	d, err := s.readConv(m.ConversationID)
	if err != nil {
		return nil, err
	}
	if d == nil && !m.ConversationID.IsGroup() {
		a, b := m.ConversationID.Users()
		d = &docs.Conv{ID: docs.ConvDocID(m.ConversationID), Members: []primitive.ObjectID{primitive.ObjectID(a), primitive.ObjectID(b)}, Created: m.CreatedAt}
	}
	if d == nil || !slices.Contains(d.Members, primitive.ObjectID(m.AuthorID)) {
		return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
	}
	d.Seq++
	m.Seq = uint64(d.Seq)
	if d.Reads == nil {
		d.Reads = map[string]int64{}
	}
	d.Reads[m.AuthorID.String()] = d.Seq
	b := s.db.NewBatch()
	defer b.Close()
	ck := convKey(m.ConversationID)
	md := docs.FromConvMsg(m)
	if err := setDoc(b, key(pConv, ck), d); err != nil {
		return nil, err
	}
	// The key names the conversation: the value need not.
	if err := setDoc(b, key(pConvMessage, ck, m.Seq), md.Snapshot()); err != nil {
		return nil, err
	}
	for _, u := range d.Members {
		user := store.ID(u)
		if err := s.placeEntry(b, user, m.ConversationID, m.ID, md); err != nil {
			return nil, err
		}
		if err := s.raiseReadState(b, user, m.ConversationID, d.Seq, user == m.AuthorID); err != nil {
			return nil, err
		}
	}
	if err := s.commit(b); err != nil {
		return nil, err
	}
	return d.Store(), nil
}

// RecoverConversationSends implements storage.Backend: a send is one
// batch here, so none is ever pending.
func (s *Store) RecoverConversationSends(context.Context, time.Time) ([]*store.ConversationMessage, error) {
	return nil, nil
}

// ListConversationMessages implements storage.Backend: one range of M
// keys.
func (s *Store) ListConversationMessages(_ context.Context, conv store.ConversationID, r store.SeqRange) ([]*store.ConversationMessage, error) {
	p := key(pConvMessage, convKey(conv))
	lower, upper, up := p, prefixEnd(p), r.Reverse
	if r.From > 0 {
		if up {
			lower = key(pConvMessage, convKey(conv), r.From+1)
		} else {
			upper = key(pConvMessage, convKey(conv), r.From)
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var out []*store.ConversationMessage
	ok := it.Last()
	if up {
		ok = it.First()
	}
	for ; ok && len(out) < r.Limit; ok = step(it, up) {
		var d docs.ConvMsg
		if err := docs.Unmarshal(it.Value(), &d); err != nil {
			return nil, fmt.Errorf("embedded: bad conversation message %x: %w", it.Key(), err)
		}
		out = append(out, d.Store(conv))
	}
	return out, it.Error()
}

// UpdateConversationMessage implements storage.Backend.
func (s *Store) UpdateConversationMessage(_ context.Context, conv store.ConversationID, seq uint64, upd storage.ConversationMessageUpdate) (*store.ConversationMessage, error) {
	s.convMu.Lock()
	defer s.convMu.Unlock()
	ck := convKey(conv)
	mk := key(pConvMessage, ck, seq)
	v, ok, err := s.get(mk)
	if err != nil {
		return nil, err
	}
	var md docs.ConvMsg
	if ok {
		if err := docs.Unmarshal(v, &md); err != nil {
			return nil, fmt.Errorf("embedded: bad conversation message %x: %w", mk, err)
		}
	}
	// Deleting again changes nothing, as on a backend where the copies
	// are a second step that a repeat completes.
	if !ok || (md.Deleted && !upd.Delete) {
		return nil, store.Errorf(store.ENOTFOUND, "message not found")
	}
	applyMessageUpdate(&md, upd)
	b := s.db.NewBatch()
	defer b.Close()
	if err := setDoc(b, mk, &md); err != nil {
		return nil, err
	}
	d, err := s.readConv(conv)
	if err != nil {
		return nil, err
	}
	if d != nil {
		// The members' copies of it, where it is their last message.
		for _, u := range d.Members {
			if err := s.updateSnapshot(b, store.ID(u), ck, &md); err != nil {
				return nil, err
			}
		}
	}
	if err := s.commit(b); err != nil {
		return nil, err
	}
	return md.Store(conv), nil
}

// applyMessageUpdate edits or deletes md as upd says.
func applyMessageUpdate(md *docs.ConvMsg, upd storage.ConversationMessageUpdate) {
	if upd.Delete {
		md.Text, md.Edited, md.Deleted = "", nil, true
		return
	}
	if upd.Text != nil {
		md.Text = *upd.Text
	}
	at := upd.EditedAt.UTC()
	md.Edited = &at
}

func (s *Store) updateSnapshot(b *pebble.Batch, user store.ID, ck []byte, md *docs.ConvMsg) error {
	place, ok, err := s.get(key(pConvListPlace, user, ck))
	if err != nil || !ok || len(place) != len(store.ID{})+8 || binary.BigEndian.Uint64(place[len(store.ID{}):]) != uint64(md.Seq) {
		return err
	}
	return setDoc(b, key(pConvList, user, store.ID(place[:len(store.ID{})]), ck), md.Snapshot())
}

// ChangeConversationMembers implements storage.Backend.
func (s *Store) ChangeConversationMembers(_ context.Context, conv store.ConversationID, ch storage.MemberChange) (*store.Conversation, error) {
	s.convMu.Lock()
	defer s.convMu.Unlock()
	d, err := s.readConv(conv)
	if err != nil {
		return nil, err
	} else if d == nil {
		return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
	}
	b := s.db.NewBatch()
	defer b.Close()
	ck := convKey(conv)
	var added []store.ID
	for _, u := range ch.Add {
		if !slices.Contains(d.Members, primitive.ObjectID(u)) && !slices.Contains(added, u) {
			added = append(added, u)
		}
	}
	if len(d.Members)+len(added) > ch.MaxMembers && len(added) > 0 {
		return nil, store.Errorf(store.EINVALID, "a conversation has at most %d members", ch.MaxMembers)
	}
	for _, u := range added {
		d.Members = append(d.Members, primitive.ObjectID(u))
		if err := s.placeEntry(b, u, conv, store.NewID(ch.At), nil); err != nil {
			return nil, err
		}
		// What came before the join counts as read: unread counts start
		// at the join, not at the group's first message.
		if err := s.raiseReadState(b, u, conv, d.Seq, true); err != nil {
			return nil, err
		}
	}
	if !ch.Remove.IsZero() {
		r := primitive.ObjectID(ch.Remove)
		d.Members = slices.DeleteFunc(d.Members, func(x primitive.ObjectID) bool { return x == r })
		d.Admins = slices.DeleteFunc(d.Admins, func(x primitive.ObjectID) bool { return x == r })
		if len(d.Admins) == 0 && len(d.Members) > 0 {
			// The last admin went: the longest-standing member takes over.
			d.Admins = []primitive.ObjectID{d.Members[0]}
		}
		delete(d.Reads, ch.Remove.String())
		pk := key(pConvListPlace, ch.Remove, ck)
		if last, ok, err := s.get(pk); err != nil {
			return nil, err
		} else if ok {
			_ = b.Delete(key(pConvList, ch.Remove, store.ID(last[:len(store.ID{})]), ck), nil)
			_ = b.Delete(pk, nil)
		}
		st, err := s.readState(ch.Remove)
		if err != nil {
			return nil, err
		}
		if _, ok := st.V[conv.String()]; ok {
			delete(st.V, conv.String())
			if err := setDoc(b, key(pConvReads, ch.Remove), st); err != nil {
				return nil, err
			}
		}
	}
	if err := setDoc(b, key(pConv, ck), d); err != nil {
		return nil, err
	}
	if err := s.commit(b); err != nil {
		return nil, err
	}
	return d.Store(), nil
}

// ListConversations implements storage.Backend: one range of U keys.
func (s *Store) ListConversations(_ context.Context, user store.ID, r store.Range) ([]store.ConversationEntry, error) {
	p := key(pConvList, user)
	sp := spanOf(p, r, true)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var out []store.ConversationEntry
	for ok := sp.first(it); ok && len(out) < r.Limit; ok = sp.next(it) {
		k := it.Key()
		if len(k) != len(p)+len(store.ID{})+2*len(store.ID{}) {
			return nil, fmt.Errorf("embedded: bad conversation list key %x", k)
		}
		e := store.ConversationEntry{LastActivity: idAfter(p, k), ConversationID: convOfKey(k[len(p)+len(store.ID{}):])}
		if v := it.Value(); len(v) > 0 {
			var md docs.ConvMsg
			if err := docs.Unmarshal(v, &md); err != nil {
				return nil, fmt.Errorf("embedded: bad conversation list entry %x: %w", k, err)
			}
			e.Last = md.Store(e.ConversationID)
		}
		out = append(out, e)
	}
	return out, it.Error()
}

// MarkConversationRead implements storage.Backend.
func (s *Store) MarkConversationRead(_ context.Context, user store.ID, conv store.ConversationID, seq uint64) (store.UnreadConversations, error) {
	s.convMu.Lock()
	defer s.convMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	d, err := s.readConv(conv)
	if err != nil {
		return nil, err
	}
	if d != nil && slices.Contains(d.Members, primitive.ObjectID(user)) {
		if d.Reads == nil {
			d.Reads = map[string]int64{}
		}
		if r := d.Reads[user.String()]; int64(seq) > r {
			d.Reads[user.String()] = int64(seq)
			if err := setDoc(b, key(pConv, convKey(conv)), d); err != nil {
				return nil, err
			}
		}
	}
	st, err := s.readState(user)
	if err != nil {
		return nil, err
	}
	if p, ok := st.V[conv.String()]; ok && int64(seq) > p.Read {
		p.Read = int64(seq)
		st.V[conv.String()] = p
		if err := setDoc(b, key(pConvReads, user), st); err != nil {
			return nil, err
		}
	}
	if err := s.commit(b); err != nil {
		return nil, err
	}
	return st.Unread(), nil
}

// ReadUnreadConversations implements storage.Backend: one key.
func (s *Store) ReadUnreadConversations(_ context.Context, user store.ID) (store.UnreadConversations, error) {
	st, err := s.readState(user)
	if err != nil {
		return nil, err
	}
	return st.Unread(), nil
}

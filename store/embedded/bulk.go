package embedded

import (
	"context"
	"encoding/binary"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

var _ storage.BulkLoader = (*Store)(nil)

// Bulk loading writes the keys the primitives would have written for the
// same history, and nothing else:
//
//   - a user: u and h (the old handle's h removed on a reload), its
//     attribute index entries (the old ones removed), p iff PulledCount > 0,
//     and n: a new user's head holds only the last-seen time, a reloaded
//     user's keeps its counts and read mark, so reloading users after their
//     inboxes counts nothing twice;
//   - an edge: e and r, as Follow;
//   - a message: m and o, as CreateMessage (no job: it is delivered), and
//     for a reply its t key under its parent. LikeCount, ReplyCount (and
//     RootID) are stored as given, not counted from the batch's likes and
//     replies, which may be in another batch: the loader gives each
//     message the count of its loaded likes and replies (store/seed does),
//     and reloading a message that was liked or replied to since resets
//     its count. A repost is a message too, with its R and P keys (its original's
//     RepostCount comes with the original, its reposter's MessageCount with
//     the user), written without reading the pair's key first, as a like's
//     k: a pair reposted anew since the load would hold two reposts, which
//     is why the contract asks for pairs without another repost;
//   - a like: l, L and k, as Like writes them, reading nothing. A Get of
//     each pair's k first, to skip a pair liked already, cost 20 to 40 µs
//     a like once a bulk load had filled L0 with overlapping tables (this
//     store has no bloom filters): 7 s instead of 1 s for the likes of
//     herald bench's network. Loading the batch again writes the same
//     keys; a pair liked anew since the load would be listed twice, which
//     is why the contract asks for pairs without another like;
//   - an inbox entry: i, and the delivery record InsertInbox writes,
//     d <message> <owner> x, so that a retraction finds a loaded entry as
//     it finds an inserted one. A record per entry, not one per message:
//     a batch holds whole inboxes, so a message's owners in one batch are
//     few, and a record per entry cannot be overwritten by another batch's;
//   - an inbox: its head n, with total = unread = the number of items, no
//     read mark, not rebuilding, the last-seen time kept. An inbox that held
//     entries is cleared first (one range deletion), so it is replaced, not
//     merged; its old delivery records stay, harmless as an unfollow's are:
//     a removal skips an owner without the entry.
//
// A batch is one synced Pebble batch, its progress record included, so a
// batch and its progress are durable together or not at all.

// LoadBulk implements storage.BulkLoader. It returns BAD_USER_INPUT for a
// malformed batch (a zero ID, a user, like or inbox owner twice, an inbox whose
// items are not newest first without repeats, too many attributes, or
// inbox items for a layout that stores none), NOT_FOUND for an inbox whose
// owner is not loaded, and CONFLICT for a handle another user holds; in
// every such case nothing of the batch is written. The likes' messages are
// not read: a like names its message's author. Inboxes in a layout
// that stores none (LayoutNone, LayoutCache) must be empty and are
// ignored: those layouts keep no counts to replace.
//
// It holds inboxMu and, for a batch with users, every user stripe, so it
// is atomic to every other writer; the heads in memory change after the
// batch commits, still under inboxMu, so no writer sees the batch without
// its heads (ReadInbox reads stored heads from its snapshot).
func (s *Store) LoadBulk(ctx context.Context, bk *storage.Bulk) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := bk.Validate(); err != nil {
		return err
	}
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	if len(bk.Users) > 0 {
		defer s.lockAll()()
	}
	old, err := s.checkUsers(bk.Users)
	if err != nil {
		return err
	}
	if err := s.checkOwners(bk); err != nil {
		return err
	}

	b := s.db.NewBatchWithSize(bulkSize(bk))
	defer b.Close()
	w := bulkWriter{b: b, heads: make(map[store.ID]head, len(bk.Users)+len(bk.Inboxes)), seq: s.journalSeq}
	for i, u := range bk.Users {
		if err := s.writeUser(&w, u, old[i]); err != nil {
			return err
		}
	}
	for _, e := range bk.Edges {
		w.edge(e)
	}
	for _, m := range bk.Messages {
		if err := w.message(m); err != nil {
			return err
		}
	}
	for i := range bk.Likes {
		w.like(&bk.Likes[i])
	}
	if bk.Layout.Stores() {
		for _, in := range bk.Inboxes {
			s.writeInbox(&w, in)
		}
	}
	if p := bk.Progress; p != nil {
		_ = b.Set(key(pProgress, p.Name), p.Value, nil)
	}
	if err := s.commit(b); err != nil {
		return err
	}
	heads := make([]ownerHead, 0, len(w.heads))
	for id, h := range w.heads {
		heads = append(heads, ownerHead{id, h})
	}
	s.setHeads(heads)
	return nil
}

// BulkProgress implements storage.BulkLoader. A record stored with an empty
// value is returned as an empty, non-nil slice.
func (s *Store) BulkProgress(_ context.Context, name string) ([]byte, error) {
	v, ok, err := s.get(key(pProgress, name))
	if err != nil || !ok {
		return nil, err
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// checkUsers returns the stored documents of users (nil for a new one),
// aligned with users, or CONFLICT if a handle is held by another user, in
// the database or in the batch. Callers hold every user stripe.
func (s *Store) checkUsers(users []*store.User) ([]*docs.User, error) {
	old := make([]*docs.User, len(users))
	handles := make(map[string]store.ID, len(users))
	for i, u := range users {
		if other, ok := handles[u.Handle]; ok && other != u.ID {
			return nil, store.Errorf(store.ECONFLICT, "handle %q is taken", u.Handle)
		}
		handles[u.Handle] = u.ID
		v, ok, err := s.get(key(pHandle, u.Handle))
		if err != nil {
			return nil, err
		} else if ok && idAfter(nil, v) != u.ID {
			return nil, store.Errorf(store.ECONFLICT, "handle %q is taken", u.Handle)
		}
		v, ok, err = s.get(key(pUser, u.ID))
		if err != nil {
			return nil, err
		} else if ok {
			if old[i], err = decodeUserDoc(v); err != nil {
				return nil, err
			}
		}
	}
	return old, nil
}

// checkOwners returns NOT_FOUND for an inbox whose owner is neither stored
// nor in the batch: it has no head to replace. Callers hold inboxMu.
func (s *Store) checkOwners(bk *storage.Bulk) error {
	if !bk.Layout.Stores() {
		return nil
	}
	var users map[store.ID]struct{} // the batch's, made if needed
	for _, in := range bk.Inboxes {
		if _, ok := s.headOf(in.Owner); ok {
			continue
		}
		if users == nil {
			users = make(map[store.ID]struct{}, len(bk.Users))
			for _, u := range bk.Users {
				users[u.ID] = struct{}{}
			}
		}
		if _, ok := users[in.Owner]; !ok {
			return store.Errorf(store.ENOTFOUND, "bulk: inbox owner %s is not loaded", in.Owner)
		}
	}
	return nil
}

// lockAll locks every user stripe in order (the order lock takes stripes in)
// and returns the unlock.
func (s *Store) lockAll() func() {
	for i := range s.userLocks {
		s.userLocks[i].Lock()
	}
	return func() {
		for i := len(s.userLocks) - 1; i >= 0; i-- {
			s.userLocks[i].Unlock()
		}
	}
}

// Estimated batch bytes per record: a record is a kind byte, two varint
// lengths, the key and the value.
const (
	bulkUserBytes    = 256
	bulkEdgeBytes    = 2 * (3 + 1 + 2*len(store.ID{}) + 8)
	bulkMessageBytes = 160 + (3 + 1 + 2*len(store.ID{}) + outboxSize)
	bulkReplyBytes   = 3 + 1 + 3*len(store.ID{}) // t <parent> <reply>: author
	bulkEntryBytes   = (3 + 1 + 2*len(store.ID{}) + entrySize) + (3 + 1 + 2*len(store.ID{}) + len(insertMark) + ownerSize)
	bulkLikeBytes    = 2*(3+1+4*len(store.ID{})) + (3 + 1 + 3*len(store.ID{}))                   // l, L: two IDs each way; k: the ID
	bulkRepostBytes  = 2*len(store.ID{}) + 3 + 1 + 3*len(store.ID{}) + 3 + 1 + 2*len(store.ID{}) // the outbox's original; R <user> <original>: the ID; P <original> <repost>
)

// bulkSize estimates the batch bytes of bk, so that the batch's buffer is
// allocated once rather than grown by doubling and copying.
func bulkSize(bk *storage.Bulk) int {
	n := 64 + len(bk.Users)*bulkUserBytes + len(bk.Edges)*bulkEdgeBytes + len(bk.Likes)*bulkLikeBytes
	for _, m := range bk.Messages {
		// A mention is an array element: type, index key, ObjectID.
		n += bulkMessageBytes + len(m.Text) + len(m.Mentions)*(1+3+len(store.ID{}))
		if isReply(m) {
			n += bulkReplyBytes
		}
		if isRepost(m) {
			n += bulkRepostBytes
		}
	}
	for _, in := range bk.Inboxes {
		n += 64 + len(in.Items)*bulkEntryBytes
	}
	if p := bk.Progress; p != nil {
		n += 16 + len(p.Name) + len(p.Value)
	}
	return n
}

// bulkWriter writes a batch's records. Keys and values are built in two
// scratch buffers, which Set copies into the batch, so that an edge or an
// inbox entry allocates nothing.
type bulkWriter struct {
	b     *pebble.Batch
	k, v  []byte
	heads map[store.ID]head // the heads the batch writes, by owner
	seq   uint64            // the journal seq a written head reflects (journal.go)
}

// key2 returns the scratch key prefix a c, followed by suffix.
func (w *bulkWriter) key2(prefix byte, a, c store.ID, suffix string) []byte {
	w.k = append(append(append(append(w.k[:0], prefix), a[:]...), c[:]...), suffix...)
	return w.k
}

func (w *bulkWriter) setHead(owner store.ID, h head) {
	h.seq = w.seq
	w.heads[owner] = h
	_ = w.b.Set(key(pHead, owner), h.encode(), nil)
}

// writeUser writes u over its stored document old (nil if new). Callers
// hold every user stripe.
func (s *Store) writeUser(w *bulkWriter, u *store.User, old *docs.User) error {
	d := docs.FromUser(u)
	for _, a := range u.Attributes {
		tok, _, err := s.token(a.Name, true)
		if err != nil {
			return err
		}
		d.Attrs = append(d.Attrs, docs.Attr{Token: tok, Value: a.Value})
	}
	slices.SortFunc(d.Attrs, func(a, b docs.Attr) int { return int(a.Token - b.Token) })
	if old != nil {
		if old.Handle != u.Handle {
			_ = w.b.Delete(key(pHandle, old.Handle), nil)
		}
		// Deleted first: an entry the new attributes keep is set again below.
		for _, a := range old.Attrs {
			_ = w.b.Delete(append(attrIndexPrefix(a.Token, a.Value), u.ID[:]...), nil)
		}
		setSearchKeys(w.b, u.ID, store.SearchTerms(old.Handle, old.Name), nil)
		if old.Pulled > 0 && u.PulledCount <= 0 {
			_ = w.b.Delete(key(pPullers, u.ID), nil)
		}
	}
	for _, a := range d.Attrs {
		_ = w.b.Set(append(attrIndexPrefix(a.Token, a.Value), u.ID[:]...), nil, nil)
	}
	if u.PulledCount > 0 {
		_ = w.b.Set(key(pPullers, u.ID), nil, nil)
	}
	if err := setUserDoc(w.b, d); err != nil {
		return err
	}
	_ = w.b.Set(key(pHandle, u.Handle), u.ID[:], nil)
	setSearchKeys(w.b, u.ID, nil, store.SearchTerms(u.Handle, u.DisplayName))
	// A reloaded user keeps its inbox counts: its inbox may be loaded
	// already, and is replaced only by loading it.
	h, _ := s.headOf(u.ID)
	h.seen = u.LastSeenAt.UnixMilli()
	w.setHead(u.ID, h)
	return nil
}

// edge writes both keys of e, as Follow does.
func (w *bulkWriter) edge(e storage.Edge) {
	w.v = binary.BigEndian.AppendUint64(w.v[:0], uint64(e.At.UnixMilli()))
	_ = w.b.Set(w.key2(pFollowee, e.Follower, e.Followee, ""), w.v, nil)
	_ = w.b.Set(w.key2(pFollower, e.Followee, e.Follower, ""), w.v, nil)
}

// message writes m's document, outbox index, (for a reply) reply index key
// and (for a repost) guard key and ListReposts key, as CreateMessage does; the pullers key
// comes with the author's PulledCount, the parent's ReplyCount and the
// original's RepostCount with the parent and the original.
func (w *bulkWriter) message(m *store.Message) error {
	if err := setMessage(w.b, m); err != nil {
		return err
	}
	if isReply(m) {
		_ = w.b.Set(w.key2(pReplies, m.ReplyToID, m.ID, ""), m.AuthorID[:], nil)
	}
	if isRepost(m) {
		_ = w.b.Set(w.key2(pReposted, m.AuthorID, m.RepostOfID, ""), m.ID[:], nil)
		_ = w.b.Set(w.key2(pReposts, m.RepostOfID, m.ID, ""), nil, nil)
	}
	return w.b.Set(w.key2(pOutbox, m.AuthorID, m.ID, ""), encodeOutbox(m), nil)
}

// like writes l's three keys, as Like does; its message's LikeCount comes
// with the message.
func (w *bulkWriter) like(l *store.Like) {
	w.v = append(append(w.v[:0], l.MessageID[:]...), l.AuthorID[:]...)
	_ = w.b.Set(w.key2(pLikes, l.UserID, l.ID, ""), w.v, nil)
	w.v = append(append(w.v[:0], l.UserID[:]...), l.AuthorID[:]...)
	_ = w.b.Set(w.key2(pLikers, l.MessageID, l.ID, ""), w.v, nil)
	_ = w.b.Set(w.key2(pLiked, l.UserID, l.MessageID, ""), l.ID[:], nil)
}

// writeInbox replaces in.Owner's stored inbox with in.Items and its head's
// counts. Callers hold inboxMu, and have checked the owner has a head
// (stored, or written by this batch).
func (s *Store) writeInbox(w *bulkWriter, in storage.BulkInbox) {
	h, ok := w.heads[in.Owner]
	if !ok {
		h, _ = s.headOf(in.Owner)
	}
	// The head counts the stored entries exactly, so an inbox whose head
	// counts none has none to clear, and a first load writes no tombstone.
	if h.total > 0 {
		p := key(pInbox, in.Owner)
		_ = w.b.DeleteRange(p, prefixEnd(p), nil)
	}
	owner := in.Owner
	for i := range in.Items {
		it := &in.Items[i]
		w.v = appendEntry(w.v[:0], it.AuthorID, it.CreatedAt, it.DeliveredAt)
		_ = w.b.Set(w.key2(pInbox, owner, it.MessageID, ""), w.v, nil)
		_ = w.b.Set(w.key2(pDelivery, it.MessageID, owner, insertMark), owner[:], nil)
	}
	h.total, h.unread, h.mark, h.rebuilding = len(in.Items), len(in.Items), store.NilID, false
	w.setHead(owner, h)
}

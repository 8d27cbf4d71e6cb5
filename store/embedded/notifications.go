package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/storage"
)

// The notifications feed (storage.Notifications). Keys:
//
//	g <owner> <group>          group record (notificationGroup.encode)
//	G <owner> <group key>      the group's ID, to find a notice's group
//	x <owner> <latest>         the group's ID: the feed, newest activity first
//	y <owner> <group> <actor>  the actor's activity ID: dedupe of actors
//	Y <owner> <group> <act>    the actor: a group's actors, newest first
//	X <owner> <actor> <group>  the actor's activity ID: the groups of one
//	                           actor, for RemoveNotificationActor
//	z <owner>                  the feed's counts and read mark
//
// A Notify is one batch under the owner's stripe: moving a group to the top
// deletes its old x key and sets the new one with the record and the counts,
// so the feed, the group and the counts never disagree.
const (
	pNotifGroup   = 'g'
	pNotifKey     = 'G'
	pNotifFeed    = 'x'
	pNotifActor   = 'y'
	pNotifActors  = 'Y'
	pNotifCounts  = 'z'
	pNotifByActor = 'X'
	// pNotifByActorReady marks a store whose every actor has its X key; a
	// store from before them had none.
	pNotifByActorReady = 'Q'
	notifCountLen      = 4 + 4 + idLen
)

// encodeGroup encodes a group record: kind, key, message key, count,
// latest ID, then the latest actors.
func encodeGroup(g *store.NotificationGroup) []byte {
	b := make([]byte, 0, 2+len(g.Kind)+len(g.Key)+4*idLen+4+len(g.LatestActors)*idLen)
	b = append(b, byte(len(g.Kind)))
	b = append(b, g.Kind...)
	b = append(b, byte(len(g.Key)))
	b = append(b, g.Key...)
	b = append(b, g.Message.ID[:]...)
	b = append(b, g.Message.AuthorID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(g.Count))
	b = append(b, g.LatestID[:]...)
	for _, a := range g.LatestActors {
		b = append(b, a[:]...)
	}
	return b
}

func decodeGroup(owner, id store.ID, v []byte) (*store.NotificationGroup, error) {
	bad := fmt.Errorf("embedded: bad notification group %s of %s", id, owner)
	g := &store.NotificationGroup{ID: id, Owner: owner}
	str := func() (string, bool) {
		if len(v) < 1 || len(v) < 1+int(v[0]) {
			return "", false
		}
		s := string(v[1 : 1+v[0]])
		v = v[1+v[0]:]
		return s, true
	}
	kind, ok1 := str()
	k, ok2 := str()
	if !ok1 || !ok2 || len(v) < 3*idLen+4 || (len(v)-3*idLen-4)%idLen != 0 {
		return nil, bad
	}
	g.Kind, g.Key = store.NotificationKind(kind), k
	copy(g.Message.ID[:], v)
	copy(g.Message.AuthorID[:], v[idLen:])
	g.Count = int(binary.BigEndian.Uint32(v[2*idLen:]))
	copy(g.LatestID[:], v[2*idLen+4:])
	for rest := v[3*idLen+4:]; len(rest) > 0; rest = rest[idLen:] {
		g.LatestActors = append(g.LatestActors, store.ID(rest[:idLen]))
	}
	return g, nil
}

func encodeNotifCounts(c store.NotificationCounts) []byte {
	b := make([]byte, 0, notifCountLen)
	b = binary.BigEndian.AppendUint32(b, uint32(c.Total))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Unread))
	return append(b, c.ReadMark[:]...)
}

// notifCounts reads owner's counts (zero before any notice).
func (s *Store) notifCounts(r pebble.Reader, owner store.ID) (store.NotificationCounts, error) {
	v, closer, err := r.Get(key(pNotifCounts, owner))
	if err == pebble.ErrNotFound {
		return store.NotificationCounts{}, nil
	} else if err != nil {
		return store.NotificationCounts{}, fmt.Errorf("embedded get: %w", err)
	}
	defer closer.Close()
	if len(v) != notifCountLen {
		return store.NotificationCounts{}, fmt.Errorf("embedded: bad notification counts of %s", owner)
	}
	return store.NotificationCounts{Total: int(binary.BigEndian.Uint32(v)), Unread: int(binary.BigEndian.Uint32(v[4:])), ReadMark: store.ID(v[8:])}, nil
}

// Notify implements storage.Backend.
func (s *Store) Notify(_ context.Context, n storage.Notice) (storage.NotifyResult, error) {
	unlock := s.lock(n.Owner[:])
	defer unlock()
	c, err := s.notifCounts(s.db, n.Owner)
	if err != nil {
		return storage.NotifyResult{}, err
	}
	var g *store.NotificationGroup
	gid, found, err := s.get(key(pNotifKey, n.Owner, n.Key))
	if err != nil {
		return storage.NotifyResult{}, err
	}
	if found {
		if g, err = s.findGroup(n.Owner, store.ID(gid)); err != nil {
			return storage.NotifyResult{}, err
		}
		if _, had, err := s.get(key(pNotifActor, n.Owner, g.ID, n.Actor)); err != nil {
			return storage.NotifyResult{}, err
		} else if had {
			return storage.NotifyResult{Group: *g, Counts: c}, nil
		}
	} else {
		g = &store.NotificationGroup{ID: n.ID, Owner: n.Owner, Kind: n.Kind, Key: n.Key, Message: n.Message}
	}
	b := s.db.NewBatch()
	defer b.Close()
	wasUnread := found && g.Unread(c)
	if found {
		_ = b.Delete(key(pNotifFeed, n.Owner, g.LatestID), nil)
	} else {
		c.Total++
		_ = b.Set(key(pNotifKey, n.Owner, n.Key), g.ID[:], nil)
	}
	// A notice older than the group's newest activity (clocks of two
	// processes) counts the actor but does not move the group back.
	if n.ID.Compare(g.LatestID) > 0 {
		g.LatestID = n.ID
	}
	g.Count++
	g.LatestActors = append([]store.ID{n.Actor}, g.LatestActors...)[:min(len(g.LatestActors)+1, store.LatestActorsShown)]
	if !wasUnread && g.Unread(c) {
		c.Unread++
	}
	_ = b.Set(key(pNotifFeed, n.Owner, g.LatestID), g.ID[:], nil)
	_ = b.Set(key(pNotifGroup, n.Owner, g.ID), encodeGroup(g), nil)
	_ = b.Set(key(pNotifActor, n.Owner, g.ID, n.Actor), n.ID[:], nil)
	_ = b.Set(key(pNotifActors, n.Owner, g.ID, n.ID), n.Actor[:], nil)
	_ = b.Set(key(pNotifByActor, n.Owner, n.Actor, g.ID), n.ID[:], nil)
	_ = b.Set(key(pNotifCounts, n.Owner), encodeNotifCounts(c), nil)
	if err := s.commit(b); err != nil {
		return storage.NotifyResult{}, err
	}
	return storage.NotifyResult{Group: *g, Counts: c, Changed: true}, nil
}

func (s *Store) findGroup(owner, id store.ID) (*store.NotificationGroup, error) {
	return findDoc(s, key(pNotifGroup, owner, id), func(v []byte) (*store.NotificationGroup, error) { return decodeGroup(owner, id, v) }, "notification group not found")
}

// FindNotificationGroup implements storage.Backend.
func (s *Store) FindNotificationGroup(_ context.Context, owner, id store.ID) (*store.NotificationGroup, error) {
	return s.findGroup(owner, id)
}

// ReadNotifications implements storage.Backend: the x keys of the range,
// then their groups, from one snapshot, so the page and the counts agree.
func (s *Store) ReadNotifications(_ context.Context, owner store.ID, r store.Range) ([]store.NotificationGroup, store.NotificationCounts, error) {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	c, err := s.notifCounts(snap, owner)
	if err != nil {
		return nil, c, err
	}
	p := key(pNotifFeed, owner)
	sp := spanOf(p, r, true)
	it, err := snap.NewIter(sp.iterOptions())
	if err != nil {
		return nil, c, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var out []store.NotificationGroup
	for ok := sp.first(it); ok && len(out) < r.Limit; ok = sp.next(it) {
		if len(it.Value()) != idLen {
			return nil, c, fmt.Errorf("embedded: bad feed key %x", it.Key())
		}
		id := store.ID(it.Value())
		v, closer, err := snap.Get(key(pNotifGroup, owner, id))
		if err != nil {
			return nil, c, fmt.Errorf("embedded get: %w", err)
		}
		g, err := decodeGroup(owner, id, v)
		closer.Close()
		if err != nil {
			return nil, c, err
		}
		out = append(out, *g)
	}
	return out, c, it.Error()
}

// ListNotificationActors implements storage.Backend.
func (s *Store) ListNotificationActors(_ context.Context, owner, group store.ID, r store.Range) ([]store.NotificationActor, error) {
	p := key(pNotifActors, owner, group)
	sp := spanOf(p, r, true)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var out []store.NotificationActor
	for ok := sp.first(it); ok && len(out) < r.Limit; ok = sp.next(it) {
		if len(it.Value()) != idLen {
			return nil, fmt.Errorf("embedded: bad actor key %x", it.Key())
		}
		out = append(out, store.NotificationActor{ID: idAfter(p, it.Key()), UserID: store.ID(it.Value())})
	}
	return out, it.Error()
}

// MarkNotificationsRead implements storage.Backend. Unread is recounted
// from the feed keys above the mark.
func (s *Store) MarkNotificationsRead(_ context.Context, owner, mark store.ID) (store.NotificationCounts, error) {
	unlock := s.lock(owner[:])
	defer unlock()
	c, err := s.notifCounts(s.db, owner)
	if err != nil || mark.Compare(c.ReadMark) <= 0 {
		return c, err
	}
	c.ReadMark = mark
	p := key(pNotifFeed, owner)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: append(key(pNotifFeed, owner, mark), 0), UpperBound: prefixEnd(p)})
	if err != nil {
		return c, fmt.Errorf("embedded iter: %w", err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	err = it.Error()
	_ = it.Close()
	if err != nil {
		return c, err
	}
	c.Unread = n
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(key(pNotifCounts, owner), encodeNotifCounts(c), nil)
	return c, s.commit(b)
}

// removeActorBatch bounds the X keys RemoveNotificationActor reads at once.
const removeActorBatch = 100

// RemoveNotificationActor implements storage.Backend: under the owner's
// stripe, the X keys of (owner, actor) name the groups, and each group
// changes in one batch with the counts, so a crash leaves every group old
// or new and a re-run finds only those left.
func (s *Store) RemoveNotificationActor(_ context.Context, owner, actor store.ID) (storage.ActorRemoval, error) {
	unlock := s.lock(owner[:])
	defer unlock()
	var out storage.ActorRemoval
	c, err := s.notifCounts(s.db, owner)
	if err != nil {
		return out, err
	}
	out.Counts = c
	p := key(pNotifByActor, owner, actor)
	for {
		groups, err := s.actorGroups(p)
		if err != nil || len(groups) == 0 {
			return out, err
		}
		for _, ga := range groups {
			removed, err := s.removeFromGroup(owner, actor, ga[0], ga[1], &c)
			if err != nil {
				return out, err
			}
			if removed {
				out.Removed = append(out.Removed, ga[0])
			} else {
				out.Updated = append(out.Updated, ga[0])
			}
			out.Counts = c
		}
	}
}

// actorGroups returns up to removeActorBatch (group, activity) pairs of
// the X keys under p.
func (s *Store) actorGroups(p []byte) ([][2]store.ID, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var out [][2]store.ID
	for ok := it.First(); ok && len(out) < removeActorBatch; ok = it.Next() {
		if len(it.Value()) != idLen {
			return nil, fmt.Errorf("embedded: bad actor group key %x", it.Key())
		}
		out = append(out, [2]store.ID{idAfter(p, it.Key()), store.ID(it.Value())})
	}
	return out, it.Error()
}

// removeFromGroup takes actor (whose activity is act) out of owner's
// group gid in one batch, with the counts c, and reports whether the group
// went with them.
func (s *Store) removeFromGroup(owner, actor, gid, act store.ID, c *store.NotificationCounts) (bool, error) {
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(key(pNotifByActor, owner, actor, gid), nil)
	_ = b.Delete(key(pNotifActor, owner, gid, actor), nil)
	_ = b.Delete(key(pNotifActors, owner, gid, act), nil)
	g, err := s.findGroup(owner, gid)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return true, s.commit(b) // a stray index key: nothing to count
	} else if err != nil {
		return false, err
	}
	if g.Count <= 1 {
		if g.Unread(*c) {
			c.Unread--
		}
		c.Total--
		_ = b.Delete(key(pNotifGroup, owner, gid), nil)
		_ = b.Delete(key(pNotifKey, owner, g.Key), nil)
		_ = b.Delete(key(pNotifFeed, owner, g.LatestID), nil)
		_ = b.Set(key(pNotifCounts, owner), encodeNotifCounts(*c), nil)
		return true, s.commit(b)
	}
	g.Count--
	if slices.Contains(g.LatestActors, actor) {
		// The newest actors but this one: one more than shown.
		as, err := s.ListNotificationActors(context.Background(), owner, gid, store.Forward(store.NilID, store.LatestActorsShown+1))
		if err != nil {
			return false, err
		}
		g.LatestActors = g.LatestActors[:0]
		for _, a := range as {
			if a.UserID != actor && len(g.LatestActors) < store.LatestActorsShown {
				g.LatestActors = append(g.LatestActors, a.UserID)
			}
		}
	}
	_ = b.Set(key(pNotifGroup, owner, gid), encodeGroup(g), nil)
	return false, s.commit(b)
}

// indexNotifActors gives every actor of every group its X key, once per
// store: at the first open of a store from before them, a pass over the y
// keys (owner, group, actor: the activity ID) in batches of 1,000, then the
// mark. Setting a key twice changes nothing, so a pass stopped halfway is
// done again at the next open.
func (s *Store) indexNotifActors() error {
	if _, ok, err := s.get([]byte{pNotifByActorReady}); err != nil || ok {
		return err
	}
	p := []byte{pNotifActor}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 1+3*idLen || len(it.Value()) != idLen {
			return fmt.Errorf("embedded: bad actor key %x", k)
		}
		owner, group, actor := store.ID(k[1:]), store.ID(k[1+idLen:]), store.ID(k[1+2*idLen:])
		_ = b.Set(key(pNotifByActor, owner, actor, group), it.Value(), nil)
		if n++; n%1000 == 0 {
			if err := s.commit(b); err != nil {
				return err
			}
			b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	_ = b.Set([]byte{pNotifByActorReady}, nil, nil)
	return s.commit(b)
}

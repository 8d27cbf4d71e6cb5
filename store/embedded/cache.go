package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/storage"
)

// A cached inbox (LayoutCache) is one record, c <owner>: expiry (Unix ms),
// completeness, then its entries newest first (message, author, created
// ms, delivered ms). A read of the cache is one Get.
const cacheItemSize = 12 + 12 + 8 + 8

func encodeCache(c *storage.InboxCache) []byte {
	v := make([]byte, 0, 9+cacheItemSize*len(c.Items))
	v = binary.BigEndian.AppendUint64(v, uint64(c.Expires.UnixMilli()))
	complete := byte(0)
	if c.Complete {
		complete = 1
	}
	v = append(v, complete)
	for _, it := range c.Items {
		v = append(v, it.MessageID[:]...)
		v = append(v, it.AuthorID[:]...)
		v = binary.BigEndian.AppendUint64(v, uint64(it.CreatedAt.UnixMilli()))
		v = binary.BigEndian.AppendUint64(v, uint64(it.DeliveredAt.UnixMilli()))
	}
	return v
}

func decodeCache(owner store.ID, v []byte) (*storage.InboxCache, error) {
	if len(v) < 9 || (len(v)-9)%cacheItemSize != 0 {
		return nil, fmt.Errorf("decode inbox cache of %s: %d bytes, not a header and whole entries", owner, len(v))
	}
	c := &storage.InboxCache{
		Owner:    owner,
		Expires:  time.UnixMilli(int64(binary.BigEndian.Uint64(v[0:8]))).UTC(),
		Complete: v[8] == 1,
		Items:    make([]store.InboxItem, 0, (len(v)-9)/cacheItemSize),
	}
	for i := 9; i < len(v); i += cacheItemSize {
		var it store.InboxItem
		copy(it.MessageID[:], v[i:i+12])
		copy(it.AuthorID[:], v[i+12:i+24])
		it.CreatedAt = time.UnixMilli(int64(binary.BigEndian.Uint64(v[i+24 : i+32]))).UTC()
		it.DeliveredAt = time.UnixMilli(int64(binary.BigEndian.Uint64(v[i+32 : i+40]))).UTC()
		c.Items = append(c.Items, it)
	}
	return c, nil
}

// readCache returns owner's cache, expired or not, or nil.
func (s *Store) readCache(owner store.ID) (*storage.InboxCache, error) {
	v, ok, err := s.get(key(pCache, owner))
	if err != nil || !ok {
		return nil, err
	}
	return decodeCache(owner, v)
}

// mergeItems returns the union of have and add by message, newest first,
// cut to the newest capacity (no cut if capacity <= 0), and whether any
// entry was cut. An entry in have wins over one of the same message in add.
func mergeItems(have, add []store.InboxItem, capacity int) ([]store.InboxItem, bool) {
	out := make([]store.InboxItem, 0, len(have)+len(add))
	seen := make(map[store.ID]struct{}, len(have)+len(add))
	for _, list := range [][]store.InboxItem{have, add} {
		for _, it := range list {
			if _, dup := seen[it.MessageID]; dup {
				continue
			}
			seen[it.MessageID] = struct{}{}
			it.Message = nil
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b store.InboxItem) int { return b.MessageID.Compare(a.MessageID) })
	if capacity > 0 && len(out) > capacity {
		return out[:capacity], true
	}
	return out, false
}

// appendCache adds item to owner's cache in b if the cache is live at at,
// and reports whether it did. Callers hold inboxMu.
func (s *Store) appendCache(b *pebble.Batch, owner store.ID, item store.InboxItem, at time.Time, capacity int) (bool, error) {
	c, err := s.readCache(owner)
	if err != nil || c == nil || c.Expires.Before(at) {
		return false, err
	}
	var dropped bool
	c.Items, dropped = mergeItems(c.Items, []store.InboxItem{item}, capacity)
	c.Complete = c.Complete && !dropped
	return true, b.Set(key(pCache, owner), encodeCache(c), nil)
}

// removeFromCache removes message id from owner's cache in b, reporting
// whether the cache held it. Callers hold inboxMu.
func (s *Store) removeFromCache(b *pebble.Batch, owner, id store.ID) (bool, error) {
	c, err := s.readCache(owner)
	if err != nil || c == nil {
		return false, err
	}
	i := slices.IndexFunc(c.Items, func(it store.InboxItem) bool { return it.MessageID == id })
	if i < 0 {
		return false, nil
	}
	c.Items = slices.Delete(c.Items, i, i+1)
	return true, b.Set(key(pCache, owner), encodeCache(c), nil)
}

// ReadInboxCache implements storage.Backend.
func (s *Store) ReadInboxCache(_ context.Context, owner store.ID, now time.Time) (*storage.InboxCache, error) {
	c, err := s.readCache(owner)
	if err != nil || c == nil || c.Expires.Before(now) {
		return nil, err
	}
	return c, nil
}

// PutInboxCache implements storage.Backend. The result is complete if either
// the stored cache or the put one was (a put with no items only extends a
// cache's life), unless an entry was cut.
func (s *Store) PutInboxCache(_ context.Context, c *storage.InboxCache, capacity int) error {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	old, err := s.readCache(c.Owner)
	if err != nil {
		return err
	}
	next := &storage.InboxCache{Owner: c.Owner, Complete: c.Complete, Expires: c.Expires}
	var have []store.InboxItem
	if old != nil {
		have, next.Complete = old.Items, old.Complete || c.Complete
	}
	var dropped bool
	next.Items, dropped = mergeItems(have, c.Items, capacity)
	next.Complete = next.Complete && !dropped
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(key(pCache, c.Owner), encodeCache(next), nil)
	return s.commit(b)
}

// DropInboxCache implements storage.Backend.
func (s *Store) DropInboxCache(_ context.Context, owner store.ID) error {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(key(pCache, owner), nil)
	return s.commit(b)
}

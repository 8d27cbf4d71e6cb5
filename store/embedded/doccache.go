package embedded

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// Every timeline page reads its 50 messages and their authors; in Pebble
// that is a seek per document through every level, and a decode, which
// together were most of a page's CPU. docCache keeps decoded users and
// messages in memory, bounded: each shard holds a fixed number, and evicts
// by the clock (second chance), so a hit only sets a flag where an LRU
// list would relink three entries.
//
// It is kept exact by commit: every write of a user or message document
// goes through a batch, and commit drops from the cache each document the
// batch sets or deletes, after the batch is applied and before commit
// returns, so a read that starts after a write returns never finds the
// value from before it. A read that raced the write (read the old value
// from Pebble before the commit) must not put it back afterwards: each
// shard counts its drops, a read notes the count before it reads Pebble,
// and put keeps the value only if no drop happened in the shard since.
//
// Values in the cache are never handed out: get copies, and put stores a
// copy, so callers may change what they get (UpdateMessage does). Only
// the password hash's bytes are shared: nothing writes into a hash, every
// change replaces it.
type docCache[T any] struct {
	shards [docShards]docShard[T]
	copyTo func(dst, src *T)
}

const docShards = 64

type docShard[T any] struct {
	mu    sync.Mutex
	drops uint64 // invalidations in this shard, ever
	index map[store.ID]int32
	slots []docSlot[T] // up to size; free ones have v nil
	free  []int32
	size  int
	hand  int
}

type docSlot[T any] struct {
	id  store.ID
	v   *T
	ref bool // read since the hand last passed
}

// defaultDocCacheEntries is how many users, and how many messages, are
// kept decoded by default: the messages of about a thousand timeline pages,
// some 20 MiB of each kind.
const defaultDocCacheEntries = 1 << 16

func newDocCache[T any](entries int, copyTo func(dst, src *T)) *docCache[T] {
	c := &docCache[T]{copyTo: copyTo}
	per := max(1, entries/docShards)
	for i := range c.shards {
		c.shards[i].index = make(map[store.ID]int32, per)
		c.shards[i].size = per
	}
	return c
}

func (c *docCache[T]) shard(id store.ID) *docShard[T] {
	// The last 8 bytes of an ID are its random and counter parts.
	h := binary.LittleEndian.Uint64(id[4:]) * 0x9e3779b97f4a7c15
	return &c.shards[h>>(64-6)]
}

// get copies id's cached document into dst and returns true; on a miss it
// returns the shard's drop count for put.
func (c *docCache[T]) get(id store.ID, dst *T) (drops uint64, ok bool) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.index[id]
	if !ok {
		return sh.drops, false
	}
	sl := &sh.slots[i]
	sl.ref = true
	c.copyTo(dst, sl.v)
	return 0, true
}

// put caches a copy of v, read from Pebble after get returned drops,
// unless a document of the shard was dropped since: v may predate that
// write.
func (c *docCache[T]) put(id store.ID, v *T, drops uint64) {
	cp := new(T)
	c.copyTo(cp, v)
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.drops != drops {
		return
	}
	if i, ok := sh.index[id]; ok {
		sh.slots[i].v = cp
		return
	}
	var i int32
	switch {
	case len(sh.free) > 0:
		i = sh.free[len(sh.free)-1]
		sh.free = sh.free[:len(sh.free)-1]
	case len(sh.slots) < sh.size:
		sh.slots = append(sh.slots, docSlot[T]{})
		i = int32(len(sh.slots) - 1)
	default:
		// Full, with no free slot: the hand clears flags until it finds
		// a slot not read since it last passed, at most one turn.
		for sh.slots[sh.hand].ref {
			sh.slots[sh.hand].ref = false
			sh.hand = (sh.hand + 1) % len(sh.slots)
		}
		i = int32(sh.hand)
		sh.hand = (sh.hand + 1) % len(sh.slots)
		delete(sh.index, sh.slots[i].id)
	}
	sh.slots[i] = docSlot[T]{id: id, v: cp}
	sh.index[id] = i
}

// drop forgets id's document.
func (c *docCache[T]) drop(id store.ID) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.drops++
	if i, ok := sh.index[id]; ok {
		delete(sh.index, id)
		sh.slots[i] = docSlot[T]{}
		sh.free = append(sh.free, i)
	}
}

// dropAll forgets every document.
func (c *docCache[T]) dropAll() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.drops++
		clear(sh.index)
		clear(sh.slots)
		sh.slots, sh.free, sh.hand = sh.slots[:0], sh.free[:0], 0
		sh.mu.Unlock()
	}
}

func copyMessage(dst, src *store.Message) {
	*dst = *src
	dst.Mentions = slices.Clone(src.Mentions)
	if src.EditedAt != nil {
		t := *src.EditedAt
		dst.EditedAt = &t
	}
}

func copyUser(dst, src *store.User) {
	*dst = *src
	// Clipped, so that an append to a copy's hash never writes into
	// another's.
	dst.PasswordHash = slices.Clip(src.PasswordHash)
	dst.Attributes = slices.Clone(src.Attributes)
	dst.RevokedTokens = slices.Clone(src.RevokedTokens)
}

// docCaches are the store's caches of decoded documents, both nil when
// Options.DocCacheEntries turns them off.
type docCaches struct {
	users    *docCache[store.User]
	messages *docCache[store.Message]
}

func (d *docCaches) on() bool { return d.users != nil }

// writtenDocs returns the user and message documents b sets or deletes,
// and whether it deletes a range that may hold some (then every cached
// document is dropped).
func writtenDocs(b *pebble.Batch) (users, messages []store.ID, ranges bool) {
	r := b.Reader()
	for {
		kind, k, end, ok, err := r.Next()
		if err != nil || !ok {
			// A batch the store built cannot be illegible; were it,
			// dropping everything is still exact.
			return users, messages, ranges || err != nil
		}
		if kind == pebble.InternalKeyKindRangeDelete {
			// A range delete's value is its end key.
			if rangeHolds(k, end, pUser) || rangeHolds(k, end, pMessage) {
				ranges = true
			}
			continue
		}
		if len(k) < 1+len(store.ID{}) {
			continue
		}
		switch k[0] {
		case pUser:
			users = append(users, store.ID(k[1:1+len(store.ID{})]))
		case pMessage:
			messages = append(messages, store.ID(k[1:1+len(store.ID{})]))
		}
	}
}

// rangeHolds reports whether [start, end) may hold keys of prefix p.
func rangeHolds(start, end []byte, p byte) bool {
	return bytes.Compare(start, []byte{p + 1}) < 0 && bytes.Compare(end, []byte{p}) > 0
}

// drop forgets the documents b wrote; commit calls it once b is applied.
func (d *docCaches) drop(users, messages []store.ID, ranges bool) {
	if ranges {
		d.users.dropAll()
		d.messages.dropAll()
		return
	}
	for _, id := range users {
		d.users.drop(id)
	}
	for _, id := range messages {
		d.messages.drop(id)
	}
}

// cachedDocs is findDocs through c (nil: none): the documents c holds are copied into
// slot(i) for ids[i], the others read from Pebble, decoded and cached.
func cachedDocs[T any](s *Store, c *docCache[T], p []byte, ids []store.ID, slot func(i int) *T, decode func(v []byte) (*T, error)) ([]*T, error) {
	if c == nil {
		return findDocs(s, p, ids, decode)
	}
	out := make([]*T, len(ids))
	var missed []int
	var drops []uint64
	for i, id := range ids {
		v := slot(i)
		if d, ok := c.get(id, v); ok {
			out[i] = v
		} else {
			missed, drops = append(missed, i), append(drops, d)
		}
	}
	if len(missed) == 0 {
		return out, nil
	}
	missIDs := make([]store.ID, len(missed))
	for j, i := range missed {
		missIDs[j] = ids[i]
	}
	read, err := findDocs(s, p, missIDs, decode)
	if err != nil {
		return nil, err
	}
	for j, i := range missed {
		if read[j] != nil {
			out[i] = read[j]
			c.put(ids[i], read[j], drops[j])
		}
	}
	return out, nil
}

// cachedDoc is findDoc through c (nil: none), for the document of id at k.
func cachedDoc[T any](s *Store, c *docCache[T], k []byte, id store.ID, decode func([]byte) (*T, error), notFound string) (*T, error) {
	if c == nil {
		return findDoc(s, k, decode, notFound)
	}
	v := new(T)
	drops, ok := c.get(id, v)
	if ok {
		return v, nil
	}
	v, err := findDoc(s, k, decode, notFound)
	if err == nil {
		c.put(id, v, drops)
	}
	return v, err
}

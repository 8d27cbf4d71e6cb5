package storetest

import (
	"context"
	"maps"
	"sync"
	"time"

	"herald/store"
	"herald/store/storage"
)

// Counting is a storage.Backend that counts the calls made to the one it
// wraps, by method, for tests and benchmarks that hold a request to a
// number of round trips. It observes every call through storage.Observe,
// so a method added to the contract is counted without a change here.
type Counting struct {
	storage.Backend // b, observed by the Counting

	mu sync.Mutex
	n  map[string]int64
	// noAuthor counts the keys passed to FindMessagesByKeys with a NilID
	// author (a sharded backend would have to ask every shard for them).
	noAuthor int64
}

// NewCounting wraps b.
func NewCounting(b storage.Backend) *Counting {
	c := &Counting{n: map[string]int64{}}
	c.Backend = storage.Observe(b, c)
	return c
}

// Observe implements storage.Observer.
func (c *Counting) Observe(method string, _ time.Time, _ error) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

// Unwrap returns the wrapped backend, for storage.LeaserOf.
func (c *Counting) Unwrap() storage.Backend { return c.Backend }

// FindMessagesByKeys counts the keys without an author, then the call.
func (c *Counting) FindMessagesByKeys(ctx context.Context, keys []store.MessageKey) ([]*store.Message, error) {
	c.mu.Lock()
	for _, k := range keys {
		if k.AuthorID.IsZero() {
			c.noAuthor++
		}
	}
	c.mu.Unlock()
	return c.Backend.FindMessagesByKeys(ctx, keys)
}

// Reset zeroes the counters.
func (c *Counting) Reset() {
	c.mu.Lock()
	clear(c.n)
	c.noAuthor = 0
	c.mu.Unlock()
}

// Snapshot returns the calls per method since the last Reset, and their sum.
func (c *Counting) Snapshot() (map[string]int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var total int64
	for _, n := range c.n {
		total += n
	}
	return maps.Clone(c.n), total
}

// NoAuthor returns how many message keys without an author
// FindMessagesByKeys was given since the last Reset.
func (c *Counting) NoAuthor() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.noAuthor
}

// writeMethods are the methods that write; on the embedded backend each
// is one synced batch.
var writeMethods = []string{"CreateUser", "UpdateUser", "RevokeTokens", "SetAttributes", "Follow", "Unfollow", "CreateMessage", "UpdateMessage", "DeleteMessage", "Like", "Unlike", "DeliverInbox", "DeliverInboxes", "InsertInbox", "RemoveAuthorEntries", "MarkInboxRead", "RemoveInboxEntries", "PutInboxCache", "DropInboxCache", "StoreJob", "FinishJob", "MarkSeen"}

// Writes returns the calls since the last Reset that write.
func (c *Counting) Writes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, m := range writeMethods {
		n += c.n[m]
	}
	return n
}

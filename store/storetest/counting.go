package storetest

import (
	"context"
	"maps"
	"sync"
	"time"

	"herald/store"
)

// Counting is a store.Backend that counts the calls made to the one it
// wraps, by method, for tests and benchmarks that hold a request to a
// number of round trips. It implements every method itself (no
// embedding), so a method added to the contract fails to compile here
// rather than going uncounted.
type Counting struct {
	b  store.Backend
	mu sync.Mutex
	n  map[string]int64
	// noAuthor counts the keys passed to FindMessagesByKeys with a NilID
	// author (a sharded backend would have to ask every shard for them).
	noAuthor int64
}

var _ store.Backend = (*Counting)(nil)

// NewCounting wraps b.
func NewCounting(b store.Backend) *Counting {
	return &Counting{b: b, n: map[string]int64{}}
}

func (c *Counting) count(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
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
var writeMethods = []string{"CreateUser", "UpdateUser", "RevokeTokens", "SetAttributes", "Follow", "Unfollow", "CreateMessage", "UpdateMessage", "DeleteMessage", "DeliverInbox", "InsertInbox", "RemoveAuthorEntries", "MarkInboxRead", "RemoveInboxEntries", "PutInboxCache", "DropInboxCache", "StoreJob", "FinishJob", "MarkSeen"}

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

func (c *Counting) CreateUser(ctx context.Context, u *store.User) error {
	c.count("CreateUser")
	return c.b.CreateUser(ctx, u)
}

func (c *Counting) FindUserByID(ctx context.Context, id store.ID) (*store.User, error) {
	c.count("FindUserByID")
	return c.b.FindUserByID(ctx, id)
}

func (c *Counting) FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	c.count("FindUsersByIDs")
	return c.b.FindUsersByIDs(ctx, ids)
}

func (c *Counting) FindUserByHandle(ctx context.Context, handle string) (*store.User, error) {
	c.count("FindUserByHandle")
	return c.b.FindUserByHandle(ctx, handle)
}

func (c *Counting) UpdateUser(ctx context.Context, id store.ID, upd store.UserUpdate) (*store.User, error) {
	c.count("UpdateUser")
	return c.b.UpdateUser(ctx, id, upd)
}

func (c *Counting) RevokeTokens(ctx context.Context, id store.ID, r store.TokenRevocation) (*store.User, error) {
	c.count("RevokeTokens")
	return c.b.RevokeTokens(ctx, id, r)
}

func (c *Counting) SetAttributes(ctx context.Context, id store.ID, changes []store.AttributeChange) (*store.User, error) {
	c.count("SetAttributes")
	return c.b.SetAttributes(ctx, id, changes)
}

func (c *Counting) FindUsersByAttribute(ctx context.Context, name, value string, r store.Range) ([]*store.User, error) {
	c.count("FindUsersByAttribute")
	return c.b.FindUsersByAttribute(ctx, name, value, r)
}

func (c *Counting) CountUsersByAttribute(ctx context.Context, name, value string) (int, error) {
	c.count("CountUsersByAttribute")
	return c.b.CountUsersByAttribute(ctx, name, value)
}

func (c *Counting) Follow(ctx context.Context, follower, followee store.ID, at time.Time) (bool, error) {
	c.count("Follow")
	return c.b.Follow(ctx, follower, followee, at)
}

func (c *Counting) Unfollow(ctx context.Context, follower, followee store.ID) (bool, error) {
	c.count("Unfollow")
	return c.b.Unfollow(ctx, follower, followee)
}

func (c *Counting) FindFollowing(ctx context.Context, follower store.ID, targets []store.ID) ([]bool, error) {
	c.count("FindFollowing")
	return c.b.FindFollowing(ctx, follower, targets)
}

func (c *Counting) ListFollowers(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	c.count("ListFollowers")
	return c.b.ListFollowers(ctx, user, r)
}

func (c *Counting) ListFollowing(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	c.count("ListFollowing")
	return c.b.ListFollowing(ctx, user, r)
}

func (c *Counting) CreateMessage(ctx context.Context, m *store.Message, job *store.Job) error {
	c.count("CreateMessage")
	return c.b.CreateMessage(ctx, m, job)
}

func (c *Counting) FindMessageByID(ctx context.Context, id store.ID) (*store.Message, error) {
	c.count("FindMessageByID")
	return c.b.FindMessageByID(ctx, id)
}

func (c *Counting) FindMessagesByKeys(ctx context.Context, keys []store.MessageKey) ([]*store.Message, error) {
	c.count("FindMessagesByKeys")
	c.mu.Lock()
	for _, k := range keys {
		if k.AuthorID.IsZero() {
			c.noAuthor++
		}
	}
	c.mu.Unlock()
	return c.b.FindMessagesByKeys(ctx, keys)
}

func (c *Counting) FindMessages(ctx context.Context, f store.MessageFilter) ([]*store.Message, error) {
	c.count("FindMessages")
	return c.b.FindMessages(ctx, f)
}

func (c *Counting) UpdateMessage(ctx context.Context, id store.ID, upd store.MessageUpdate) (*store.Message, error) {
	c.count("UpdateMessage")
	return c.b.UpdateMessage(ctx, id, upd)
}

func (c *Counting) DeleteMessage(ctx context.Context, id store.ID, retract *store.Job) error {
	c.count("DeleteMessage")
	return c.b.DeleteMessage(ctx, id, retract)
}

func (c *Counting) FindOutbox(ctx context.Context, f store.OutboxFilter) ([]store.OutboxEntry, error) {
	c.count("FindOutbox")
	return c.b.FindOutbox(ctx, f)
}

func (c *Counting) CountOutbox(ctx context.Context, f store.OutboxFilter) (int, error) {
	c.count("CountOutbox")
	return c.b.CountOutbox(ctx, f)
}

func (c *Counting) ListPullAuthors(ctx context.Context) ([]store.ID, error) {
	c.count("ListPullAuthors")
	return c.b.ListPullAuthors(ctx)
}

func (c *Counting) DeliverInbox(ctx context.Context, d store.Delivery) ([]store.InboxChange, error) {
	c.count("DeliverInbox")
	return c.b.DeliverInbox(ctx, d)
}

func (c *Counting) InsertInbox(ctx context.Context, ins store.Insertion) ([]store.InboxChange, error) {
	c.count("InsertInbox")
	return c.b.InsertInbox(ctx, ins)
}

func (c *Counting) RemoveAuthorEntries(ctx context.Context, r store.AuthorRemoval) ([]store.InboxChange, error) {
	c.count("RemoveAuthorEntries")
	return c.b.RemoveAuthorEntries(ctx, r)
}

func (c *Counting) ReadInbox(ctx context.Context, f store.InboxFilter) ([]store.InboxItem, store.InboxCounts, error) {
	c.count("ReadInbox")
	return c.b.ReadInbox(ctx, f)
}

func (c *Counting) MarkInboxRead(ctx context.Context, owner store.ID, layout store.Layout, mark store.ID) (store.InboxCounts, error) {
	c.count("MarkInboxRead")
	return c.b.MarkInboxRead(ctx, owner, layout, mark)
}

func (c *Counting) FindDeliveries(ctx context.Context, messageID store.ID, cursor []byte, limit int) ([]store.InboxRef, []byte, error) {
	c.count("FindDeliveries")
	return c.b.FindDeliveries(ctx, messageID, cursor, limit)
}

func (c *Counting) RemoveInboxEntries(ctx context.Context, r store.Removal) ([]store.InboxChange, error) {
	c.count("RemoveInboxEntries")
	return c.b.RemoveInboxEntries(ctx, r)
}

func (c *Counting) ReadInboxCache(ctx context.Context, owner store.ID, now time.Time) (*store.InboxCache, error) {
	c.count("ReadInboxCache")
	return c.b.ReadInboxCache(ctx, owner, now)
}

func (c *Counting) PutInboxCache(ctx context.Context, ic *store.InboxCache, capacity int) error {
	c.count("PutInboxCache")
	return c.b.PutInboxCache(ctx, ic, capacity)
}

func (c *Counting) DropInboxCache(ctx context.Context, owner store.ID) error {
	c.count("DropInboxCache")
	return c.b.DropInboxCache(ctx, owner)
}

func (c *Counting) StoreJob(ctx context.Context, j *store.Job) error {
	c.count("StoreJob")
	return c.b.StoreJob(ctx, j)
}

func (c *Counting) FinishJob(ctx context.Context, j *store.Job) error {
	c.count("FinishJob")
	return c.b.FinishJob(ctx, j)
}

func (c *Counting) MarkSeen(ctx context.Context, user store.ID, at, inactiveBefore time.Time, rebuild *store.Job) (bool, error) {
	c.count("MarkSeen")
	return c.b.MarkSeen(ctx, user, at, inactiveBefore, rebuild)
}

func (c *Counting) PendingJobs(ctx context.Context) ([]*store.Job, error) {
	c.count("PendingJobs")
	return c.b.PendingJobs(ctx)
}

func (c *Counting) Close() error {
	c.count("Close")
	return c.b.Close()
}

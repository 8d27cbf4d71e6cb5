package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herald/store"
	"herald/store/storage"
)

// storeMetrics counts and times the calls to the storage backend, by
// method: each is one round trip to storage.
type storeMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newStoreMetrics() *storeMetrics {
	return &storeMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_store_calls_total",
			Help: "Storage backend calls by method and outcome (ok, not_found, conflict, error).",
		}, []string{"method", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herald_store_call_duration_seconds",
			Help:    "Duration of storage backend calls, by method.",
			Buckets: latencyBuckets,
		}, []string{"method"}),
	}
}

// callSeries are one method's series, resolved once.
type callSeries struct {
	ok, notFound, conflict, failed prometheus.Counter
	duration                       prometheus.Observer
}

// done records a call that started at start and returned err.
func (c *callSeries) done(start time.Time, err error) {
	c.duration.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		c.ok.Inc()
	case store.ErrorCode(err) == store.ENOTFOUND:
		c.notFound.Inc()
	case store.ErrorCode(err) == store.ECONFLICT:
		c.conflict.Inc()
	default:
		c.failed.Inc()
	}
}

// Backend methods, indexing meteredBackend.calls.
const (
	callCreateUser = iota
	callFindUserByID
	callFindUsersByIDs
	callFindUserByHandle
	callUpdateUser
	callRevokeTokens
	callSetAttributes
	callFindUsersByAttribute
	callCountUsersByAttribute
	callFollow
	callUnfollow
	callFindFollowing
	callListFollowers
	callListFollowing
	callCreateMessage
	callFindMessageByID
	callFindMessagesByKeys
	callFindMessages
	callUpdateMessage
	callDeleteMessage
	callFindOutbox
	callCountOutbox
	callListPullAuthors
	callDeliverInbox
	callInsertInbox
	callRemoveAuthorEntries
	callReadInbox
	callMarkInboxRead
	callFindDeliveries
	callRemoveInboxEntries
	callReadInboxCache
	callPutInboxCache
	callDropInboxCache
	callStoreJob
	callFinishJob
	callMarkSeen
	callPendingJobs
	callTryFanoutLease
	callReleaseFanoutLease
	numCalls
)

// callNames are the method label values, by index.
var callNames = [numCalls]string{
	callCreateUser:            "CreateUser",
	callFindUserByID:          "FindUserByID",
	callFindUsersByIDs:        "FindUsersByIDs",
	callFindUserByHandle:      "FindUserByHandle",
	callUpdateUser:            "UpdateUser",
	callRevokeTokens:          "RevokeTokens",
	callSetAttributes:         "SetAttributes",
	callFindUsersByAttribute:  "FindUsersByAttribute",
	callCountUsersByAttribute: "CountUsersByAttribute",
	callFollow:                "Follow",
	callUnfollow:              "Unfollow",
	callFindFollowing:         "FindFollowing",
	callListFollowers:         "ListFollowers",
	callListFollowing:         "ListFollowing",
	callCreateMessage:         "CreateMessage",
	callFindMessageByID:       "FindMessageByID",
	callFindMessagesByKeys:    "FindMessagesByKeys",
	callFindMessages:          "FindMessages",
	callUpdateMessage:         "UpdateMessage",
	callDeleteMessage:         "DeleteMessage",
	callFindOutbox:            "FindOutbox",
	callCountOutbox:           "CountOutbox",
	callListPullAuthors:       "ListPullAuthors",
	callDeliverInbox:          "DeliverInbox",
	callInsertInbox:           "InsertInbox",
	callRemoveAuthorEntries:   "RemoveAuthorEntries",
	callReadInbox:             "ReadInbox",
	callMarkInboxRead:         "MarkInboxRead",
	callFindDeliveries:        "FindDeliveries",
	callRemoveInboxEntries:    "RemoveInboxEntries",
	callReadInboxCache:        "ReadInboxCache",
	callPutInboxCache:         "PutInboxCache",
	callDropInboxCache:        "DropInboxCache",
	callStoreJob:              "StoreJob",
	callFinishJob:             "FinishJob",
	callMarkSeen:              "MarkSeen",
	callPendingJobs:           "PendingJobs",
	callTryFanoutLease:        "TryFanoutLease",
	callReleaseFanoutLease:    "ReleaseFanoutLease",
}

// meteredBackend is a storage.Backend that records every call to the one it
// wraps in storeMetrics. It implements each method itself (no embedding),
// so a method added to the contract fails to compile here rather than
// going unmeasured.
type meteredBackend struct {
	b     storage.Backend
	calls [numCalls]callSeries
}

// meteredLeaser is a meteredBackend over a backend that is also a
// storage.Leaser, which the fan-out finds by a type assertion: wrapping must
// not hide it.
type meteredLeaser struct {
	*meteredBackend
	l storage.Leaser
}

var (
	_ storage.Backend = (*meteredBackend)(nil)
	_ storage.Backend = meteredLeaser{}
	_ storage.Leaser  = meteredLeaser{}
)

// wrap returns b instrumented, implementing the optional interfaces b
// implements (storage.Leaser).
func (m *storeMetrics) wrap(b storage.Backend) storage.Backend {
	mb := &meteredBackend{b: b}
	for i, name := range callNames {
		mb.calls[i] = callSeries{
			ok:       m.total.WithLabelValues(name, "ok"),
			notFound: m.total.WithLabelValues(name, "not_found"),
			conflict: m.total.WithLabelValues(name, "conflict"),
			failed:   m.total.WithLabelValues(name, "error"),
			duration: m.duration.WithLabelValues(name),
		}
	}
	if l, ok := b.(storage.Leaser); ok {
		return meteredLeaser{meteredBackend: mb, l: l}
	}
	return mb
}

// TryFanoutLease implements storage.Leaser.
func (m meteredLeaser) TryFanoutLease(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	start := time.Now()
	held, err := m.l.TryFanoutLease(ctx, holder, ttl)
	m.calls[callTryFanoutLease].done(start, err)
	return held, err
}

// ReleaseFanoutLease implements storage.Leaser.
func (m meteredLeaser) ReleaseFanoutLease(ctx context.Context, holder string) error {
	start := time.Now()
	err := m.l.ReleaseFanoutLease(ctx, holder)
	m.calls[callReleaseFanoutLease].done(start, err)
	return err
}

// Close closes the wrapped backend; it is not a round trip, so not measured.
func (mb *meteredBackend) Close() error { return mb.b.Close() }

func (mb *meteredBackend) CreateUser(ctx context.Context, u *store.User) error {
	start := time.Now()
	err := mb.b.CreateUser(ctx, u)
	mb.calls[callCreateUser].done(start, err)
	return err
}

func (mb *meteredBackend) FindUserByID(ctx context.Context, id store.ID) (*store.User, error) {
	start := time.Now()
	res, err := mb.b.FindUserByID(ctx, id)
	mb.calls[callFindUserByID].done(start, err)
	return res, err
}

func (mb *meteredBackend) FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	start := time.Now()
	res, err := mb.b.FindUsersByIDs(ctx, ids)
	mb.calls[callFindUsersByIDs].done(start, err)
	return res, err
}

func (mb *meteredBackend) FindUserByHandle(ctx context.Context, handle string) (*store.User, error) {
	start := time.Now()
	res, err := mb.b.FindUserByHandle(ctx, handle)
	mb.calls[callFindUserByHandle].done(start, err)
	return res, err
}

func (mb *meteredBackend) UpdateUser(ctx context.Context, id store.ID, upd storage.UserUpdate) (*store.User, error) {
	start := time.Now()
	res, err := mb.b.UpdateUser(ctx, id, upd)
	mb.calls[callUpdateUser].done(start, err)
	return res, err
}

func (mb *meteredBackend) RevokeTokens(ctx context.Context, id store.ID, r store.TokenRevocation) (*store.User, error) {
	start := time.Now()
	res, err := mb.b.RevokeTokens(ctx, id, r)
	mb.calls[callRevokeTokens].done(start, err)
	return res, err
}

func (mb *meteredBackend) SetAttributes(ctx context.Context, id store.ID, changes []store.AttributeChange) (*store.User, error) {
	start := time.Now()
	res, err := mb.b.SetAttributes(ctx, id, changes)
	mb.calls[callSetAttributes].done(start, err)
	return res, err
}

func (mb *meteredBackend) FindUsersByAttribute(ctx context.Context, name, value string, r store.Range) ([]*store.User, error) {
	start := time.Now()
	res, err := mb.b.FindUsersByAttribute(ctx, name, value, r)
	mb.calls[callFindUsersByAttribute].done(start, err)
	return res, err
}

func (mb *meteredBackend) CountUsersByAttribute(ctx context.Context, name, value string) (int, error) {
	start := time.Now()
	res, err := mb.b.CountUsersByAttribute(ctx, name, value)
	mb.calls[callCountUsersByAttribute].done(start, err)
	return res, err
}

func (mb *meteredBackend) Follow(ctx context.Context, follower, followee store.ID, at time.Time) (bool, error) {
	start := time.Now()
	res, err := mb.b.Follow(ctx, follower, followee, at)
	mb.calls[callFollow].done(start, err)
	return res, err
}

func (mb *meteredBackend) Unfollow(ctx context.Context, follower, followee store.ID) (bool, error) {
	start := time.Now()
	res, err := mb.b.Unfollow(ctx, follower, followee)
	mb.calls[callUnfollow].done(start, err)
	return res, err
}

func (mb *meteredBackend) FindFollowing(ctx context.Context, follower store.ID, targets []store.ID) ([]bool, error) {
	start := time.Now()
	res, err := mb.b.FindFollowing(ctx, follower, targets)
	mb.calls[callFindFollowing].done(start, err)
	return res, err
}

func (mb *meteredBackend) ListFollowers(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	start := time.Now()
	res, err := mb.b.ListFollowers(ctx, user, r)
	mb.calls[callListFollowers].done(start, err)
	return res, err
}

func (mb *meteredBackend) ListFollowing(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	start := time.Now()
	res, err := mb.b.ListFollowing(ctx, user, r)
	mb.calls[callListFollowing].done(start, err)
	return res, err
}

func (mb *meteredBackend) CreateMessage(ctx context.Context, m *store.Message, job *storage.Job) error {
	start := time.Now()
	err := mb.b.CreateMessage(ctx, m, job)
	mb.calls[callCreateMessage].done(start, err)
	return err
}

func (mb *meteredBackend) FindMessageByID(ctx context.Context, id store.ID) (*store.Message, error) {
	start := time.Now()
	res, err := mb.b.FindMessageByID(ctx, id)
	mb.calls[callFindMessageByID].done(start, err)
	return res, err
}

func (mb *meteredBackend) FindMessagesByKeys(ctx context.Context, keys []store.MessageKey) ([]*store.Message, error) {
	start := time.Now()
	res, err := mb.b.FindMessagesByKeys(ctx, keys)
	mb.calls[callFindMessagesByKeys].done(start, err)
	return res, err
}

func (mb *meteredBackend) FindMessages(ctx context.Context, f storage.MessageFilter) ([]*store.Message, error) {
	start := time.Now()
	res, err := mb.b.FindMessages(ctx, f)
	mb.calls[callFindMessages].done(start, err)
	return res, err
}

func (mb *meteredBackend) UpdateMessage(ctx context.Context, id store.ID, upd storage.MessageUpdate) (*store.Message, error) {
	start := time.Now()
	res, err := mb.b.UpdateMessage(ctx, id, upd)
	mb.calls[callUpdateMessage].done(start, err)
	return res, err
}

func (mb *meteredBackend) DeleteMessage(ctx context.Context, id store.ID, retract *storage.Job) error {
	start := time.Now()
	err := mb.b.DeleteMessage(ctx, id, retract)
	mb.calls[callDeleteMessage].done(start, err)
	return err
}

func (mb *meteredBackend) FindOutbox(ctx context.Context, f storage.OutboxFilter) ([]storage.OutboxEntry, error) {
	start := time.Now()
	res, err := mb.b.FindOutbox(ctx, f)
	mb.calls[callFindOutbox].done(start, err)
	return res, err
}

func (mb *meteredBackend) CountOutbox(ctx context.Context, f storage.OutboxFilter) (int, error) {
	start := time.Now()
	res, err := mb.b.CountOutbox(ctx, f)
	mb.calls[callCountOutbox].done(start, err)
	return res, err
}

func (mb *meteredBackend) ListPullAuthors(ctx context.Context) ([]store.ID, error) {
	start := time.Now()
	res, err := mb.b.ListPullAuthors(ctx)
	mb.calls[callListPullAuthors].done(start, err)
	return res, err
}

func (mb *meteredBackend) DeliverInbox(ctx context.Context, d storage.Delivery) ([]storage.InboxChange, error) {
	start := time.Now()
	res, err := mb.b.DeliverInbox(ctx, d)
	mb.calls[callDeliverInbox].done(start, err)
	return res, err
}

func (mb *meteredBackend) InsertInbox(ctx context.Context, ins storage.Insertion) ([]storage.InboxChange, error) {
	start := time.Now()
	res, err := mb.b.InsertInbox(ctx, ins)
	mb.calls[callInsertInbox].done(start, err)
	return res, err
}

func (mb *meteredBackend) RemoveAuthorEntries(ctx context.Context, r storage.AuthorRemoval) ([]storage.InboxChange, error) {
	start := time.Now()
	res, err := mb.b.RemoveAuthorEntries(ctx, r)
	mb.calls[callRemoveAuthorEntries].done(start, err)
	return res, err
}

func (mb *meteredBackend) ReadInbox(ctx context.Context, f storage.InboxFilter) ([]store.InboxItem, store.InboxCounts, error) {
	start := time.Now()
	res0, res1, err := mb.b.ReadInbox(ctx, f)
	mb.calls[callReadInbox].done(start, err)
	return res0, res1, err
}

func (mb *meteredBackend) MarkInboxRead(ctx context.Context, owner store.ID, layout storage.Layout, mark store.ID) (store.InboxCounts, error) {
	start := time.Now()
	res, err := mb.b.MarkInboxRead(ctx, owner, layout, mark)
	mb.calls[callMarkInboxRead].done(start, err)
	return res, err
}

func (mb *meteredBackend) FindDeliveries(ctx context.Context, messageID store.ID, cursor []byte, limit int) ([]storage.InboxRef, []byte, error) {
	start := time.Now()
	res0, res1, err := mb.b.FindDeliveries(ctx, messageID, cursor, limit)
	mb.calls[callFindDeliveries].done(start, err)
	return res0, res1, err
}

func (mb *meteredBackend) RemoveInboxEntries(ctx context.Context, r storage.Removal) ([]storage.InboxChange, error) {
	start := time.Now()
	res, err := mb.b.RemoveInboxEntries(ctx, r)
	mb.calls[callRemoveInboxEntries].done(start, err)
	return res, err
}

func (mb *meteredBackend) ReadInboxCache(ctx context.Context, owner store.ID, now time.Time) (*storage.InboxCache, error) {
	start := time.Now()
	res, err := mb.b.ReadInboxCache(ctx, owner, now)
	mb.calls[callReadInboxCache].done(start, err)
	return res, err
}

func (mb *meteredBackend) PutInboxCache(ctx context.Context, c *storage.InboxCache, capacity int) error {
	start := time.Now()
	err := mb.b.PutInboxCache(ctx, c, capacity)
	mb.calls[callPutInboxCache].done(start, err)
	return err
}

func (mb *meteredBackend) DropInboxCache(ctx context.Context, owner store.ID) error {
	start := time.Now()
	err := mb.b.DropInboxCache(ctx, owner)
	mb.calls[callDropInboxCache].done(start, err)
	return err
}

func (mb *meteredBackend) StoreJob(ctx context.Context, j *storage.Job) error {
	start := time.Now()
	err := mb.b.StoreJob(ctx, j)
	mb.calls[callStoreJob].done(start, err)
	return err
}

func (mb *meteredBackend) FinishJob(ctx context.Context, j *storage.Job) error {
	start := time.Now()
	err := mb.b.FinishJob(ctx, j)
	mb.calls[callFinishJob].done(start, err)
	return err
}

func (mb *meteredBackend) MarkSeen(ctx context.Context, user store.ID, at, inactiveBefore time.Time, rebuild *storage.Job) (bool, error) {
	start := time.Now()
	res, err := mb.b.MarkSeen(ctx, user, at, inactiveBefore, rebuild)
	mb.calls[callMarkSeen].done(start, err)
	return res, err
}

func (mb *meteredBackend) PendingJobs(ctx context.Context) ([]*storage.Job, error) {
	start := time.Now()
	res, err := mb.b.PendingJobs(ctx)
	mb.calls[callPendingJobs].done(start, err)
	return res, err
}

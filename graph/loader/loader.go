// Package loader batches the graph's reads: within one GraphQL operation (or
// one subscription event), every UserByID, MessageByKey, ViewerFollows,
// ViewerLikes, ViewerReposts, ViewerRequested and Sees load that arrives within a short window
// becomes one service.Service batch call, and each key is loaded at most
// once. This keeps a page of N items at a fixed number of storage round trips
// instead of N+1.
//
// A Loaders caches for the life of the operation it was made for and must not
// be shared across operations or subscription events: it would serve stale
// data. graph.NewServer makes a fresh one for each.
package loader

import (
	"context"
	"sync"
	"time"

	"github.com/graph-gophers/dataloader/v7"

	"herald/store"
	"herald/store/service"
)

// Wait is how long a loader collects keys before it makes its batch call.
// Resolvers for sibling list items run in parallel goroutines and reach their
// loads within microseconds of each other; the wait adds at most this much
// latency per level of loading.
const Wait = time.Millisecond

// Loaders holds the per-operation dataloaders. Load results are cached for
// the life of the Loaders; the methods of the dataloader types are safe for
// concurrent use.
type Loaders struct {
	// UserByID loads users by id with Service.FindUsersByIDs; a missing user
	// is NOT_FOUND.
	UserByID *dataloader.Loader[store.ID, *store.User]
	// MessageByKey loads messages by key with Service.FindMessagesByKeys; a
	// missing or deleted message is NOT_FOUND, and so is one the viewer may
	// not see (Service.SeesMessagesOf, through Sees), as if absent. Pass the author in the key
	// whenever it is known (item.Key(), m.Key(), a reply's ReplyToAuthorID):
	// messages are placed by author, so a sharded backend then asks one
	// shard instead of all. The cache files a message under its ID alone, so
	// a load with the author and one without (store.NilID) share one entry.
	MessageByKey *dataloader.Loader[store.MessageKey, *store.Message]
	// ViewerFollows reports whether the operation's viewer follows each key
	// user, with Service.FindFollowing. Without a viewer it reports false
	// without a call.
	ViewerFollows *dataloader.Loader[store.ID, bool]
	// ViewerLikes reports whether the operation's viewer likes each key
	// message, with Service.FindLiked; false without a viewer, without a
	// call.
	ViewerLikes *dataloader.Loader[store.MessageKey, bool]
	// ViewerReposts reports whether the operation's viewer reposts each key
	// message, with Service.FindReposted; false without a viewer, without a
	// call.
	ViewerReposts *dataloader.Loader[store.MessageKey, bool]
	// ViewerBlocks and ViewerMutes report whether the operation's viewer
	// blocks (mutes) each key user, with Service.FindBlocked (FindMuted);
	// false without a viewer, without a call.
	ViewerBlocks *dataloader.Loader[store.ID, bool]
	ViewerMutes  *dataloader.Loader[store.ID, bool]
	// ViewerRequested reports whether the operation's viewer waits for
	// each key user to answer a follow request, with
	// Service.FindFollowRequested; false without a viewer, without a call.
	ViewerRequested *dataloader.Loader[store.ID, bool]
	// Sees reports whether the operation's viewer (or nobody signed in)
	// may see each key user's messages, likes and follow lists, with
	// Service.SeesMessagesOf over the users as UserByID loads them: false
	// for a user who is gone.
	Sees *dataloader.Loader[store.ID, bool]

	// What Preload needs: each loader's cache and batch function.
	userCache    dataloader.Cache[store.ID, *store.User]
	messageCache *messageCache
	followsCache dataloader.Cache[store.ID, bool]
	likesCache   dataloader.Cache[store.MessageKey, bool]
	repostsCache dataloader.Cache[store.MessageKey, bool]
	blocksCache  dataloader.Cache[store.ID, bool]
	mutesCache   dataloader.Cache[store.ID, bool]
	requestCache dataloader.Cache[store.ID, bool]
	userBatch    dataloader.BatchFunc[store.ID, *store.User]
	messageBatch dataloader.BatchFunc[store.MessageKey, *store.Message]
	followsBatch dataloader.BatchFunc[store.ID, bool]
	likesBatch   dataloader.BatchFunc[store.MessageKey, bool]
	repostsBatch dataloader.BatchFunc[store.MessageKey, bool]
	blocksBatch  dataloader.BatchFunc[store.ID, bool]
	mutesBatch   dataloader.BatchFunc[store.ID, bool]
	requestBatch dataloader.BatchFunc[store.ID, bool]
}

// New returns fresh loaders over svc for one operation whose signed-in user
// is viewer (hasViewer false for an anonymous operation).
func New(svc *service.Service, viewer store.ID, hasViewer bool) *Loaders {
	l := &Loaders{
		userCache:    dataloader.NewCache[store.ID, *store.User](),
		messageCache: newMessageCache(),
		followsCache: dataloader.NewCache[store.ID, bool](),
		likesCache:   dataloader.NewCache[store.MessageKey, bool](),
		repostsCache: dataloader.NewCache[store.MessageKey, bool](),
		blocksCache:  dataloader.NewCache[store.ID, bool](),
		mutesCache:   dataloader.NewCache[store.ID, bool](),
		requestCache: dataloader.NewCache[store.ID, bool](),
		userBatch:    batch(svc.FindUsersByIDs, "user not found"),
		followsBatch: viewerBatch(svc.FindFollowing, viewer, hasViewer),
		likesBatch:   viewerBatch(svc.FindLiked, viewer, hasViewer),
		repostsBatch: viewerBatch(svc.FindReposted, viewer, hasViewer),
		blocksBatch:  viewerBatch(svc.FindBlocked, viewer, hasViewer),
		mutesBatch:   viewerBatch(svc.FindMuted, viewer, hasViewer),
		requestBatch: viewerBatch(svc.FindFollowRequested, viewer, hasViewer),
	}
	if !hasViewer {
		viewer = store.NilID
	}
	// Messages are shown by the rule of their authors, which Sees batches.
	l.messageBatch = l.hideUnseen(batch(svc.FindMessagesByKeys, "message not found"), viewer)
	l.UserByID = dataloader.NewBatchedLoader(l.userBatch,
		dataloader.WithWait[store.ID, *store.User](Wait),
		dataloader.WithCache(l.userCache))
	l.MessageByKey = dataloader.NewBatchedLoader(l.messageBatch,
		dataloader.WithWait[store.MessageKey, *store.Message](Wait),
		dataloader.WithCache[store.MessageKey, *store.Message](l.messageCache))
	l.ViewerFollows = dataloader.NewBatchedLoader(l.followsBatch,
		dataloader.WithWait[store.ID, bool](Wait),
		dataloader.WithCache(l.followsCache))
	l.ViewerLikes = dataloader.NewBatchedLoader(l.likesBatch,
		dataloader.WithWait[store.MessageKey, bool](Wait),
		dataloader.WithCache(l.likesCache))
	l.ViewerReposts = dataloader.NewBatchedLoader(l.repostsBatch,
		dataloader.WithWait[store.MessageKey, bool](Wait),
		dataloader.WithCache(l.repostsCache))
	l.ViewerBlocks = dataloader.NewBatchedLoader(l.blocksBatch,
		dataloader.WithWait[store.ID, bool](Wait),
		dataloader.WithCache(l.blocksCache))
	l.ViewerMutes = dataloader.NewBatchedLoader(l.mutesBatch,
		dataloader.WithWait[store.ID, bool](Wait),
		dataloader.WithCache(l.mutesCache))
	l.ViewerRequested = dataloader.NewBatchedLoader(l.requestBatch,
		dataloader.WithWait[store.ID, bool](Wait),
		dataloader.WithCache(l.requestCache))
	l.Sees = dataloader.NewBatchedLoader(l.seesBatch(svc, viewer),
		dataloader.WithWait[store.ID, bool](Wait))
	return l
}

// seesBatch answers Sees: the users through UserByID (usually cached
// already: a message's author, a profile), then the rule in one call.
func (l *Loaders) seesBatch(svc *service.Service, viewer store.ID) dataloader.BatchFunc[store.ID, bool] {
	return func(ctx context.Context, ids []store.ID) []*dataloader.Result[bool] {
		results := make([]*dataloader.Result[bool], len(ids))
		users, errs := l.Users(ctx, ids)
		var err error
		for i, e := range errs {
			if store.ErrorCode(e) == store.ENOTFOUND {
				users[i] = nil
			} else if e != nil {
				err = e
			}
		}
		var sees []bool
		if err == nil {
			sees, err = svc.SeesMessagesOf(ctx, viewer, users)
		}
		for i := range ids {
			if err != nil {
				results[i] = &dataloader.Result[bool]{Error: err}
			} else {
				results[i] = &dataloader.Result[bool]{Data: sees[i]}
			}
		}
		return results
	}
}

// hideUnseen makes find's messages NOT_FOUND where viewer may not see
// their authors' messages: one Sees batch for the distinct authors other
// than viewer.
func (l *Loaders) hideUnseen(find dataloader.BatchFunc[store.MessageKey, *store.Message], viewer store.ID) dataloader.BatchFunc[store.MessageKey, *store.Message] {
	return func(ctx context.Context, keys []store.MessageKey) []*dataloader.Result[*store.Message] {
		results := find(ctx, keys)
		var authors []store.ID
		asked := make(map[store.ID]bool)
		for _, r := range results {
			if r.Error == nil && (viewer.IsZero() || r.Data.AuthorID != viewer) && !asked[r.Data.AuthorID] {
				asked[r.Data.AuthorID] = true
				authors = append(authors, r.Data.AuthorID)
			}
		}
		if len(authors) == 0 {
			return results
		}
		sees, errs := loadAll(ctx, l.Sees, authors)
		shown := make(map[store.ID]error, len(authors))
		for i, a := range authors {
			switch {
			case errs[i] != nil:
				shown[a] = errs[i]
			case !sees[i]:
				shown[a] = store.Errorf(store.ENOTFOUND, "message not found")
			default:
				shown[a] = nil
			}
		}
		for i, r := range results {
			if r.Error != nil {
				continue
			}
			if err, ok := shown[r.Data.AuthorID]; ok && err != nil {
				results[i] = &dataloader.Result[*store.Message]{Error: err}
			}
		}
		return results
	}
}

// Preloads are the keys Preload loads: each list in one call.
type Preloads struct {
	Users    []store.ID
	Messages []store.MessageKey
	Follows  []store.ID         // users the viewer may follow
	Likes    []store.MessageKey // messages the viewer may like
	Reposts  []store.MessageKey // messages the viewer may repost
	Blocks   []store.ID         // users the viewer may block
	Mutes    []store.ID         // users the viewer may mute
	Requests []store.ID         // users the viewer may have asked to follow
}

// Preload loads now the users, messages, viewer-follows, -likes and
// -reposts an operation is known to ask for, one call per loader, all at once, and caches the
// results (errors included) for the loads that follow. Keys queued into a
// batching window instead could be split into two batches by a busy
// machine; a preload costs exactly one call per loader, whatever the
// scheduling.
func (l *Loaders) Preload(ctx context.Context, p Preloads) {
	var calls []func()
	if len(p.Users) > 0 {
		calls = append(calls, func() { fill(ctx, l.userCache, l.userBatch, p.Users) })
	}
	if len(p.Messages) > 0 {
		calls = append(calls, func() {
			fill(ctx, dataloader.Cache[store.MessageKey, *store.Message](l.messageCache), l.messageBatch, p.Messages)
		})
	}
	if len(p.Follows) > 0 {
		calls = append(calls, func() { fill(ctx, l.followsCache, l.followsBatch, p.Follows) })
	}
	if len(p.Likes) > 0 {
		calls = append(calls, func() { fill(ctx, l.likesCache, l.likesBatch, p.Likes) })
	}
	if len(p.Reposts) > 0 {
		calls = append(calls, func() { fill(ctx, l.repostsCache, l.repostsBatch, p.Reposts) })
	}
	if len(p.Blocks) > 0 {
		calls = append(calls, func() { fill(ctx, l.blocksCache, l.blocksBatch, p.Blocks) })
	}
	if len(p.Mutes) > 0 {
		calls = append(calls, func() { fill(ctx, l.mutesCache, l.mutesBatch, p.Mutes) })
	}
	if len(p.Requests) > 0 {
		calls = append(calls, func() { fill(ctx, l.requestCache, l.requestBatch, p.Requests) })
	}
	if len(calls) == 0 {
		return
	}
	if len(p.Users) > 0 && len(p.Messages) > 0 {
		// Messages are shown by their authors' rule (hideUnseen), which
		// reads the users: loaded first, they are one call, not two.
		calls[0]()
		calls = calls[1:]
		if len(calls) == 0 {
			return
		}
	}
	// The last call runs here: a page that needs one call (the common
	// case) starts no goroutine, which under load would wait behind every
	// other runnable one before it could start.
	var wg sync.WaitGroup
	for _, call := range calls[:len(calls)-1] {
		wg.Go(call)
	}
	calls[len(calls)-1]()
	wg.Wait()
}

// fill calls fn once for the keys c does not hold yet and caches a result
// for each.
func fill[K comparable, V any](ctx context.Context, c dataloader.Cache[K, V], fn dataloader.BatchFunc[K, V], keys []K) {
	var missing []K
	seen := make(map[K]bool, len(keys))
	for _, k := range keys {
		if _, ok := c.Get(ctx, k); !ok && !seen[k] {
			seen[k] = true
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return
	}
	for i, r := range fn(ctx, missing) {
		c.Set(ctx, missing[i], func() (V, error) { return r.Data, r.Error })
	}
}

// batch adapts a store batch read (results aligned with keys, nil where
// missing) to a dataloader batch function: one call per batch, one result per
// key in key order, NOT_FOUND at the index of a missing key, and the call's
// error at every index when it fails.
func batch[K comparable, V any](find func(context.Context, []K) ([]*V, error), notFound string) dataloader.BatchFunc[K, *V] {
	return func(ctx context.Context, keys []K) []*dataloader.Result[*V] {
		results := make([]*dataloader.Result[*V], len(keys))
		vals, err := find(ctx, keys)
		if err == nil && len(vals) != len(keys) {
			err = store.Errorf(store.EINTERNAL, "batch read returned %d results for %d keys", len(vals), len(keys))
		}
		for i := range keys {
			switch {
			case err != nil:
				results[i] = &dataloader.Result[*V]{Error: err}
			case vals[i] == nil:
				results[i] = &dataloader.Result[*V]{Error: store.Errorf(store.ENOTFOUND, "%s", notFound)}
			default:
				results[i] = &dataloader.Result[*V]{Data: vals[i]}
			}
		}
		return results
	}
}

// viewerBatch adapts a per-viewer batch read (FindFollowing, FindLiked,
// FindReposted, FindBlocked, FindMuted:
// one bool per key) to a dataloader batch function. Without a viewer every
// key is false, without a call.
func viewerBatch[K comparable](find func(context.Context, store.ID, []K) ([]bool, error), viewer store.ID, hasViewer bool) dataloader.BatchFunc[K, bool] {
	return func(ctx context.Context, keys []K) []*dataloader.Result[bool] {
		results := make([]*dataloader.Result[bool], len(keys))
		var found []bool
		var err error
		if hasViewer {
			found, err = find(ctx, viewer, keys)
			if err == nil && len(found) != len(keys) {
				err = store.Errorf(store.EINTERNAL, "batch read returned %d results for %d keys", len(found), len(keys))
			}
		}
		for i := range keys {
			switch {
			case err != nil:
				results[i] = &dataloader.Result[bool]{Error: err}
			case hasViewer:
				results[i] = &dataloader.Result[bool]{Data: found[i]}
			default:
				results[i] = &dataloader.Result[bool]{Data: false}
			}
		}
		return results
	}
}

// loadersKey is the context key of an operation's Loaders; unexported so
// only NewContext and NewLazyContext can set it.
type loadersKey struct{}

// NewContext returns a copy of ctx carrying l.
func NewContext(ctx context.Context, l *Loaders) context.Context {
	return context.WithValue(ctx, loadersKey{}, l)
}

// NewLazyContext returns a copy of ctx carrying Loaders over svc for viewer
// (as New) that are made on the first For. A subscription waits for its
// events far longer than it resolves them: Loaders made up front, some
// 3 KiB of loaders and caches, would be held by every idle subscriber.
func NewLazyContext(ctx context.Context, svc *service.Service, viewer store.ID, hasViewer bool) context.Context {
	return context.WithValue(ctx, loadersKey{}, &lazyLoaders{svc: svc, viewer: viewer, hasViewer: hasViewer})
}

// lazyLoaders is what NewLazyContext carries: the Loaders, once made.
type lazyLoaders struct {
	once      sync.Once
	svc       *service.Service
	viewer    store.ID
	hasViewer bool
	l         *Loaders
}

func (z *lazyLoaders) get() *Loaders {
	z.once.Do(func() { z.l = New(z.svc, z.viewer, z.hasViewer) })
	return z.l
}

// For returns the Loaders of the operation ctx belongs to. It panics if there
// are none: graph.NewServer installs them around every operation, so a
// missing Loaders is a wiring bug, and gqlgen turns the panic into INTERNAL.
func For(ctx context.Context) *Loaders {
	switch l := ctx.Value(loadersKey{}).(type) {
	case *Loaders:
		if l != nil {
			return l
		}
	case *lazyLoaders:
		return l.get()
	}
	panic("loader: no Loaders in context; graph.NewServer installs them around each operation")
}

// Users loads the users with the given ids in one batch (plus whatever else
// is pending) and returns them in the same order. It queues every key before
// waiting for any, so the keys cannot straddle two batches.
func (l *Loaders) Users(ctx context.Context, ids []store.ID) ([]*store.User, []error) {
	return loadAll(ctx, l.UserByID, ids)
}

// User loads the user with the given id through UserByID. A user already
// cached (primed, preloaded or loaded) is returned from the cache at once:
// a dataloader Load allocates a channel and a thunk even for a cache hit,
// and a timeline page looks up its authors once per edge.
func (l *Loaders) User(ctx context.Context, id store.ID) (*store.User, error) {
	if th, ok := l.userCache.Get(ctx, id); ok {
		return th()
	}
	return l.UserByID.Load(ctx, id)()
}

// PrimeMessages primes MessageByKey with msgs (none nil), as a Prime of
// each m.Key() would: a message already cached keeps its entry. It takes
// the cache's lock once, for a page of messages at a time.
func (l *Loaders) PrimeMessages(_ context.Context, msgs []*store.Message) {
	c := l.messageCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.items) == 0 {
		c.items = make(map[store.ID]dataloader.Thunk[*store.Message], len(msgs))
	}
	for _, m := range msgs {
		if _, ok := c.items[m.ID]; !ok {
			c.items[m.ID] = func() (*store.Message, error) { return m, nil }
		}
	}
}

// Messages loads the messages with the given keys in one batch, like Users.
func (l *Loaders) Messages(ctx context.Context, keys []store.MessageKey) ([]*store.Message, []error) {
	return loadAll(ctx, l.MessageByKey, keys)
}

// Queue starts loading the given keys without waiting, so that resolvers
// asking for them later (from parallel goroutines) find them in the cache and
// the whole set costs one batch however those goroutines are scheduled.
func Queue[K comparable, V any](ctx context.Context, ld *dataloader.Loader[K, V], keys []K) {
	for _, k := range keys {
		ld.Load(ctx, k)
	}
}

func loadAll[K comparable, V any](ctx context.Context, ld *dataloader.Loader[K, V], keys []K) ([]V, []error) {
	thunks := make([]dataloader.Thunk[V], len(keys))
	for i, k := range keys {
		thunks[i] = ld.Load(ctx, k)
	}
	vals := make([]V, len(keys))
	errs := make([]error, len(keys))
	for i, th := range thunks {
		vals[i], errs[i] = th()
	}
	return vals, errs
}

// messageCache is MessageByKey's cache: it files each message under its ID
// alone. The author in a store.MessageKey only tells the backend where to
// look, so a message loaded (or primed, or cleared) with its author and the
// same message asked for without it (Query.node) are one entry: one slot in
// a batch, one thing to refresh after a mutation. The dataloader calls Prime
// outside its own lock, so the cache locks for itself.
type messageCache struct {
	mu    sync.RWMutex
	items map[store.ID]dataloader.Thunk[*store.Message]
}

var _ dataloader.Cache[store.MessageKey, *store.Message] = (*messageCache)(nil)

func newMessageCache() *messageCache {
	return &messageCache{items: make(map[store.ID]dataloader.Thunk[*store.Message])}
}

// Get implements dataloader.Cache.
func (c *messageCache) Get(_ context.Context, k store.MessageKey) (dataloader.Thunk[*store.Message], bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	th, ok := c.items[k.ID]
	return th, ok
}

// Set implements dataloader.Cache.
func (c *messageCache) Set(_ context.Context, k store.MessageKey, th dataloader.Thunk[*store.Message]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items[k.ID] = th
}

// Delete implements dataloader.Cache.
func (c *messageCache) Delete(_ context.Context, k store.MessageKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[k.ID]
	delete(c.items, k.ID)
	return ok
}

// Clear implements dataloader.Cache.
func (c *messageCache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.items)
}

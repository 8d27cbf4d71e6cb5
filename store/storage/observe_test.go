package storage_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu    sync.Mutex
	calls []string
	errs  []error
}

func (r *recorder) Observe(method string, start time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, method)
	r.errs = append(r.errs, err)
}

// users fakes one method of the contract and embeds the rest: a fake
// implements only what it fakes.
type users struct {
	storage.Backend
}

func (users) FindUserByID(_ context.Context, id store.ID) (*store.User, error) {
	return nil, store.Errorf(store.ENOTFOUND, "user not found")
}

// leasing is users with the optional lease.
type leasing struct {
	users
	held bool
}

func (l *leasing) TryFanoutLease(context.Context, string, time.Duration) (bool, error) {
	l.held = true
	return true, nil
}

func (l *leasing) ReleaseFanoutLease(context.Context, string) error { return nil }

// unwrapping is a wrapper that is not an observer: LeaserOf looks through it.
type unwrapping struct{ storage.Backend }

func (u unwrapping) Unwrap() storage.Backend { return u.Backend }

func TestObserve_ReportsEachCallWithItsError(t *testing.T) {
	rec := &recorder{}
	b := storage.Observe(users{}, rec)
	_, err := b.FindUserByID(context.Background(), store.NewID(time.Now()))
	require.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "the backend's error comes back unchanged")
	assert.Equal(t, []string{"FindUserByID"}, rec.calls)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(rec.errs[0]), "the observer sees the error")
}

func TestLeaserOf_FindsTheLeaseThroughWrappersAndObservesIt(t *testing.T) {
	_, ok := storage.LeaserOf(storage.Observe(users{}, &recorder{}))
	assert.False(t, ok, "wrapping must not invent a lease")

	inner := &leasing{}
	rec := &recorder{}
	l, ok := storage.LeaserOf(unwrapping{storage.Observe(inner, rec)})
	require.True(t, ok, "an observed leaser stays a leaser, behind any wrapper that unwraps")
	held, err := l.TryFanoutLease(context.Background(), "me", time.Second)
	require.NoError(t, err)
	assert.True(t, held && inner.held, "the call reaches the backend")
	require.NoError(t, l.ReleaseFanoutLease(context.Background(), "me"))
	assert.Equal(t, []string{"TryFanoutLease", "ReleaseFanoutLease"}, rec.calls, "lease calls are observed too")

	direct, ok := storage.LeaserOf(inner)
	require.True(t, ok)
	assert.Same(t, inner, direct.(*leasing), "an unwrapped leaser is itself")
}

// Each observed method reports its own name: a method copied from its
// neighbour and not renamed would count its calls under the wrong series.
func TestObserve_NamesEachCallByItsMethod(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "observe.go", nil, 0)
	require.NoError(t, err)
	checked := 0
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Observe" {
				name, err := strconv.Unquote(call.Args[0].(*ast.BasicLit).Value)
				require.NoError(t, err)
				assert.Equal(t, fn.Name.Name, name)
				checked++
			}
			return true
		})
	}
	// Every Backend method but Close, the Leaser's two, OwnerLanes' five, and
	// DeliverInboxes.
	assert.Equal(t, 81+2+5+1, checked)
}

// delivering fakes DeliverInbox: the chunk of a job with no ID is gone,
// and the chunk of a job of kind JobRetract fails.
type delivering struct {
	storage.Backend
	tried int
}

func (d *delivering) DeliverInbox(_ context.Context, c storage.Delivery) ([]storage.InboxChange, error) {
	d.tried++
	switch {
	case c.Job.ID.IsZero():
		return nil, store.Errorf(store.ENOTFOUND, "job not found")
	case c.Job.Kind == storage.JobRetract:
		return nil, store.Errorf(store.EINTERNAL, "down")
	}
	return []storage.InboxChange{{InboxRef: storage.InboxRef{Owner: c.Owners[0]}}}, nil
}

// grouping is delivering with the optional group step.
type grouping struct{ delivering }

func (g *grouping) DeliverInboxes(_ context.Context, ds []storage.Delivery) ([]storage.Delivered, error) {
	return make([]storage.Delivered, len(ds)), nil
}

func TestDeliverInboxes_FallsBackToEachChunkAndObservesWhatRuns(t *testing.T) {
	ctx := context.Background()
	owner := store.NewID(time.Now())
	job := func(id store.ID, kind storage.JobKind) storage.Delivery {
		return storage.Delivery{Job: &storage.Job{ID: id, Kind: kind}, Owners: []store.ID{owner}}
	}
	ok, gone, failing := job(store.NewID(time.Now()), storage.JobDeliver), job(store.NilID, storage.JobDeliver), job(store.NewID(time.Now()), storage.JobRetract)

	inner := &delivering{}
	rec := &recorder{}
	r, err := storage.DeliverInboxes(ctx, unwrapping{storage.Observe(inner, rec)}, []storage.Delivery{ok, gone, ok})
	require.NoError(t, err)
	require.Len(t, r, 3)
	assert.Len(t, r[0].Changes, 1)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(r[1].Err), "a gone job is reported, not failed")
	assert.Len(t, r[2].Changes, 1, "the chunks after a gone job still apply")
	assert.Equal(t, []string{"DeliverInbox", "DeliverInbox", "DeliverInbox"}, rec.calls, "each fallback call is observed")

	r, err = storage.DeliverInboxes(ctx, inner, []storage.Delivery{ok, failing, ok})
	require.Error(t, err)
	assert.Len(t, r, 1, "the chunks before the failure are reported")
	assert.Equal(t, 3+2, inner.tried, "none after the failure is tried")

	g := &grouping{}
	rec = &recorder{}
	r, err = storage.DeliverInboxes(ctx, storage.Observe(g, rec), []storage.Delivery{ok, ok})
	require.NoError(t, err)
	assert.Len(t, r, 2)
	assert.Equal(t, 0, g.tried, "a grouping backend takes the whole group")
	assert.Equal(t, []string{"DeliverInboxes"}, rec.calls)
}

package graph

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"golang.org/x/time/rate"

	"herald/store"
)

// CodeRateLimited is the extensions.code of a mutation refused by
// RateLimiter. The error's extensions.retryAfter holds the whole seconds to
// wait before the same client's next mutation can succeed.
const CodeRateLimited = "RATE_LIMITED"

// DefaultRateLimitKeys is how many users, and separately how many client
// addresses, RateLimiter keeps a bucket for when RateLimits.MaxKeys is 0.
// An entry costs about 230 bytes (measured with IPv4 keys), so a full table
// holds about 23 MB.
const DefaultRateLimitKeys = 100_000

func init() {
	// Refused before it runs, like a mutation over the depth limit: a
	// request error (no data). HTTPTransport answers it with 429 under
	// application/graphql-response+json, and the websocket transport sends
	// an "error" message for its id.
	errcode.RegisterErrorType(CodeRateLimited, errcode.KindProtocol)
}

// Rate is a token bucket: it holds at most Burst tokens and gains Count
// tokens every Per; each mutation takes one. The zero Rate limits nothing.
type Rate struct {
	Count int
	Per   time.Duration
	Burst int
}

// Off reports whether r limits nothing.
func (r Rate) Off() bool { return r.Count <= 0 || r.Per <= 0 }

// String formats r as ParseRate reads it: "60/m,burst=20", or "0" when off.
func (r Rate) String() string {
	if r.Off() {
		return "0"
	}
	per := r.Per.String()
	switch r.Per {
	case time.Second:
		per = "s"
	case time.Minute:
		per = "m"
	case time.Hour:
		per = "h"
	}
	s := fmt.Sprintf("%d/%s", r.Count, per)
	if r.Burst != r.Count {
		s += ",burst=" + strconv.Itoa(r.Burst)
	}
	return s
}

// ParseRate reads a rate written COUNT/PERIOD[,burst=N]: PERIOD is s, m, h or
// a Go duration ("10s"), and the burst, the most mutations allowed at once
// after a quiet spell, defaults to COUNT. "0" and "off" turn the limit off.
// Examples: "60/m,burst=20", "10/s", "100/h".
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "0" || strings.EqualFold(s, "off") {
		return Rate{}, nil
	}
	bad := func(why string) (Rate, error) {
		return Rate{}, fmt.Errorf("invalid rate %q: %s; want COUNT/PERIOD[,burst=N] such as 60/m,burst=20, or 0 for no limit", s, why)
	}
	spec, burst, hasBurst := strings.Cut(s, ",")
	count, period, ok := strings.Cut(spec, "/")
	if !ok {
		return bad("no /")
	}
	var r Rate
	var err error
	if r.Count, err = strconv.Atoi(strings.TrimSpace(count)); err != nil || r.Count < 1 {
		return bad("COUNT must be a whole number of at least 1")
	}
	switch period = strings.TrimSpace(period); period {
	case "s":
		r.Per = time.Second
	case "m":
		r.Per = time.Minute
	case "h":
		r.Per = time.Hour
	default:
		if r.Per, err = time.ParseDuration(period); err != nil || r.Per <= 0 {
			return bad("PERIOD must be s, m, h or a positive duration such as 10s")
		}
	}
	r.Burst = r.Count
	if hasBurst {
		v, ok := strings.CutPrefix(strings.TrimSpace(burst), "burst=")
		if !ok {
			return bad("what follows the comma must be burst=N")
		}
		if r.Burst, err = strconv.Atoi(v); err != nil || r.Burst < 1 {
			return bad("the burst must be a whole number of at least 1")
		}
	}
	return r, nil
}

// RateLimits configures a RateLimiter. The zero value limits nothing.
type RateLimits struct {
	// User limits the mutations of each signed-in user: one token per
	// root mutation field, however they are aliased or batched.
	User Rate
	// Address limits the mutations from each client address (as
	// NewContextWithClientAddr put it into the context), signed in or not:
	// with LogInFailures, the only limit on signUp and logIn. IPv6
	// addresses share the bucket of their /64, which is what one
	// subscriber usually holds.
	Address Rate
	// QueryUser and QueryAddress limit the query cost (the complexity
	// points Limits measured) each signed-in user, and each client
	// address, may spend over time, as GitHub and Shopify charge their
	// calculated query costs.
	QueryUser    Rate
	QueryAddress Rate
	// LogInFailures limits the failed logIns of each handle, from any
	// address: guessing a password from many addresses gets no more tries
	// than from one. Only failures take a token; a success takes none.
	LogInFailures Rate
	// Exports limits the account exports (exportAccount) of each user:
	// an export reads the whole account, hundreds of reads, which its
	// query cost (ExportCost) alone prices too low to bound.
	Exports Rate
	// MaxKeys bounds each table of buckets (users, addresses, handles);
	// the least recently used key is forgotten first. 0 means
	// DefaultRateLimitKeys.
	MaxKeys int
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// Off reports whether l limits nothing.
func (l RateLimits) Off() bool {
	return l.User.Off() && l.Address.Off() && l.QueryUser.Off() && l.QueryAddress.Off() && l.LogInFailures.Off() && l.Exports.Off()
}

// RateLimiter is a gqlgen handler extension that refuses an operation,
// before it runs, when its user or its client address has used up its
// token bucket, with RATE_LIMITED and extensions.retryAfter. A mutation
// costs one token of the mutation buckets per root field; a query costs
// its complexity in the query buckets; a subscription costs nothing here
// (the websocket caps bound them). Each operation of a batch, and each
// sent over a websocket, counts on its own. It also keeps the buckets of
// failed logIns per handle (LogInAllowed, LogInFailed).
//
// Buckets are kept in memory, per process, in bounded LRU tables, so a
// client cycling through addresses cannot grow memory without bound: it
// only pushes out the least recently used buckets. A forgotten bucket comes
// back full, which loses nothing once it had been idle long enough to
// refill (Burst/Count periods: 20 s for 60/m with a burst of 20). It is safe
// for concurrent use, and a nil *RateLimiter limits nothing.
type RateLimiter struct {
	users, queryUsers *buckets[store.ID]
	exports           *buckets[store.ID]
	addrs, queryAddrs *buckets[netip.Addr]
	handles           *buckets[string]
	now               func() time.Time
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = (*RateLimiter)(nil)

// NewRateLimiter returns a limiter for l.
func NewRateLimiter(l RateLimits) *RateLimiter {
	size := l.MaxKeys
	if size <= 0 {
		size = DefaultRateLimitKeys
	}
	rl := &RateLimiter{now: l.Now}
	if rl.now == nil {
		rl.now = time.Now
	}
	rl.users = newBuckets[store.ID](l.User, size)
	rl.addrs = newBuckets[netip.Addr](l.Address, size)
	rl.queryUsers = newBuckets[store.ID](l.QueryUser, size)
	rl.queryAddrs = newBuckets[netip.Addr](l.QueryAddress, size)
	rl.handles = newBuckets[string](l.LogInFailures, size)
	rl.exports = newBuckets[store.ID](l.Exports, size)
	return rl
}

// ExtensionName implements graphql.HandlerExtension.
func (*RateLimiter) ExtensionName() string { return "RateLimit" }

// Validate implements graphql.HandlerExtension.
func (*RateLimiter) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext implements graphql.OperationContextMutator. An
// operation takes its tokens from its address's bucket and, when signed
// in, from its user's; if either cannot pay, neither is charged and the
// operation is refused.
func (l *RateLimiter) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation == nil {
		return nil
	}
	c := costOf(opCtx)
	var (
		users *buckets[store.ID]
		addrs *buckets[netip.Addr]
		n     int
		what  string
	)
	switch opCtx.Operation.Operation {
	case ast.Mutation:
		users, addrs, n, what = l.users, l.addrs, 1, "mutations"
		if c != nil {
			n = max(c.RootFields, 1)
		}
	case ast.Query:
		users, addrs, n, what = l.queryUsers, l.queryAddrs, 1, "query cost"
		if c != nil {
			n = max(c.Complexity, 1)
		}
	default:
		return nil
	}
	now := l.now()
	var (
		taken [2]*rate.Reservation
		wait  time.Duration
		who   string
		never bool
	)
	charge := func(i int, r *rate.Reservation, by string) {
		taken[i] = r
		if !r.OK() {
			never, who = true, by
		} else if d := r.DelayFrom(now); d > wait {
			wait, who = d, by
		}
	}
	if addr, ok := ClientAddrFromContext(ctx); ok && addrs != nil {
		charge(0, addrs.take(AddressKey(addr), n, now), "from this address")
	}
	if viewer, ok := ViewerFromContext(ctx); ok && users != nil {
		charge(1, users.take(viewer, n, now), "by this user")
	}
	if wait <= 0 && !never {
		return nil
	}
	// Cancelling gives the tokens back. When refusals of one key overlap,
	// x/time/rate may give back less, which only lengthens the wait of a
	// client already over its limit.
	for _, r := range taken {
		if r != nil && r.OK() {
			r.CancelAt(now)
		}
	}
	if never {
		err := gqlerror.Errorf("this operation costs %d in %s, more than may be spent at once %s", n, what, who)
		err.Extensions = map[string]any{"code": CodeRateLimited}
		return err
	}
	return rateLimited(fmt.Sprintf("too much %s %s", what, who), wait)
}

// rateLimited is the RATE_LIMITED error of a client that must wait.
func rateLimited(msg string, wait time.Duration) *gqlerror.Error {
	secs := max(int(math.Ceil(wait.Seconds())), 1)
	err := gqlerror.Errorf("%s: retry in %d s", msg, secs)
	err.Extensions = map[string]any{"code": CodeRateLimited, "retryAfter": secs}
	return err
}

// LogInAllowed returns nil if handle may try a logIn now, else the
// RATE_LIMITED error to answer with: too many recent failures for it,
// from whatever address. It takes nothing; LogInFailed does.
func (l *RateLimiter) LogInAllowed(handle string) error {
	if l == nil || l.handles == nil {
		return nil
	}
	now := l.now()
	r := l.handles.take(handleKey(handle), 1, now)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	if wait <= 0 {
		return nil
	}
	return rateLimited("too many failed logIns for this handle", wait)
}

// LogInFailed charges a failed logIn to handle's bucket.
func (l *RateLimiter) LogInFailed(handle string) {
	if l == nil || l.handles == nil {
		return
	}
	l.handles.take(handleKey(handle), 1, l.now())
}

// ExportAllowed takes one of user's account export tokens, or returns the
// RATE_LIMITED error to answer with.
func (l *RateLimiter) ExportAllowed(user store.ID) error {
	if l == nil || l.exports == nil {
		return nil
	}
	now := l.now()
	r := l.exports.take(user, 1, now)
	wait := r.DelayFrom(now)
	if wait <= 0 {
		return nil
	}
	r.CancelAt(now)
	return rateLimited("too many account exports by this user", wait)
}

// handleKey is the bucket key of a logIn's handle: as handles compare,
// lowercase, and cut so that junk cannot make keys large.
func handleKey(h string) string {
	const maxKey = 64
	h = strings.ToLower(strings.TrimSpace(h))
	if len(h) > maxKey {
		h = h[:maxKey]
	}
	return h
}

// RetryAfter returns the seconds to wait named by the first RATE_LIMITED
// error of errs (at least 1), or 0 when there is none.
func RetryAfter(errs gqlerror.List) int {
	for _, e := range errs {
		if e == nil || e.Extensions["code"] != CodeRateLimited {
			continue
		}
		if v, ok := e.Extensions["retryAfter"].(int); ok && v > 0 {
			return v
		}
		return 1
	}
	return 0
}

// buckets is one bounded table of token buckets.
type buckets[K comparable] struct {
	rate  Rate
	limit rate.Limit
	cache *lru.Cache[K, *rate.Limiter]
}

// newBuckets returns a table for r, or nil when r is off.
func newBuckets[K comparable](r Rate, size int) *buckets[K] {
	if r.Off() {
		return nil
	}
	c, err := lru.New[K, *rate.Limiter](size)
	if err != nil {
		panic(err) // only for a size below 1, which NewRateLimiter rules out
	}
	return &buckets[K]{rate: r, limit: rate.Limit(float64(r.Count) / r.Per.Seconds()), cache: c}
}

// take reserves n tokens of k's bucket at now; the reservation's delay is
// how long it lacks them, and cancelling it gives them back. It is not OK
// when n exceeds the burst: the bucket can never hold that many.
func (b *buckets[K]) take(k K, n int, now time.Time) *rate.Reservation {
	lim, ok := b.cache.Get(k)
	if !ok {
		lim = rate.NewLimiter(b.limit, max(b.rate.Burst, 1))
		// Two first mutations of k at once must share one bucket.
		if prev, found, _ := b.cache.PeekOrAdd(k, lim); found {
			lim = prev
		}
	}
	return lim.ReserveN(now, n)
}

// AddressKey is the key a client address is limited under: an IPv4
// address (also when written as IPv4-mapped IPv6) as it is, an IPv6
// address by its /64, since one subscriber is given a whole /64 and could
// rotate through it. The rate limits and the websocket caps both use it.
func AddressKey(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

// clientAddrKey is the context key of the client's network address.
type clientAddrKey struct{}

// NewContextWithClientAddr returns a copy of ctx carrying the address of the
// client that sent the request, which RateLimiter keys its address buckets
// by. The server decides it (the peer, or X-Forwarded-For from a trusted
// proxy) before the GraphQL handler runs.
func NewContextWithClientAddr(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, addr)
}

// ClientAddrFromContext returns the client's address and true, or false when
// none was set.
func ClientAddrFromContext(ctx context.Context) (netip.Addr, bool) {
	a, ok := ctx.Value(clientAddrKey{}).(netip.Addr)
	return a, ok && a.IsValid()
}

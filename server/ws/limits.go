package ws

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"

	"herald/graph"
	"herald/graph/auth"
	"herald/store"
	"herald/store/service"
)

// The reasons of herald_websocket_refused_total.
const (
	refusedSubprotocol   = "subprotocol"         // no known subprotocol (4406)
	refusedTotal         = "connections_total"   // over -max-websockets (1013)
	refusedAddress       = "connections_address" // over -max-websockets-per-address (1013)
	refusedUser          = "connections_user"    // over -max-websockets-per-user (1013)
	refusedSubscriptions = "subscriptions"       // a subscribe over -max-subscriptions-per-connection (an error for that id)
	refusedTokenExpired  = "token_expired"       // closed when its token expired (4403)
	refusedTokenRevoked  = "token_revoked"       // closed when its token was logged out or its user removed (4403)
)

// RefusedReasons lists every reason, so that each has a series from the
// start.
var RefusedReasons = []string{
	refusedSubprotocol, refusedTotal, refusedAddress, refusedUser,
	refusedSubscriptions, refusedTokenExpired, refusedTokenRevoked,
}

// Limits caps websockets; 0 is no limit.
type Limits struct {
	SubscriptionsPerConn int // operations running at once on one connection
	PerUser              int // connections with a session of one user
	PerAddress           int // connections from one client address key (an IPv6 /64)
	Total                int // connections in all
}

// authenticator checks that a session was not ended since it was verified
// (logged out, account gone): *service.Service in the program.
type authenticator interface {
	Authenticate(ctx context.Context, sess store.Session) error
}

// Enforce applies limits to the connections accepted from now on, and
// keeps their sessions checked against svc: a connection is closed with
// 4403 when its token expires, when svc reports that its user's tokens were
// ended (OnSessionsRevoked) and its own no longer authenticates, and at the
// sweep every sweepEvery (service.SessionRecheck) that finds it so, which
// catches what an event lost between processes would have. Call it once,
// before the adapter accepts connections.
func (a *Adapter) Enforce(limits Limits, svc *service.Service) {
	a.limits = limits
	if svc == nil {
		return
	}
	a.sessions = svc
	svc.OnSessionsRevoked(a.sessionsRevoked)
}

// count adds one to the refusals of reason.
func (a *Adapter) count(reason string) {
	if a.Refused != nil {
		a.Refused(reason)
	}
}

// admitLocked counts a new connection, or returns the close reason and
// the metric's reason of the cap it would pass. Call with a.mu held.
func (a *Adapter) admitLocked(c *wsConn, addr netip.Addr, hasAddr bool) (reason, metric string) {
	if a.limits.Total > 0 && len(a.conns) >= a.limits.Total {
		return "Try again later: too many connections", refusedTotal
	}
	if hasAddr && a.limits.PerAddress > 0 {
		key := graph.AddressKey(addr)
		if a.byAddr[key] >= a.limits.PerAddress {
			return "Try again later: too many connections from this address", refusedAddress
		}
		a.byAddr[key]++
		c.addrKey = key
	}
	a.conns[c] = struct{}{}
	c.counted = true
	return "", ""
}

// forget uncounts a closed connection and stops its expiry timer.
func (a *Adapter) forget(c *wsConn) {
	a.mu.Lock()
	c.gone = true
	if c.counted {
		delete(a.conns, c)
		if c.addrKey.IsValid() {
			if a.byAddr[c.addrKey]--; a.byAddr[c.addrKey] <= 0 {
				delete(a.byAddr, c.addrKey)
			}
		}
	}
	if u := c.sess.UserID; !u.IsZero() {
		conns := a.byUser[u]
		for i, o := range conns {
			if o == c {
				conns[i] = conns[len(conns)-1]
				conns[len(conns)-1] = nil
				conns = conns[:len(conns)-1]
				break
			}
		}
		if len(conns) == 0 {
			delete(a.byUser, u)
		} else {
			a.byUser[u] = conns
		}
	}
	if c.expiry != nil {
		c.expiry.Stop()
	}
	a.mu.Unlock()
}

// register records that c, accepted by connection_init, runs under sess:
// it counts it against the per-user cap and arms the timer that closes it
// when the token expires. Past the cap it returns the close reason, ""
// otherwise.
func (a *Adapter) register(c *wsConn, sess store.Session) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.gone {
		return "connection closed"
	}
	u := sess.UserID
	if a.limits.PerUser > 0 && len(a.byUser[u]) >= a.limits.PerUser {
		a.count(refusedUser)
		return "Try again later: too many connections for this user"
	}
	a.byUser[u] = append(a.byUser[u], c)
	c.sess = sess
	// A timer costs no goroutine until it fires.
	c.expiry = time.AfterFunc(time.Until(sess.ExpiresAt), func() {
		if c.closeWith(closeForbidden, "Forbidden: token expired") {
			a.count(refusedTokenExpired)
		}
	})
	if a.sessions != nil && a.sweep == nil && !a.closing && a.sweepEvery > 0 {
		a.sweep = time.AfterFunc(a.sweepEvery, a.sweepSessions)
	}
	return ""
}

// session returns c's session; zero if it has none.
func (c *wsConn) session() store.Session {
	c.adapter.mu.Lock()
	defer c.adapter.mu.Unlock()
	return c.sess
}

// sessionCheckTimeout bounds the storage read of one session check.
const sessionCheckTimeout = 10 * time.Second

// errSessionEnded is what NextReader returns after a connection was closed
// because its session no longer authenticates.
var errSessionEnded = errors.New("websocket: connection closed: its session ended")

// checkSession checks, before an operation starts, that the connection's
// session may still be used, which costs a cache lookup (service.Service.
// Authenticate reads the user at most once per service.SessionRecheck). One
// that may not closes the connection with 4403, so that nothing runs under
// a token that expired or was logged out, even before the event of its
// revocation arrives. A storage failure lets the operation run: the
// session was valid at connection_init, and the sweep checks it again.
func (c *wsConn) checkSession() error {
	sess := c.session()
	if sess.UserID.IsZero() || c.adapter.sessions == nil {
		return nil
	}
	if !c.adapter.endIfRefused(c, sess) {
		return nil
	}
	return errSessionEnded
}

// endIfRefused checks sess, c's session, and closes c with 4403 if it no
// longer authenticates. It reports whether it closed c.
func (a *Adapter) endIfRefused(c *wsConn, sess store.Session) bool {
	ctx, cancel := context.WithTimeout(context.Background(), sessionCheckTimeout)
	err := a.sessions.Authenticate(ctx, sess)
	cancel()
	if err == nil || store.ErrorCode(err) != store.EUNAUTHENTICATED {
		return false
	}
	if c.closeWith(closeForbidden, "Forbidden: "+store.ErrorMessage(err)) {
		if sess.ExpiresAt.After(time.Now()) {
			a.count(refusedTokenRevoked)
		} else {
			a.count(refusedTokenExpired)
		}
	}
	return true
}

// sessionsRevoked is the OnSessionsRevoked listener: tokens of user were
// ended, by this process or another, and each of the user's connections
// whose session no longer authenticates is closed. It must not block, so
// the checks (which may read the user) run on a goroutine of their own,
// started only when the user has connections here.
func (a *Adapter) sessionsRevoked(user store.ID) {
	a.mu.Lock()
	conns := a.byUser[user]
	checks := make([]sessionCheck, 0, len(conns))
	for _, c := range conns {
		checks = append(checks, sessionCheck{c, c.sess})
	}
	if len(checks) == 0 || a.closing {
		a.mu.Unlock()
		return
	}
	a.checks.Add(1) // under mu: CloseAll, once closing is set, waits for it
	a.mu.Unlock()
	go func() {
		defer a.checks.Done()
		a.recheck(checks)
	}()
}

type sessionCheck struct {
	c    *wsConn
	sess store.Session
}

// recheck checks each session in turn, stopping early once CloseAll has
// begun: every connection is being closed anyway.
func (a *Adapter) recheck(checks []sessionCheck) {
	for _, k := range checks {
		a.mu.Lock()
		closing := a.closing
		a.mu.Unlock()
		if closing {
			return
		}
		a.endIfRefused(k.c, k.sess)
	}
}

// sweepSessions checks every connection's session, closing those that no
// longer authenticate, then schedules the next sweep while any connection
// has a session. It runs on the timer's goroutine, one check at a time.
func (a *Adapter) sweepSessions() {
	a.mu.Lock()
	if a.closing {
		a.sweep = nil
		a.mu.Unlock()
		return
	}
	a.checks.Add(1) // under mu: CloseAll, once closing is set, waits for it
	defer a.checks.Done()
	var checks []sessionCheck
	for _, conns := range a.byUser {
		for _, c := range conns {
			checks = append(checks, sessionCheck{c, c.sess})
		}
	}
	a.mu.Unlock()
	a.recheck(checks)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing || len(a.byUser) == 0 {
		a.sweep = nil
		return
	}
	a.sweep.Reset(a.sweepEvery)
}

// refuseOperation answers a subscribe (or start) for id with an error
// message carrying payload, without passing it to gqlgen.
func (c *wsConn) refuseOperation(id string, payload any) error {
	c.adapter.count(refusedSubscriptions)
	p, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	b, err := json.Marshal(outMsg{Type: "error", ID: id, Payload: p})
	if err != nil {
		return err
	}
	return c.writeText(b)
}

// InitFunc returns the function that authenticates a websocket's
// connection_init, with authenticate: it verifies a bearer token and checks
// that its session may still be used, as for an HTTP request's header. The
// payload's "authorization" (or "Authorization") must hold "Bearer
// <token>"; a token already given in the handshake's Authorization header
// (non-browser clients) is accepted instead. Anything else closes the
// connection with 4403 Forbidden, the graphql-transport-ws code for a
// refused init. A connection past the per-user cap is closed with 1013 Try
// Again Later. The session is then watched: the connection is closed with
// 4403 when it ends (see Adapter.Enforce).
func (a *Adapter) InitFunc(authenticate func(ctx context.Context, token string) (store.Session, error)) transport.WebsocketInitFunc {
	return func(ctx context.Context, p transport.InitPayload) (context.Context, *transport.InitPayload, error) {
		var sess store.Session
		h := p.Authorization()
		// gqlgen keeps the payload for the connection's life, to hand to
		// every operation, and none reads it: the token need not stay.
		clear(p)
		if h != "" {
			token, ok := auth.FromHeader(h)
			if !ok {
				return refuseInit(ctx, `Forbidden: malformed authorization: want "Bearer <token>"`)
			}
			var err error
			if sess, err = authenticate(ctx, token); err != nil {
				return refuseInit(ctx, "Forbidden: "+store.ErrorMessage(err))
			}
		} else if s, ok := graph.SessionFromContext(ctx); ok {
			sess = s // the handshake's, checked by the HTTP server's authentication
		} else {
			return refuseInit(ctx, `Forbidden: connection_init payload needs "authorization": "Bearer <token>"`)
		}
		if h, ok := ctx.Value(connHolderKey{}).(*connHolder); ok {
			if c := h.get(); c != nil {
				if refusal := a.register(c, sess); refusal != "" {
					return refuseInitWith(ctx, closeTryAgainLater, refusal)
				}
			}
		}
		return graph.NewContextWithSession(ctx, sess), nil, nil
	}
}

// refuseInit makes gqlgen close the connection with 4403 and reason.
func refuseInit(ctx context.Context, reason string) (context.Context, *transport.InitPayload, error) {
	return refuseInitWith(ctx, closeForbidden, reason)
}

// refuseInitWith makes gqlgen close the connection with code and reason.
// gqlgen reads the code and reason from the returned context, so it must
// never be nil.
func refuseInitWith(ctx context.Context, code int, reason string) (context.Context, *transport.InitPayload, error) {
	ctx = transport.WithWebsocketCloseCode(ctx, code)
	ctx = transport.AppendCloseReason(ctx, reason)
	return ctx, nil, errors.New(reason)
}

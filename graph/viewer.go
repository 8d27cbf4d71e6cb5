package graph

import (
	"context"

	"herald/store"
)

// viewerKey is the context key of the signed-in user, and sessionKey of the
// session (the verified token) they signed in with. Their types are
// unexported so no other package can set or read the values except through
// the functions below.
type (
	viewerKey  struct{}
	sessionKey struct{}
)

// NewContextWithSession returns a copy of ctx carrying a signed-in
// session: its user is the viewer, and logOut ends its token. The server
// calls it after verifying a bearer token (HTTP) or the connection_init
// payload (websocket).
func NewContextWithSession(ctx context.Context, sess store.Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, sess)
}

// SessionFromContext returns the session of the request and true, or false
// when it carries none.
func SessionFromContext(ctx context.Context) (store.Session, bool) {
	sess, ok := ctx.Value(sessionKey{}).(store.Session)
	return sess, ok && !sess.UserID.IsZero()
}

// NewContextWithViewer returns a copy of ctx carrying the signed-in user's
// id, without a session: for callers that authenticated the user some
// other way (tests, tools). A request signed in with a token carries its
// session (NewContextWithSession).
func NewContextWithViewer(ctx context.Context, id store.ID) context.Context {
	return context.WithValue(ctx, viewerKey{}, id)
}

// ViewerFromContext returns the signed-in user's id and true, or false when
// the request is anonymous.
func ViewerFromContext(ctx context.Context) (store.ID, bool) {
	if sess, ok := SessionFromContext(ctx); ok {
		return sess.UserID, true
	}
	id, ok := ctx.Value(viewerKey{}).(store.ID)
	return id, ok && !id.IsZero()
}

// requireViewer returns the signed-in user's id or UNAUTHENTICATED.
func requireViewer(ctx context.Context) (store.ID, error) {
	id, ok := ViewerFromContext(ctx)
	if !ok {
		return store.NilID, store.Errorf(store.EUNAUTHENTICATED, "authentication required")
	}
	return id, nil
}

// requireSession returns the request's session or UNAUTHENTICATED.
func requireSession(ctx context.Context) (store.Session, error) {
	sess, ok := SessionFromContext(ctx)
	if !ok {
		return store.Session{}, store.Errorf(store.EUNAUTHENTICATED, "authentication required: send the token to end")
	}
	return sess, nil
}

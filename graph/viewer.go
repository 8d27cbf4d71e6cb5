package graph

import (
	"context"

	"herald/store"
)

// sessionKey is the context key of the session (the verified token) the
// viewer signed in with. Its type is unexported so no other package can set
// or read the value except through the functions below.
type sessionKey struct{}

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

// ViewerFromContext returns the signed-in user's id (the session's) and
// true, or false when the request is anonymous.
func ViewerFromContext(ctx context.Context) (store.ID, bool) {
	sess, ok := SessionFromContext(ctx)
	return sess.UserID, ok
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

package graph

import (
	"context"

	"herald/store"
)

// viewerKey is the context key of the signed-in user. Its type is unexported
// so no other package can set or read the value except through the functions
// below.
type viewerKey struct{}

// NewContextWithViewer returns a copy of ctx carrying the signed-in user's id.
// The server calls it after verifying a bearer token (HTTP) or the
// connection_init payload (websocket).
func NewContextWithViewer(ctx context.Context, id store.ID) context.Context {
	return context.WithValue(ctx, viewerKey{}, id)
}

// ViewerFromContext returns the signed-in user's id and true, or false when
// the request is anonymous.
func ViewerFromContext(ctx context.Context) (store.ID, bool) {
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

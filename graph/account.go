package graph

import (
	"context"

	"herald/graph/loader"
	"herald/store"
)

// withPassword runs check, a use case that checks the viewer's password,
// under the failed-logIn limit of the viewer's handle: a wrong password
// here is a guess as a wrong logIn is, so a stolen token gives no more
// tries at the password than the logIn form does.
func (r *mutationResolver) withPassword(ctx context.Context, viewer store.ID, check func() error) (bool, error) {
	u, err := r.Service.FindUserByID(ctx, viewer)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return false, store.Errorf(store.EUNAUTHENTICATED, "the account of this token no longer exists")
	} else if err != nil {
		return false, err
	}
	if err := r.LogIns.LogInAllowed(u.Handle); err != nil {
		return false, err
	}
	err = check()
	if store.ErrorCode(err) == store.EUNAUTHENTICATED {
		r.LogIns.LogInFailed(u.Handle)
	}
	return err == nil, err
}

// forgetUser drops a deleted user from the operation's cache.
func forgetUser(ctx context.Context, id store.ID) {
	loader.For(ctx).UserByID.Clear(ctx, id)
}

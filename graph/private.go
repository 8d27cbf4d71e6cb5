package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"herald/graph/loader"
	"herald/graph/model"
	"herald/store"
)

// setPrivate makes the viewer's account private or public and returns it.
func (r *Resolver) setPrivate(ctx context.Context, private bool) (*store.User, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	u, err := r.Service.SetPrivate(ctx, viewer, private)
	if err != nil {
		return nil, err
	}
	refreshUser(ctx, u)
	return u, nil
}

// answerFollow approves (approve true) or rejects the follow request of
// the user of userID to the viewer's account, and returns that user.
func (r *Resolver) answerFollow(ctx context.Context, userID string, approve bool) (*store.User, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	requester, err := parseUserID(userID)
	if err != nil {
		return nil, err
	}
	answer := r.Service.RejectFollow
	if approve {
		answer = r.Service.ApproveFollow
	}
	u, err := answer(ctx, viewer, requester)
	if err != nil {
		return nil, err
	}
	refreshUser(ctx, u)
	return u, nil
}

// refreshFollowState records in the operation's caches what a follow (on)
// or unfollow of u by the viewer changed. Following a private account asks
// it, or changes nothing if the viewer follows it already: what it is is
// left to the next load.
func refreshFollowState(ctx context.Context, u *store.User, on bool) {
	ld := loader.For(ctx)
	ld.Sees.Clear(ctx, u.ID)
	if on && u.Private {
		ld.ViewerFollows.Clear(ctx, u.ID)
		ld.ViewerRequested.Clear(ctx, u.ID)
		return
	}
	refreshFollows(ctx, u.ID, on)
	if !on {
		ld.ViewerRequested.Clear(ctx, u.ID).Prime(ctx, u.ID, false)
	}
}

// viewerRequestedFollow reports whether the viewer waits for u to answer
// a follow request, batched per operation; false when nobody is signed in.
func viewerRequestedFollow(ctx context.Context, u *store.User) (bool, error) {
	if _, ok := ViewerFromContext(ctx); !ok {
		return false, nil
	}
	return loader.For(ctx).ViewerRequested.Load(ctx, u.ID)()
}

// sees reports whether the viewer (or nobody signed in) may see u's
// messages, likes and follow lists, batched per operation through
// loader.Sees.
func sees(ctx context.Context, u *store.User) (bool, error) {
	ld := loader.For(ctx)
	ld.UserByID.Prime(ctx, u.ID, u)
	return ld.Sees.Load(ctx, u.ID)()
}

// emptyUsers is the page of a list hidden from the viewer: no users, and
// the profile's count, which the profile shows anyway.
func emptyUsers(total int) *model.UserConnection {
	return &model.UserConnection{Edges: []*model.UserEdge{}, PageInfo: &model.PageInfo{}, TotalCount: total}
}

// followRequests returns a page of the requests to follow user's account,
// oldest first; cursors are request IDs. Only the viewer's own: FORBIDDEN
// for another user's. A requester who is gone is left out; the total is
// counted (a scan) only when asked for.
func (r *Resolver) followRequests(ctx context.Context, user *store.User, first *int, after *string, last *int, before *string) (*model.UserConnection, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	if user.ID != viewer {
		return nil, store.Errorf(store.EFORBIDDEN, "only the account's own follow requests can be read")
	}
	rg, err := paging(cursorRequests, first, after, last, before)
	if err != nil {
		return nil, err
	}
	page, err := r.Service.FollowRequests(ctx, viewer, rg)
	if err != nil {
		return nil, err
	}
	ids := make([]store.ID, len(page.Requests))
	for i, q := range page.Requests {
		ids[i] = q.UserID
	}
	users, at, err := connectionUsers(ctx, ids)
	if err != nil {
		return nil, err
	}
	conn := &model.UserConnection{Edges: make([]*model.UserEdge, len(users))}
	if graphql.FieldRequested(ctx, "totalCount") {
		if conn.TotalCount, err = r.Service.CountFollowRequests(ctx, viewer); err != nil {
			return nil, err
		}
	}
	cursors := make([]string, len(users))
	for i, u := range users {
		cursors[i] = encodeIDCursor(cursorRequests, page.Requests[at[i]].ID)
		conn.Edges[i] = &model.UserEdge{Cursor: cursors[i], Node: u}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// edgesRequested returns ids, the users of a connection page's edges, when
// the selection asks whether the viewer asked to follow them, else none.
func edgesRequested(ctx context.Context, ids []store.ID) []store.ID {
	if _, ok := ViewerFromContext(ctx); ok && graphql.FieldRequested(ctx, "edges.node.viewerRequestedFollow") {
		return ids
	}
	return nil
}

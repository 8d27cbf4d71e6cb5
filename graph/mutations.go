package graph

import (
	"context"

	"github.com/graph-gophers/dataloader/v7"

	"herald/graph/loader"
	"herald/graph/model"
	"herald/store"
	"herald/store/service"
)

// authPayload signs user in: a fresh token and the user.
func (r *Resolver) authPayload(u *store.User) (*model.AuthPayload, error) {
	token, sess, err := r.Tokens.Issue(u)
	if err != nil {
		return nil, err
	}
	return &model.AuthPayload{Token: token, ExpiresAt: sess.ExpiresAt, User: u}, nil
}

// setFollow makes the viewer follow (on) or unfollow the user with the given
// global id and returns that user with its new counts.
func (r *Resolver) setFollow(ctx context.Context, userID string, on bool) (*store.User, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	target, err := parseUserID(userID)
	if err != nil {
		return nil, err
	}
	change := r.Service.Unfollow
	if on {
		change = r.Service.Follow
	}
	u, err := change(ctx, viewer, target)
	if err != nil {
		return nil, err
	}
	refreshUser(ctx, u)
	refreshFollowState(ctx, u, on)
	return u, nil
}

// setRelation makes the viewer block (kind RelationBlock) or mute the user
// of userID (on), or takes the block or mute back, and returns the user as
// the operation's later fields see them: a block also ends the follows.
func (r *Resolver) setRelation(ctx context.Context, userID string, kind store.RelationKind, on bool) (*store.User, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	target, err := parseUserID(userID)
	if err != nil {
		return nil, err
	}
	change, ld := r.Service.Unmute, loader.For(ctx).ViewerMutes
	switch {
	case kind == store.RelationBlock && on:
		change, ld = r.Service.Block, loader.For(ctx).ViewerBlocks
	case kind == store.RelationBlock:
		change, ld = r.Service.Unblock, loader.For(ctx).ViewerBlocks
	case on:
		change = r.Service.Mute
	}
	u, err := change(ctx, viewer, target)
	if err != nil {
		return nil, err
	}
	ld.Clear(ctx, target).Prime(ctx, target, on)
	if kind == store.RelationBlock && on {
		refreshFollows(ctx, target, false) // u has the counts after the unfollows
	}
	refreshUser(ctx, u)
	return u, nil
}

// setAttributes applies the changes to viewer's custom attributes and returns
// viewer with its attributes afterwards. Invalid changes are BAD_USER_INPUT
// and change nothing.
func (r *Resolver) setAttributes(ctx context.Context, viewer store.ID, input []*store.AttributeChange) (*store.User, error) {
	changes := make([]store.AttributeChange, len(input))
	for i, c := range input {
		changes[i] = *c
	}
	u, err := r.Service.SetAttributes(ctx, viewer, changes)
	if err != nil {
		return nil, err
	}
	refreshUser(ctx, u)
	return u, nil
}

// updateProfile changes viewer's profile and returns viewer as changed.
// Users are cached only per operation (the loaders), so the refresh below
// is all it takes for every later field to show the new profile.
func (r *Resolver) updateProfile(ctx context.Context, viewer store.ID, in service.ProfileInput) (*store.User, error) {
	u, err := r.Service.UpdateProfile(ctx, viewer, in)
	if err != nil {
		return nil, err
	}
	refreshUser(ctx, u)
	return u, nil
}

// optional is s for a nullable field: null when s is empty (unset).
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// The loaders cache for the whole operation, and a mutation operation may
// read what an earlier root field of it changed (root mutation fields run in
// order). Each mutation therefore replaces what it changed in the cache.

// refreshUser replaces u in the operation's UserByID cache.
func refreshUser(ctx context.Context, u *store.User) {
	loader.For(ctx).UserByID.Clear(ctx, u.ID).Prime(ctx, u.ID, u)
}

// refreshFollows records in the operation's cache whether the viewer now
// follows target.
func refreshFollows(ctx context.Context, target store.ID, follows bool) {
	loader.For(ctx).ViewerFollows.Clear(ctx, target).Prime(ctx, target, follows)
}

// setLike makes the viewer like (on) or unlike the message of messageID.
func (r *Resolver) setLike(ctx context.Context, messageID string, on bool) (*store.Message, error) {
	return r.setViewerMark(ctx, messageID, on, r.Service.Like, r.Service.Unlike, loader.For(ctx).ViewerLikes)
}

// setRepost makes the viewer repost (on) or unrepost the message of
// messageID, and returns the message reposted.
func (r *Resolver) setRepost(ctx context.Context, messageID string, on bool) (*store.Message, error) {
	return r.setViewerMark(ctx, messageID, on, r.Service.Repost, r.Service.Unrepost, loader.For(ctx).ViewerReposts)
}

// setViewerMark puts (on, with add) or takes off (with remove) one of the
// viewer's marks on the message of messageID, a like or a repost, and
// leaves the operation's caches answering as the change did: the message
// with its new count, and the viewer's mark in marks.
func (r *Resolver) setViewerMark(ctx context.Context, messageID string, on bool,
	add, remove func(ctx context.Context, viewer, id store.ID) (*store.Message, error),
	marks *dataloader.Loader[store.MessageKey, bool],
) (*store.Message, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	id, err := parseMessageID(messageID)
	if err != nil {
		return nil, err
	}
	change := remove
	if on {
		change = add
	}
	m, err := change(ctx, viewer, id)
	if err != nil {
		return nil, err
	}
	refreshMessage(ctx, m)
	marks.Clear(ctx, m.Key()).Prime(ctx, m.Key(), on)
	return m, nil
}

// refreshMessage replaces m in the operation's MessageByKey cache.
func refreshMessage(ctx context.Context, m *store.Message) {
	loader.For(ctx).MessageByKey.Clear(ctx, m.Key()).Prime(ctx, m.Key(), m)
}

// forgetMessage drops a deleted message from the operation's cache, which
// files messages by ID alone, so the author need not be known.
func forgetMessage(ctx context.Context, id store.ID) {
	loader.For(ctx).MessageByKey.Clear(ctx, store.MessageKey{ID: id, AuthorID: store.NilID})
}

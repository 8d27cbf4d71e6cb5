package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"herald/graph/loader"
	"herald/graph/model"
	"herald/store"
	"herald/store/service"
)

// paging reads a connection's paging arguments as the store.Range they
// select: forward (first/after) or backward (last/before), never both,
// with the cursors of the connection kind. Anything else is BAD_USER_INPUT.
func paging(kind cursorKind, first *int, after *string, last *int, before *string) (store.Range, error) {
	forward := last == nil && before == nil
	if !forward && (first != nil || after != nil) {
		return store.Range{}, store.Errorf(store.EINVALID, "a page goes forward (first, after) or backward (last, before), not both")
	}
	arg, size, cursor := "first", first, after
	if !forward {
		arg, size, cursor = "last", last, before
	}
	limit, err := store.PageSize(arg, size)
	if err != nil {
		return store.Range{}, err
	}
	from, err := decodeIDCursor(kind, cursor)
	if err != nil {
		return store.Range{}, err
	}
	if forward {
		return store.Forward(from, limit), nil
	}
	return store.Backward(from, limit), nil
}

// pageInfo returns the PageInfo of a page read within r whose edge cursors
// are cursors. hasMore, whether more items lie beyond the page in r's
// direction, is hasNextPage forward and hasPreviousPage backward; the other
// is false, as the Relay specification allows, since it would cost another
// read.
func pageInfo(cursors []string, r store.Range, hasMore bool) *model.PageInfo {
	pi := &model.PageInfo{HasNextPage: hasMore && !r.Reverse, HasPreviousPage: hasMore && r.Reverse}
	if len(cursors) > 0 {
		pi.StartCursor = &cursors[0]
		pi.EndCursor = &cursors[len(cursors)-1]
	}
	return pi
}

// inbox returns a page of viewer's home timeline. The messages come with the
// page (Service.Inbox loads them), so they are primed into MessageByKey, and
// what the query asks about them (the messages replied to, the authors of
// both, viewerFollows) is preloaded at once by preloadInbox, so that each
// costs one call whatever the page size and however the edge resolvers are
// scheduled. A page costs the strategy's reads (ReadInbox for the stored
// layouts) and FindMessagesByKeys, both in Service.Inbox (plus one
// FindMessagesByKeys there for the messages reposted when it holds reposts),
// and FindUsersByIDs, plus one FindMessagesByKeys when it holds replies to
// messages not on it and one FindFollowing for viewerFollows. The counts
// (and rebuilding, which comes with them) are read only when the selection
// asks for them: under fan-out on read they cost a count of every
// followee's outbox.
func (r *Resolver) inbox(ctx context.Context, viewer store.ID, first *int, after *string, last *int, before *string) (*model.InboxConnection, error) {
	rg, err := paging(cursorInbox, first, after, last, before)
	if err != nil {
		return nil, err
	}
	counts := graphql.AnyFieldRequested(ctx, "totalCount", "unreadCount", "rebuilding")
	page, err := r.Service.InboxWith(ctx, viewer, rg, service.InboxOptions{Counts: counts})
	if err != nil {
		return nil, err
	}

	ld := loader.For(ctx)
	// The users the page's visibility rule loaded.
	for _, u := range page.Users {
		ld.UserByID.Prime(ctx, u.ID, u)
	}
	conn := &model.InboxConnection{
		Edges:       make([]*model.InboxEdge, len(page.Items)),
		TotalCount:  page.Counts.Total,
		UnreadCount: page.Counts.Unread,
		Rebuilding:  page.Counts.Rebuilding,
	}
	cursors := encodeIDCursors(cursorInbox, len(page.Items), func(i int) store.ID { return page.Items[i].MessageID })
	msgs := make([]*store.Message, len(page.Items))
	var reposters []store.ID
	// One allocation for the page's edges rather than one per edge.
	edges := make([]model.InboxEdge, len(page.Items))
	for i, it := range page.Items {
		// A repost shows as the message it reposts, under its own cursor.
		msgs[i] = it.Message
		edges[i] = model.InboxEdge{Cursor: cursors[i], Node: it.Message, DeliveredAt: it.DeliveredAt}
		if it.Original != nil {
			msgs[i] = it.Original
			edges[i].Node, edges[i].RepostedBy = it.Original, it.Message.AuthorID
			reposters = append(reposters, it.Message.AuthorID)
		}
		conn.Edges[i] = &edges[i]
	}
	ld.PrimeMessages(ctx, msgs)
	preloadInbox(ctx, ld, msgs, reposters)
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// preloadInbox preloads what the selection under an inbox page will load
// for msgs, the messages its edges show, and reposters, the users whose
// reposts some of them are (see inbox). The authors of the messages replied
// to are known from ReplyToAuthorID, so they join the page's authors and
// reposters in one UserByID batch without waiting for the replied-to
// messages to load.
func preloadInbox(ctx context.Context, ld *loader.Loaders, msgs []*store.Message, reposters []store.ID) {
	authors := make([]store.ID, 0, len(msgs))
	var replyAuthors, mentioned []store.ID
	var replyTo []store.MessageKey
	for _, m := range msgs {
		authors = append(authors, m.AuthorID)
		mentioned = append(mentioned, m.Mentions...)
		if !m.ReplyToID.IsZero() {
			replyTo = append(replyTo, replyToKey(m))
			if !m.ReplyToAuthorID.IsZero() {
				replyAuthors = append(replyAuthors, m.ReplyToAuthorID)
			}
		}
	}
	if !graphql.FieldRequested(ctx, "edges.node.replyTo") {
		replyTo = nil
	}
	var users, follows []store.ID
	var likes, reposts []store.MessageKey
	if graphql.FieldRequested(ctx, "edges.node.viewerHasLiked") {
		likes = messageKeys(msgs)
	}
	if graphql.FieldRequested(ctx, "edges.node.viewerHasReposted") {
		reposts = messageKeys(msgs)
	}
	for _, q := range []struct {
		path string
		ids  []store.ID
	}{{"edges.node.author", authors}, {"edges.node.replyTo.author", replyAuthors}, {"edges.node.mentions", mentioned}, {"edges.repostedBy", reposters}} {
		if graphql.FieldRequested(ctx, q.path) {
			users = append(users, q.ids...)
			if graphql.FieldRequested(ctx, q.path+".viewerFollows") {
				follows = append(follows, q.ids...)
			}
		}
	}
	ld.Preload(ctx, loader.Preloads{Users: users, Messages: replyTo, Follows: follows, Likes: likes, Reposts: reposts})
}

// messageKeys returns the keys of msgs.
func messageKeys(msgs []*store.Message) []store.MessageKey {
	keys := make([]store.MessageKey, len(msgs))
	for i, m := range msgs {
		keys[i] = m.Key()
	}
	return keys
}

// follows returns a page of user's followers (following false) or of the
// users user follows (following true), in ID order, loading the users in one
// batch.
func (r *Resolver) follows(ctx context.Context, user *store.User, following bool, first *int, after *string, last *int, before *string) (*model.UserConnection, error) {
	kind, total, list := cursorFollowers, user.FollowerCount, r.Service.Followers
	if following {
		kind, total, list = cursorFollowing, user.FollowingCount, r.Service.Following
	}
	rg, err := paging(kind, first, after, last, before)
	if err != nil {
		return nil, err
	}
	// A private account's lists are its approved followers' to see, and
	// a blocker's are hidden from the blocked.
	if ok, err := sees(ctx, user); err != nil || !ok {
		return emptyUsers(total), err
	}
	page, err := list(ctx, user.ID, rg)
	if err != nil {
		return nil, err
	}
	users, _, err := connectionUsers(ctx, page.IDs)
	if err != nil {
		return nil, err
	}
	conn := &model.UserConnection{Edges: make([]*model.UserEdge, len(users)), TotalCount: total}
	cursors := make([]string, len(users))
	for i, u := range users {
		cursors[i] = encodeIDCursor(kind, u.ID)
		conn.Edges[i] = &model.UserEdge{Cursor: cursors[i], Node: u}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// connectionUsers is usersFound for the users of a connection page's
// edges, loaded with whether the viewer follows, blocks and mutes each when
// the selection asks for it: one call each, made at once, so that the edges'
// viewerFollows resolve from the cache rather than from a batching window
// a busy machine could split in two.
func connectionUsers(ctx context.Context, ids []store.ID) ([]*store.User, []int, error) {
	p := loader.Preloads{Users: ids, Follows: edgesFollowed(ctx, ids), Requests: edgesRequested(ctx, ids)}
	if graphql.FieldRequested(ctx, "edges.node.viewerBlocks") {
		p.Blocks = ids
	}
	if graphql.FieldRequested(ctx, "edges.node.viewerMutes") {
		p.Mutes = ids
	}
	loader.For(ctx).Preload(ctx, p)
	return usersFound(ctx, ids)
}

// edgesFollowed returns ids, the users of a connection page's edges, when
// the selection asks whether the viewer follows them, else none.
func edgesFollowed(ctx context.Context, ids []store.ID) []store.ID {
	if graphql.FieldRequested(ctx, "edges.node.viewerFollows") {
		return ids
	}
	return nil
}

// usersFound loads the users of ids in one batch and returns those that
// exist, in order, with the index in ids of each: an edge to a user that is
// gone shows nothing. Any other error is returned.
func usersFound(ctx context.Context, ids []store.ID) ([]*store.User, []int, error) {
	users, errs := loader.For(ctx).Users(ctx, ids)
	found := make([]*store.User, 0, len(ids))
	at := make([]int, 0, len(ids))
	for i, u := range users {
		if store.ErrorCode(errs[i]) == store.ENOTFOUND {
			continue
		} else if errs[i] != nil {
			return nil, nil, errs[i]
		}
		found, at = append(found, u), append(at, i)
	}
	return found, at, nil
}

// usersByAttribute returns a page of the users whose attribute name has
// exactly value, in ID order. The users come with the page, so they are
// primed into UserByID; the total is left to the UserConnection totalCount
// resolver, which counts only if the client selects it. An invalid name,
// value or cursor is BAD_USER_INPUT.
func (r *Resolver) usersByAttribute(ctx context.Context, name, value string, first *int, after *string, last *int, before *string) (*model.UserConnection, error) {
	rg, err := paging(cursorAttribute, first, after, last, before)
	if err != nil {
		return nil, err
	}
	users, hasMore, err := r.Service.FindUsersByAttribute(ctx, name, value, rg)
	if err != nil {
		return nil, err
	}
	ld := loader.For(ctx)
	conn := &model.UserConnection{
		Edges:       make([]*model.UserEdge, len(users)),
		ByAttribute: &store.Attribute{Name: name, Value: value},
	}
	cursors := make([]string, len(users))
	for i, u := range users {
		ld.UserByID.Prime(ctx, u.ID, u)
		cursors[i] = encodeIDCursor(cursorAttribute, u.ID)
		conn.Edges[i] = &model.UserEdge{Cursor: cursors[i], Node: u}
	}
	conn.PageInfo = pageInfo(cursors, rg, hasMore)
	return conn, nil
}

// searchUsers returns a page of the users a typeahead query finds, in rank
// order, priming UserByID with them: one backend call per page.
func (r *Resolver) searchUsers(ctx context.Context, query string, first *int, after *string) (*model.UserConnection, error) {
	n := store.DefaultPageSize
	if first != nil {
		n = *first
	}
	pos, err := decodeSearchCursor(after)
	if err != nil {
		return nil, err
	}
	page, err := r.Service.SearchUsers(ctx, query, n, pos)
	if err != nil {
		return nil, err
	}
	ld := loader.For(ctx)
	conn := &model.UserConnection{Edges: make([]*model.UserEdge, len(page.Users)), TotalCount: page.Total}
	cursors := make([]string, len(page.Users))
	ids := make([]store.ID, len(page.Users))
	for i, u := range page.Users {
		ld.UserByID.Prime(ctx, u.ID, u)
		ids[i] = u.ID
		cursors[i] = encodeSearchCursor(page.Positions[i])
		conn.Edges[i] = &model.UserEdge{Cursor: cursors[i], Node: u}
	}
	// A typeahead shows a follow button on each user.
	ld.Preload(ctx, loader.Preloads{Follows: edgesFollowed(ctx, ids), Requests: edgesRequested(ctx, ids)})
	conn.PageInfo = pageInfo(cursors, store.Range{}, page.HasMore)
	return conn, nil
}

// messages returns a page of user's outbox, newest first, priming
// MessageByKey with the page; empty when the viewer may not see user's
// messages.
func (r *Resolver) messages(ctx context.Context, user *store.User, first *int, after *string, last *int, before *string) (*model.MessageConnection, error) {
	rg, err := paging(cursorMessages, first, after, last, before)
	if err != nil {
		return nil, err
	}
	if ok, err := sees(ctx, user); err != nil || !ok {
		return &model.MessageConnection{Edges: []*model.MessageEdge{}, PageInfo: &model.PageInfo{}, TotalCount: user.MessageCount}, err
	}
	page, err := r.Service.Messages(ctx, user.ID, rg)
	if err != nil {
		return nil, err
	}
	ld := loader.For(ctx)
	// Every message on the page has the same author, and the caller already
	// holds it.
	ld.UserByID.Prime(ctx, user.ID, user)
	conn := &model.MessageConnection{Edges: make([]*model.MessageEdge, len(page.Messages)), TotalCount: user.MessageCount}
	cursors := make([]string, len(page.Messages))
	for i, m := range page.Messages {
		ld.MessageByKey.Prime(ctx, m.Key(), m)
		cursors[i] = encodeIDCursor(cursorMessages, m.ID)
		conn.Edges[i] = &model.MessageEdge{Cursor: cursors[i], Node: m}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// node loads the object a global id names, or nil if it does not exist. A
// malformed id is BAD_USER_INPUT.
func (r *Resolver) node(ctx context.Context, id string) (model.Node, error) {
	nodes, err := r.nodes(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	return nodes[0], nil
}

// nodes loads the objects global ids name, in order, with nil for those that
// do not exist. Users and messages each cost one batch call, however many
// ids there are. A malformed id is BAD_USER_INPUT for the whole list.
func (r *Resolver) nodes(ctx context.Context, ids []string) ([]model.Node, error) {
	if len(ids) > store.MaxPageSize {
		return nil, store.Errorf(store.EINVALID, "at most %d ids at once", store.MaxPageSize)
	}
	types := make([]string, len(ids))
	var userIDs, groupIDs []store.ID
	var msgKeys []store.MessageKey
	for i, s := range ids {
		if isConversationNode(s) {
			types[i] = typeConversation
			continue
		}
		typ, id, err := parseGlobalID(s)
		if err != nil {
			return nil, err
		}
		types[i] = typ
		if typ == typeUser {
			userIDs = append(userIDs, id)
		} else if typ == typeNotificationGroup {
			groupIDs = append(groupIDs, id)
		} else {
			// A global id does not name the author, so the backend looks
			// the message up by ID alone.
			msgKeys = append(msgKeys, store.MessageKey{ID: id, AuthorID: store.NilID})
		}
	}
	ld := loader.For(ctx)
	// Queue both kinds before waiting on either, so the two batches run
	// side by side.
	loader.Queue(ctx, ld.MessageByKey, msgKeys)
	users, uerrs := ld.Users(ctx, userIDs)
	msgs, merrs := ld.Messages(ctx, msgKeys)
	groups, err := r.notificationNodes(ctx, groupIDs)
	if err != nil {
		return nil, err
	}

	out := make([]model.Node, len(ids))
	var ui, mi, gi int
	for i, typ := range types {
		var n model.Node
		var err error
		if typ == typeConversation {
			// A member reads a conversation at a time: they are few.
			if n, err = r.conversationNode(ctx, ids[i]); err != nil {
				return nil, err
			}
		} else if typ == typeNotificationGroup {
			if groups[gi] != nil {
				n = groups[gi]
			}
			gi++
		} else if typ == typeUser {
			if uerrs[ui] == nil {
				n = users[ui]
			}
			err = uerrs[ui]
			ui++
		} else {
			if merrs[mi] == nil {
				n = msgs[mi]
			}
			err = merrs[mi]
			mi++
		}
		if err != nil && store.ErrorCode(err) != store.ENOTFOUND {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// replyToKey returns the key of the message m replies to, author included,
// so a sharded backend looks in one place (a NilID ReplyToAuthorID, where m
// did not record it, means a lookup by ID alone).
func replyToKey(m *store.Message) store.MessageKey {
	return store.MessageKey{ID: m.ReplyToID, AuthorID: m.ReplyToAuthorID}
}

// optionalUser loads a user through UserByID, or nil if it does not exist.
func optionalUser(ctx context.Context, id store.ID) (*store.User, error) {
	u, err := loader.For(ctx).User(ctx, id)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil, nil
	}
	return u, err
}

// repostOfKey is the key of the message repost m reposts.
func repostOfKey(m *store.Message) store.MessageKey {
	return store.MessageKey{ID: m.RepostOfID, AuthorID: m.RepostOfAuthorID}
}

// optionalMessage loads a message through MessageByKey, or nil if it does not
// exist or was deleted.
func optionalMessage(ctx context.Context, key store.MessageKey) (*store.Message, error) {
	m, err := loader.For(ctx).MessageByKey.Load(ctx, key)()
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil, nil
	}
	return m, err
}

// likedBy returns a page of the users who like m, most recent like first;
// cursors are like IDs, and the total is m's LikeCount. A liker who is gone
// is left out.
func (r *Resolver) likedBy(ctx context.Context, m *store.Message, first *int, after *string, last *int, before *string) (*model.UserConnection, error) {
	rg, err := paging(cursorLikers, first, after, last, before)
	if err != nil {
		return nil, err
	}
	page, err := r.Service.Likers(ctx, m.ID, rg)
	if err != nil {
		return nil, err
	}
	ids := make([]store.ID, len(page.Likes))
	for i, l := range page.Likes {
		ids[i] = l.UserID
	}
	users, at, err := connectionUsers(ctx, ids)
	if err != nil {
		return nil, err
	}
	conn := &model.UserConnection{Edges: make([]*model.UserEdge, len(users)), TotalCount: m.LikeCount}
	cursors := make([]string, len(users))
	for i, u := range users {
		cursors[i] = encodeIDCursor(cursorLikers, page.Likes[at[i]].ID)
		conn.Edges[i] = &model.UserEdge{Cursor: cursors[i], Node: u}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// likes returns a page of the messages user likes, most recently liked
// first; cursors are like IDs. A liked message that was deleted, or that
// the viewer may not see, is left out; the whole list is empty when the
// viewer may not see user's likes.
func (r *Resolver) likes(ctx context.Context, user *store.User, first *int, after *string, last *int, before *string) (*model.LikeConnection, error) {
	rg, err := paging(cursorLikes, first, after, last, before)
	if err != nil {
		return nil, err
	}
	if ok, err := sees(ctx, user); err != nil || !ok {
		return &model.LikeConnection{Edges: []*model.LikeEdge{}, PageInfo: &model.PageInfo{}}, err
	}
	viewer, _ := ViewerFromContext(ctx)
	page, err := r.Service.Likes(ctx, viewer, user.ID, rg)
	if err != nil {
		return nil, err
	}
	// The messages come with the page, which leaves out those deleted.
	ld := loader.For(ctx)
	conn := &model.LikeConnection{Edges: make([]*model.LikeEdge, len(page.Likes))}
	cursors := make([]string, len(page.Likes))
	for i, l := range page.Likes {
		m := page.Messages[i]
		ld.MessageByKey.Prime(ctx, m.Key(), m)
		cursors[i] = encodeIDCursor(cursorLikes, l.ID)
		conn.Edges[i] = &model.LikeEdge{Cursor: cursors[i], Node: m, LikedAt: l.CreatedAt}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// replies returns a page of the replies to m, oldest first, those the
// viewer may not see left out; the total is m's ReplyCount. The replies
// come with the page, so they are primed into MessageByKey, and their
// authors preloaded in one batch.
func (r *Resolver) replies(ctx context.Context, m *store.Message, first *int, after *string, last *int, before *string) (*model.MessageConnection, error) {
	rg, err := paging(cursorReplies, first, after, last, before)
	if err != nil {
		return nil, err
	}
	viewer, _ := ViewerFromContext(ctx)
	page, err := r.Service.Replies(ctx, viewer, m.ID, rg)
	if err != nil {
		return nil, err
	}
	ld := loader.For(ctx)
	for _, u := range page.Authors {
		ld.UserByID.Prime(ctx, u.ID, u)
	}
	conn := &model.MessageConnection{Edges: make([]*model.MessageEdge, len(page.Messages)), TotalCount: m.ReplyCount}
	cursors := make([]string, len(page.Messages))
	authors := make([]store.ID, len(page.Messages))
	for i, reply := range page.Messages {
		ld.MessageByKey.Prime(ctx, reply.Key(), reply)
		authors[i] = reply.AuthorID
		cursors[i] = encodeIDCursor(cursorReplies, reply.ID)
		conn.Edges[i] = &model.MessageEdge{Cursor: cursors[i], Node: reply}
	}
	if graphql.FieldRequested(ctx, "edges.node.author") {
		ld.Preload(ctx, loader.Preloads{Users: authors})
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// relations returns a page of the users viewer blocks (kind
// RelationBlock) or mutes, newest first, paged by the relation's ID. Only
// the viewer's own lists can be read: UNAUTHENTICATED anonymous,
// FORBIDDEN for another user's. No count is kept: totalCount, when
// selected, reads the whole list (Service.CountRelations; priced as a
// scan, see scanCounts).
func (r *Resolver) relations(ctx context.Context, user *store.User, kind store.RelationKind, first *int, after *string, last *int, before *string) (*model.UserConnection, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	if viewer != user.ID {
		return nil, store.Errorf(store.EFORBIDDEN, "only your own blocks and mutes can be read")
	}
	cursor, list := cursorBlocked, r.Service.Blocked
	if kind == store.RelationMute {
		cursor, list = cursorMuted, r.Service.Muted
	}
	rg, err := paging(cursor, first, after, last, before)
	if err != nil {
		return nil, err
	}
	page, err := list(ctx, viewer, rg)
	if err != nil {
		return nil, err
	}
	conn := &model.UserConnection{}
	if graphql.FieldRequested(ctx, "totalCount") {
		if conn.TotalCount, err = r.Service.CountRelations(ctx, viewer, kind); err != nil {
			return nil, err
		}
	}
	ids := make([]store.ID, len(page.Relations))
	for i, rel := range page.Relations {
		ids[i] = rel.TargetID
	}
	users, found, err := connectionUsers(ctx, ids)
	if err != nil {
		return nil, err
	}
	// A user who deleted their account since leaves the page.
	conn.Edges = make([]*model.UserEdge, len(users))
	cursors := make([]string, len(users))
	for i, u := range users {
		cursors[i] = encodeIDCursor(cursor, page.Relations[found[i]].ID)
		conn.Edges[i] = &model.UserEdge{Cursor: cursors[i], Node: u}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

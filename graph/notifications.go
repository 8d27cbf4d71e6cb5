package graph

import (
	"context"

	"herald/graph/model"
	"herald/store"
	"herald/store/pubsub"
)

// notifications returns a page of viewer's notifications feed, newest
// activity first; cursors are the groups' LatestIDs. A page costs one
// ReadNotifications (its counts come with it); the latest actors of every
// group load in one batch, the messages in another.
func (r *Resolver) notifications(ctx context.Context, viewer store.ID, first *int, after *string, last *int, before *string) (*model.NotificationConnection, error) {
	rg, err := paging(cursorNotifs, first, after, last, before)
	if err != nil {
		return nil, err
	}
	page, err := r.Service.Notifications(ctx, viewer, rg)
	if err != nil {
		return nil, err
	}
	conn := &model.NotificationConnection{Edges: make([]*model.NotificationEdge, len(page.Groups)), TotalCount: page.Counts.Total, UnreadCount: page.Counts.Unread}
	cursors := make([]string, len(page.Groups))
	for i := range page.Groups {
		edge := notificationEdge(&model.NotificationGroup{NotificationGroup: page.Groups[i], Counts: page.Counts})
		cursors[i] = edge.Cursor
		conn.Edges[i] = edge
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

func notificationEdge(g *model.NotificationGroup) *model.NotificationEdge {
	return &model.NotificationEdge{Cursor: encodeIDCursor(cursorNotifs, g.LatestID), Node: g}
}

// notificationNodes loads the groups of ids for Query.node(s): only the
// viewer's, nil for the rest and when nobody is signed in. The feed's
// counts, which every group shows, are read once, and only if a group is
// found.
func (r *Resolver) notificationNodes(ctx context.Context, ids []store.ID) ([]*model.NotificationGroup, error) {
	out := make([]*model.NotificationGroup, len(ids))
	viewer, ok := ViewerFromContext(ctx)
	if !ok {
		return out, nil
	}
	var counts *store.NotificationCounts
	for i, id := range ids {
		g, err := r.Service.NotificationGroup(ctx, viewer, id)
		if store.ErrorCode(err) == store.ENOTFOUND {
			continue
		} else if err != nil {
			return nil, err
		}
		if counts == nil {
			c, err := r.Service.NotificationCounts(ctx, viewer)
			if err != nil {
				return nil, err
			}
			counts = &c
		}
		out[i] = &model.NotificationGroup{NotificationGroup: *g, Counts: *counts}
	}
	return out, nil
}

// latestActors loads a group's latest actors in one batch (with the other
// groups' of the page), leaving out a user who is gone.
func latestActors(ctx context.Context, g *model.NotificationGroup) ([]*store.User, error) {
	users, _, err := usersFound(ctx, g.LatestActors)
	return users, err
}

// notificationActors returns a page of g's actors, most recent first; the
// total is g's count. An actor who is gone is left out.
func (r *Resolver) notificationActors(ctx context.Context, g *model.NotificationGroup, first *int, after *string, last *int, before *string) (*model.UserConnection, error) {
	rg, err := paging(cursorActors, first, after, last, before)
	if err != nil {
		return nil, err
	}
	page, err := r.Service.NotificationActors(ctx, g.Owner, g.ID, rg)
	if err != nil {
		return nil, err
	}
	ids := make([]store.ID, len(page.Actors))
	for i, a := range page.Actors {
		ids[i] = a.UserID
	}
	users, at, err := connectionUsers(ctx, ids)
	if err != nil {
		return nil, err
	}
	conn := &model.UserConnection{Edges: make([]*model.UserEdge, len(users)), TotalCount: g.Count}
	cursors := make([]string, len(users))
	for i, u := range users {
		cursors[i] = encodeIDCursor(cursorActors, page.Actors[at[i]].ID)
		conn.Edges[i] = &model.UserEdge{Cursor: cursors[i], Node: u}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// groupMessage loads the message of g, or nil for a follow and when it was
// deleted.
func groupMessage(ctx context.Context, g *model.NotificationGroup) (*store.Message, error) {
	if g.Message.ID.IsZero() {
		return nil, nil
	}
	return optionalMessage(ctx, g.Message)
}

// markNotificationsRead marks viewer's notifications read up to the group
// upTo names (nil: the newest) and returns the unread count.
func (r *Resolver) markNotificationsRead(ctx context.Context, viewer store.ID, upTo *string) (int, error) {
	var group store.ID
	if upTo != nil {
		id, err := parseIDOf(typeNotificationGroup, *upTo)
		if err != nil {
			return 0, err
		}
		group = id
	}
	c, err := r.Service.MarkNotificationsRead(ctx, viewer, group)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return 0, store.Errorf(store.ENOTFOUND, "no such notification group")
	}
	return c.Unread, err
}

// notificationEvents subscribes to viewer's events and forwards those of
// the notifications feed, as inboxEvents forwards the inbox's (the same
// subscription machinery, resumption and ending rules).
func (r *Resolver) notificationEvents(ctx context.Context, viewer store.ID, after *string) (<-chan *model.NotificationEvent, error) {
	pos, err := decodeEventCursor(after)
	if err != nil {
		return nil, err
	}
	out := make(chan *model.NotificationEvent)
	deliver := func(ev store.Event) bool {
		ne := &model.NotificationEvent{Type: model.NotificationEventTypeRead, Cursor: encodeEventCursor(ev.Position)}
		switch ev.Type {
		case store.EventNotified:
			ne.Type, ne.Group = model.NotificationEventTypeAdded, ev.Group
		case store.EventNotificationUpdated:
			ne.Type, ne.Group = model.NotificationEventTypeUpdated, ev.Group
		case store.EventNotificationRemoved:
			id := globalID(typeNotificationGroup, ev.Group)
			ne.Type, ne.RemovedGroupID = model.NotificationEventTypeRemoved, &id
		case store.EventNotificationsRead:
		default:
			return true
		}
		// The counts are read as the event is sent, not taken from it:
		// two notices to one owner from two requests (or processes)
		// publish in either order, and the counts of the one published
		// last may be the older. Read now, the last event sent shows the
		// feed as it is.
		c, err := r.Service.NotificationCounts(ctx, viewer)
		if err != nil {
			if ctx.Err() == nil {
				r.logger().ErrorContext(ctx, "graphql: notification counts for an event; event skipped", "user", viewer.String(), "err", err)
			}
			return true
		}
		ne.ReadMark, ne.UnreadCount, ne.TotalCount = c.ReadMark, c.Unread, c.Total
		select {
		case out <- ne:
			return true
		case <-ctx.Done():
			return false
		}
	}
	opts := pubsub.SubscribeOptions{After: pos, Filter: isNotificationEvent}
	if err := r.Service.SubscribeWith(ctx, viewer, opts, deliver, func() { close(out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// isNotificationEvent keeps the events notificationEvents delivers.
func isNotificationEvent(ev store.Event) bool { return ev.Type.Notification() }

// notificationEventEdge is an ADDED or UPDATED event's edge: the group as
// it is now, with its cursor; nil for READ and REMOVED.
func (r *Resolver) notificationEventEdge(ctx context.Context, ev *model.NotificationEvent) (*model.NotificationEdge, error) {
	viewer, ok := ViewerFromContext(ctx)
	if ev.Group.IsZero() || !ok {
		return nil, nil
	}
	g, err := r.Service.NotificationGroup(ctx, viewer, ev.Group)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return notificationEdge(&model.NotificationGroup{NotificationGroup: *g, Counts: store.NotificationCounts{Total: ev.TotalCount, Unread: ev.UnreadCount, ReadMark: ev.ReadMark}}), nil
}

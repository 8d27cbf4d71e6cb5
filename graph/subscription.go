package graph

import (
	"context"

	"herald/graph/model"
	"herald/store"
	"herald/store/pubsub"
)

// inboxEvents subscribes to viewer's inbox, after the event the cursor
// after names if set (replaying what the viewer missed since: see
// pubsub.SubscribeOptions), and forwards its events until ctx
// ends (the client unsubscribed or disconnected) or the hub ends the
// subscription (this subscriber fell HubBuffer events behind, or the hub shut
// down); then the hub calls end, which closes the returned channel and so
// ends the subscription. The forwarding runs in the hub's goroutine for this
// subscriber, which exists only while events wait, so an idle subscriber
// keeps no goroutine here; deliver blocks only on the send, abandoned when
// ctx ends.
//
// An event carries only the message id: the message resolves when gqlgen
// marshals the event, through loaders NewServer makes fresh for each event,
// so it shows the message as it is then.
func (r *Resolver) inboxEvents(ctx context.Context, viewer store.ID, after *string) (<-chan *model.InboxEvent, error) {
	pos, err := decodeEventCursor(after)
	if err != nil {
		return nil, err
	}
	out := make(chan *model.InboxEvent)
	deliver := func(ev store.Event) bool {
		ie, ok := r.inboxEvent(ctx, viewer, ev)
		if !ok {
			return true
		}
		select {
		case out <- ie:
			return true
		case <-ctx.Done():
			return false
		}
	}
	opts := pubsub.SubscribeOptions{After: pos, Filter: isInboxEvent}
	if err := r.Service.SubscribeWith(ctx, viewer, opts, deliver, func() { close(out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// inboxEvent maps a store event to its GraphQL shape. Events whose publisher
// did not know the counts (edits; items a strategy reads from outboxes)
// have them read here; if that read fails the event is skipped (false),
// which loses nothing: the change shows on the next read anyway.
func (r *Resolver) inboxEvent(ctx context.Context, viewer store.ID, ev store.Event) (*model.InboxEvent, bool) {
	ie := &model.InboxEvent{Type: ev.Type, UnreadCount: ev.Counts.Unread, TotalCount: ev.Counts.Total, Cursor: encodeEventCursor(ev.Position)}
	if ev.Type != store.EventRead {
		ie.MessageID, ie.AuthorID, ie.DeliveredAt = ev.MessageID, ev.AuthorID, ev.DeliveredAt
	}
	if ev.Type == store.EventRemoved {
		r.removedItem(ctx, viewer, ie)
	}
	if ev.NoCounts {
		c, err := r.Service.InboxCounts(ctx, viewer)
		if err != nil {
			if ctx.Err() == nil {
				r.logger().ErrorContext(ctx, "graphql: inbox counts for an event; event skipped", "user", viewer.String(), "err", err)
			}
			return nil, false
		}
		ie.UnreadCount, ie.TotalCount = c.Unread, c.Total
	}
	return ie, true
}

// removedItem makes a REMOVED event name the message its edge showed: for a
// repost's item, the message reposted. A repost taken back is told to the
// readers it was at home for by a REMOVED naming the message reposted and,
// as its author, the reposter (Service.Unrepost), which the event then
// gives its message's author. A message that cannot be read leaves the
// event as it is.
func (r *Resolver) removedItem(ctx context.Context, viewer store.ID, ie *model.InboxEvent) {
	m, err := r.Service.FindMessageByID(ctx, ie.MessageID)
	if err != nil {
		if store.ErrorCode(err) != store.ENOTFOUND && ctx.Err() == nil {
			r.logger().WarnContext(ctx, "graphql: the message of a REMOVED event", "user", viewer.String(), "err", err)
		}
		return
	}
	switch {
	case m.Kind == store.KindRepost: // the viewer unfollowed the reposter
		ie.MessageID, ie.AuthorID = m.RepostOfID, m.RepostOfAuthorID
	case m.AuthorID != ie.AuthorID: // a repost by ie.AuthorID taken back
		ie.AuthorID = m.AuthorID
	}
}

// addedItem returns what an ADDED event's edge shows: its message, or for
// a repost the message reposted and the reposter; nil when it is gone.
func addedItem(ctx context.Context, ev *model.InboxEvent) (*store.Message, store.ID, error) {
	m, err := optionalMessage(ctx, store.MessageKey{ID: ev.MessageID, AuthorID: ev.AuthorID})
	if m == nil || err != nil || m.Kind != store.KindRepost {
		return m, store.NilID, err
	}
	o, err := optionalMessage(ctx, repostOfKey(m))
	if o == nil || err != nil {
		return nil, store.NilID, err
	}
	return o, m.AuthorID, nil
}

// isInboxEvent keeps the events inboxEvents delivers: the viewer's stream
// may carry events of other kinds, for other subscriptions.
func isInboxEvent(ev store.Event) bool { return ev.Type.IsInbox() }

// eventMessageID is the global id of ev's message if ev is of type t, else
// nil: each of an event's message id fields is set for its own type only,
// so that a client cache can act on the field without reading the type.
func eventMessageID(ev *model.InboxEvent, t store.EventType) *string {
	if ev.Type != t || ev.MessageID.IsZero() {
		return nil
	}
	id := globalID(typeMessage, ev.MessageID)
	return &id
}

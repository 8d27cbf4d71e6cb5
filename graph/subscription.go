package graph

import (
	"context"

	"herald/graph/model"
	"herald/store"
)

// inboxEvents subscribes to viewer's inbox and forwards its events until ctx
// ends (the client unsubscribed or disconnected) or the hub closes the
// subscription (this subscriber fell HubBuffer events behind, or the hub shut
// down); then it closes the returned channel, which ends the subscription.
// The forwarding goroutine owns the returned channel and is the only one to
// close it; it blocks only on the receive and the send, both abandoned when
// ctx ends, so it cannot outlive the subscription.
//
// An event carries only the message id: the message resolves when gqlgen
// marshals the event, through loaders NewServer makes fresh for each event,
// so it shows the message as it is then.
func (r *Resolver) inboxEvents(ctx context.Context, viewer store.ID) (<-chan *model.InboxEvent, error) {
	in, err := r.Service.Subscribe(ctx, viewer)
	if err != nil {
		return nil, err
	}
	out := make(chan *model.InboxEvent)
	go func() {
		defer close(out)
		for {
			var ev store.Event
			select {
			case <-ctx.Done():
				return
			case e, ok := <-in:
				if !ok {
					return
				}
				ev = e
			}
			ie, ok := r.inboxEvent(ctx, viewer, ev)
			if !ok {
				continue
			}
			select {
			case out <- ie:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// inboxEvent maps a store event to its GraphQL shape. Events whose publisher
// did not know the counts (edits; items a strategy reads from outboxes)
// have them read here; if that read fails the event is skipped (false),
// which loses nothing: the change shows on the next read anyway.
func (r *Resolver) inboxEvent(ctx context.Context, viewer store.ID, ev store.Event) (*model.InboxEvent, bool) {
	ie := &model.InboxEvent{Type: ev.Type, UnreadCount: ev.Counts.Unread, TotalCount: ev.Counts.Total}
	if ev.Type != store.EventRead {
		ie.MessageID, ie.AuthorID, ie.Deleted = ev.MessageID, ev.AuthorID, ev.Type == store.EventDeleted
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

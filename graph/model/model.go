// Package model holds the GraphQL-only shapes: connections, edges, payloads,
// inputs and PageInfo (generated into models_gen.go from schema.graphqls),
// plus the few hand-written types gqlgen.yml binds.
package model

import "herald/store"

// Node is a GraphQL Node: *store.User or *store.Message. It is an empty
// interface because the store types cannot carry gqlgen's marker methods
// (store must not know about GraphQL); the generated code switches on the
// concrete type.
type Node any

// InboxEvent is a live change in the viewer's inbox, as sent to a
// subscription. It carries the message id rather than the message so that the
// message resolves when the event is sent, through loaders made for that event.
type InboxEvent struct {
	// Type says what happened.
	Type store.EventType
	// MessageID is the message concerned; store.NilID for READ.
	MessageID store.ID
	// UnreadCount is the inbox's unread count after the change.
	UnreadCount int
	// TotalCount is the inbox's total count after the change.
	TotalCount int
}

// Package model holds the GraphQL-only shapes: connections, edges, payloads,
// inputs and PageInfo (generated into models_gen.go from schema.graphqls),
// plus the few hand-written types gqlgen.yml binds.
package model

import (
	"time"

	"herald/store"
)

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
	// AuthorID is the message's author, so the lookup names its shard key;
	// store.NilID for READ.
	AuthorID store.ID
	// DeliveredAt is when an ADDED item reached the inbox.
	DeliveredAt time.Time
	// UnreadCount is the inbox's unread count after the change.
	UnreadCount int
	// TotalCount is the inbox's total count after the change.
	TotalCount int
	// Cursor names the event, to resume after it.
	Cursor string
}

// InboxEdge is an item of the viewer's inbox. It is hand-written so that the
// reposter of a repost item is an id, resolved (through the loaders) only
// when the client selects repostedBy.
type InboxEdge struct {
	// Cursor is the item's own: the repost's for a repost.
	Cursor string
	// Node is the message shown: for a repost, the message reposted.
	Node *store.Message
	// DeliveredAt is when the item reached the inbox.
	DeliveredAt time.Time
	// RepostedBy is the user whose repost the item is; store.NilID for
	// any other item.
	RepostedBy store.ID
}

// UserConnection is a page of users. It is hand-written so that totalCount
// can come either with the page (the follow counters) or, for
// usersByAttribute, from a count made only when the client selects it: the
// graph's totalCount resolver reads TotalCount unless ByAttribute is set.
type UserConnection struct {
	// Edges are the users of this page, each with its cursor.
	Edges []*UserEdge
	// PageInfo says where this page sits in the whole list.
	PageInfo *PageInfo
	// TotalCount is the size of the whole list when it came with the page;
	// it is unused when ByAttribute is set.
	TotalCount int
	// ByAttribute, when not nil, says the list is the users whose attribute
	// ByAttribute.Name has exactly ByAttribute.Value, to be counted with
	// Service.CountUsersByAttribute if totalCount is selected.
	ByAttribute *store.Attribute
}

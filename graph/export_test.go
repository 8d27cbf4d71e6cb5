package graph

import (
	"github.com/99designs/gqlgen/graphql/handler"

	"herald/store"
)

// NewServerWithoutFastPaths is NewServer with every field resolved by
// gqlgen's executor, for tests that compare the fast paths with it.
func NewServerWithoutFastPaths(cfg Config) *handler.Server { return newServer(cfg, false) }

// ParseUserIDForTest is parseUserID, for tests that reach the store.
func ParseUserIDForTest(s string) (store.ID, error) { return parseUserID(s) }

// ParseGroupIDForTest decodes a NotificationGroup's global id, for tests
// that reach the store.
func ParseGroupIDForTest(s string) (store.ID, error) { return parseIDOf(typeNotificationGroup, s) }

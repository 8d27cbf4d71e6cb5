// Package graph is Herald's GraphQL layer: gqlgen's generated executor, thin
// resolvers over service.Service, per-operation dataloaders (graph/loader),
// bearer tokens (graph/auth), opaque global ids and cursors, the error
// presenter and the query limits. NewServer assembles them into a handler.
package graph

// gqlgen finds ../gqlgen.yml by walking up from this directory and runs from
// there, so the paths in gqlgen.yml are relative to the repository root.
//go:generate go run github.com/99designs/gqlgen generate

package graph

import (
	"log/slog"

	"herald/graph/auth"
	"herald/store/service"
)

// Resolver is the root of gqlgen's resolvers and holds their dependencies.
// It keeps no per-request state: the viewer and the loaders travel in ctx.
type Resolver struct {
	// Service is the domain API every resolver calls.
	Service *service.Service
	// Tokens issues the bearer tokens returned by signUp and logIn.
	Tokens *auth.Signer
	// Logger receives the errors hidden from clients; slog.Default() if nil.
	Logger *slog.Logger
	// LogIns limits failed logIns (and password checks) per handle, and
	// account exports per user; nil limits nothing.
	LogIns *RateLimiter
}

func (r *Resolver) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

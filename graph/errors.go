package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"herald/store"
	"herald/store/service"
)

// Codes of an operation stopped before its end.
const (
	CodeTimeout   = "TIMEOUT"
	CodeCancelled = "CANCELLED"
)

// ErrorPresenter returns the presenter that decides what clients see of an
// error. Every error leaves with an extensions.code:
//
//   - errors that already carry a code (gqlgen's GRAPHQL_PARSE_FAILED and
//     GRAPHQL_VALIDATION_FAILED, COMPLEXITY_LIMIT_EXCEEDED, QUERY_TOO_DEEP)
//     are sent unchanged;
//   - a postMessage or repost refused because fan-out is behind
//     (service.FanoutBehindError) is RATE_LIMITED with extensions.retryAfter,
//     as the rate limiter's refusals are;
//   - a store.Error sends its client-safe Message (not Error(), which is for
//     logs) with its Code, except INTERNAL;
//   - a context's deadline is TIMEOUT (the operation took longer than the
//     server's -query-timeout), its cancellation CANCELLED (the client went
//     away), neither logged as an error;
//   - anything else is logged in full with its path and sent as "internal
//     error" with code INTERNAL, so driver and runtime text never reaches a
//     client.
func ErrorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		if gqlErr == nil {
			return nil
		}
		if _, ok := gqlErr.Extensions["code"]; ok {
			return gqlErr
		}
		if gqlErr.Extensions == nil {
			gqlErr.Extensions = map[string]any{}
		}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			gqlErr.Message = "the operation did not finish within the server's time limit: retry later, or ask for less"
			gqlErr.Extensions["code"] = CodeTimeout
			return gqlErr
		case errors.Is(err, context.Canceled):
			// The client went away: nobody reads this.
			gqlErr.Message = "the request was cancelled"
			gqlErr.Extensions["code"] = CodeCancelled
			return gqlErr
		}
		var fb *service.FanoutBehindError
		if errors.As(err, &fb) {
			gqlErr.Message = fb.Error()
			gqlErr.Extensions["code"] = CodeRateLimited
			gqlErr.Extensions["retryAfter"] = fb.RetrySeconds()
			return gqlErr
		}
		var se *store.Error
		if errors.As(err, &se) {
			if se.Code != store.EINTERNAL {
				gqlErr.Message = se.Message
				gqlErr.Extensions["code"] = se.Code
				return gqlErr
			}
			// An INTERNAL store.Error is treated like any other failure: its
			// message is not guaranteed to be meant for clients.
		}
		log.ErrorContext(ctx, "graphql: internal error", "path", gqlErr.Path.String(), "err", err)
		gqlErr.Message = "internal error"
		gqlErr.Extensions["code"] = store.EINTERNAL
		return gqlErr
	}
}

// RecoverFunc returns the function gqlgen calls with a value recovered from a
// panicking resolver: it logs the value and the stack and returns an INTERNAL
// error, which the presenter sends as "internal error".
func RecoverFunc(log *slog.Logger) graphql.RecoverFunc {
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context, p any) error {
		path := ""
		if fc := graphql.GetFieldContext(ctx); fc != nil {
			path = fc.Path().String()
		}
		log.ErrorContext(ctx, "graphql: panic", "path", path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return store.Errorf(store.EINTERNAL, "internal error")
	}
}

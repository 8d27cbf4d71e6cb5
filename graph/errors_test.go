package graph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/stretchr/testify/assert"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"herald/store"
	"herald/store/service"
)

func TestErrorPresenter(t *testing.T) {
	validation := gqlerror.Errorf("Cannot query field \"x\"")
	validation.Extensions = map[string]any{"code": "GRAPHQL_VALIDATION_FAILED"}

	tests := []struct {
		name    string
		err     error
		message string
		code    string
		logged  bool
	}{
		{"Coded", validation, "Cannot query field \"x\"", "GRAPHQL_VALIDATION_FAILED", false},
		{"StoreError", store.Errorf(store.ENOTFOUND, "user not found"), "user not found", store.ENOTFOUND, false},
		{"WrappedStoreError", fmt.Errorf("follow: %w", store.Errorf(store.ECONFLICT, "handle taken")), "handle taken", store.ECONFLICT, false},
		{"GqlWrappedStoreError", gqlerror.WrapPath(ast.Path{ast.PathName("x")}, store.Errorf(store.EFORBIDDEN, "no")), "no", store.EFORBIDDEN, false},
		{"StoreInternal", store.Errorf(store.EINTERNAL, "pebble: disk on fire"), "internal error", store.EINTERNAL, true},
		{"FanoutBehind", fmt.Errorf("post: %w", &service.FanoutBehindError{Lag: 45 * time.Second, MaxLag: 30 * time.Second, RetryAfter: 15 * time.Second}),
			"delivery is 45s behind, more than 30s: the server takes no new posts or reposts until it catches up; nothing was posted, retry in 15 s", CodeRateLimited, false},
		{"Plain", errors.New("mongo: connection refused to 10.0.0.1"), "internal error", store.EINTERNAL, true},
		{"Uncoded gqlerror", gqlerror.Errorf("must not be null"), "internal error", store.EINTERNAL, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			present := ErrorPresenter(slog.New(slog.NewTextHandler(&logs, nil)))
			ctx := graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, graphql.DefaultRecover)
			full := tt.err.Error() // before the presenter rewrites the message
			got := present(ctx, tt.err)
			assert.Equal(t, tt.message, got.Message)
			assert.Equal(t, tt.code, got.Extensions["code"])
			if tt.code == CodeRateLimited {
				assert.Equal(t, 15, got.Extensions["retryAfter"])
			}
			if tt.logged {
				assert.Contains(t, logs.String(), "internal error")
				assert.Contains(t, logs.String(), full, "the full error is logged")
			} else {
				assert.Empty(t, logs.String())
			}
		})
	}
}

func TestRecoverFunc(t *testing.T) {
	var logs bytes.Buffer
	err := RecoverFunc(slog.New(slog.NewTextHandler(&logs, nil)))(context.Background(), "boom")
	assert.Equal(t, store.EINTERNAL, store.ErrorCode(err))
	assert.Contains(t, logs.String(), "boom")
	assert.Contains(t, logs.String(), "goroutine", "the stack is logged")
}

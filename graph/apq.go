package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Codes of automatic persisted queries refused before they run. NOT_FOUND
// is the one Apollo's clients act on (they send the query again); the
// others are a client's mistake, not the server's.
const (
	CodePersistedQueryNotFound    = "PERSISTED_QUERY_NOT_FOUND"
	CodePersistedQueryMismatch    = "PERSISTED_QUERY_HASH_MISMATCH"
	CodePersistedQueryUnsupported = "PERSISTED_QUERY_VERSION_NOT_SUPPORTED"
	CodePersistedQueryInvalid     = "PERSISTED_QUERY_INVALID"
)

func init() {
	for _, c := range []string{CodePersistedQueryNotFound, CodePersistedQueryMismatch, CodePersistedQueryUnsupported, CodePersistedQueryInvalid} {
		errcode.RegisterErrorType(c, errcode.KindProtocol)
	}
}

// PersistedQueries is Apollo's automatic persisted queries protocol
// (extensions.persistedQuery {version: 1, sha256Hash}), as gqlgen's
// extension.AutomaticPersistedQuery implements it, except that every
// refusal carries a code: gqlgen's leaves a hash that does not match its
// query, an unsupported version and a malformed extension uncoded, which
// the presenter must take for an internal error (and log as one).
//
// A query is cached only with the hash it matches, so the cache cannot be
// poisoned: a hash always finds its own query.
type PersistedQueries struct {
	Cache graphql.Cache[string]
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = PersistedQueries{}

// ExtensionName implements graphql.HandlerExtension.
func (PersistedQueries) ExtensionName() string { return "AutomaticPersistedQuery" }

// Validate implements graphql.HandlerExtension.
func (PersistedQueries) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters implements graphql.OperationParameterMutator.
func (p PersistedQueries) MutateOperationParameters(ctx context.Context, raw *graphql.RawParams) *gqlerror.Error {
	ext, ok := raw.Extensions["persistedQuery"]
	if !ok || ext == nil {
		return nil
	}
	refuse := func(code, msg string) *gqlerror.Error {
		err := gqlerror.Errorf("%s", msg)
		errcode.Set(err, code)
		return err
	}
	m, ok := ext.(map[string]any)
	if !ok {
		return refuse(CodePersistedQueryInvalid, "extensions.persistedQuery must be an object {version, sha256Hash}")
	}
	if v, ok := jsonInt(m["version"]); !ok || v != 1 {
		return refuse(CodePersistedQueryUnsupported, "persisted query version not supported: send version 1")
	}
	hash, ok := m["sha256Hash"].(string)
	if !ok || len(hash) != sha256.Size*2 {
		return refuse(CodePersistedQueryInvalid, "extensions.persistedQuery.sha256Hash must be the hex SHA-256 of the query")
	}
	hash = strings.ToLower(hash)
	if raw.Query == "" {
		q, ok := p.Cache.Get(ctx, hash)
		if !ok {
			// The message is the one Apollo's clients look for.
			return refuse(CodePersistedQueryNotFound, "PersistedQueryNotFound")
		}
		raw.Query = q
		return nil
	}
	sum := sha256.Sum256([]byte(raw.Query))
	if hex.EncodeToString(sum[:]) != hash {
		return refuse(CodePersistedQueryMismatch, "extensions.persistedQuery.sha256Hash is not the SHA-256 of the query")
	}
	p.Cache.Add(ctx, hash, raw.Query)
	return nil
}

// jsonInt reads a JSON number decoded as json.Number (as the transports
// decode) or float64 as a whole int.
func jsonInt(v any) (int64, bool) {
	switch n := v.(type) {
	case interface{ Int64() (int64, error) }:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		return int64(n), n == float64(int64(n))
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

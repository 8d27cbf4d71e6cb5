package servertest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"herald/store"
)

// Env returns a getenv of the variables kv, given as key, value, key,
// value...
func Env(kv ...string) func(string) string {
	m := make(map[string]string)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// SyncBuffer is a bytes.Buffer safe for the concurrent writes of a logger
// and reads of a test.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// GlobalStoreID decodes a GraphQL global id, base64url("<typ>:<24 hex>")
// as graph/id.go makes it, into the store id it names. It returns an
// error instead of failing the test, for goroutines other than the test's.
func GlobalStoreID(typ, global string) (store.ID, error) {
	raw, err := base64.RawURLEncoding.DecodeString(global)
	if err != nil {
		return store.NilID, fmt.Errorf("global id %q: %w", global, err)
	}
	hexID, ok := strings.CutPrefix(string(raw), typ+":")
	if !ok {
		return store.NilID, fmt.Errorf("global id %q names no %s", global, typ)
	}
	return store.ParseID(hexID)
}

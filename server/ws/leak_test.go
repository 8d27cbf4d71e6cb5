package ws_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests:
// websocket connections and their writers, HTTP servers and their
// connections, and the store's goroutines must all have ended once each
// test has stopped its server. Nothing is ignored: the tests' clients
// keep no connection alive past the servers they talk to (net/http's
// keep-alive goroutines end when the server closes the connection).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

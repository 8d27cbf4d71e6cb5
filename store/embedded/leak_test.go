package embedded_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: the
// store's checkpoints and disk checks, and Pebble's own goroutines, must
// all have ended once each test has closed its store. Nothing is ignored:
// Pebble starts none that outlives DB.Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

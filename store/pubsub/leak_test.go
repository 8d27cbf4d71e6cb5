package pubsub_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: a hub's
// pumps must have ended once each test has closed its hub or ended its
// subscriptions. Nothing is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

package graph_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests:
// subscriptions (and the hub or change stream feeding them), dataloaders'
// batches and the test servers must all have ended once each test's
// cleanups have run. Nothing is ignored: no goroutine of another package
// outlives these tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

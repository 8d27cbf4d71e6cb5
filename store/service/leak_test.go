package service_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: fan-out's
// workers, lease keeper and read-ahead must all have ended once each test
// has closed the Service it opened. Nothing is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

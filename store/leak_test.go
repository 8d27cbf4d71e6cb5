package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: the hub's
// pumps and fan-out's workers, leader and read-ahead must all have ended
// once each test has closed what it opened. Nothing is ignored: no
// goroutine of another package outlives these tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

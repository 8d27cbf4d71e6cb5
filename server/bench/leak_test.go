package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: bench
// reads the log of each server it starts and the sockets of its
// subscribers on goroutines of its own, which must all have ended with
// the run. Nothing is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

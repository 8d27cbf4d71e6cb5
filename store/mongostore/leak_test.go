package mongostore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: the
// change stream watchers of Events, the parallel covering-bucket lookups,
// and fan-out's workers and leader (which holds the lease) must all have
// ended once each test has closed what it opened. Nothing is ignored:
// lungo's engine starts no goroutine that outlives Engine.Close, nor does
// a real MongoDB's client (HERALD_TEST_MONGODB_URI) past Disconnect.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

package embedded_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		s, err := embedded.Open(t.TempDir(), embedded.Options{})
		require.NoError(t, err)
		return s
	})
}

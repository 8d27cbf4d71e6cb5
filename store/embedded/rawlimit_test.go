package embedded

import (
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRawAppendRate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raw")
	rate, err := RawAppendRate(dir, 2500, 1000)
	require.NoError(t, err)
	assert.Positive(t, rate)

	// Every entry was written, each under an owner of its own.
	db, err := pebble.Open(dir, &pebble.Options{})
	require.NoError(t, err)
	defer db.Close()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{pInbox}, UpperBound: []byte{pInbox + 1}})
	require.NoError(t, err)
	defer it.Close()
	n, owners := 0, map[string]bool{}
	for ok := it.First(); ok; ok = it.Next() {
		n++
		owners[string(it.Key()[1:13])] = true
	}
	assert.Equal(t, 2500, n)
	assert.Len(t, owners, 2500)

	_, err = RawAppendRate(filepath.Join(t.TempDir(), "none"), 0, 1000)
	assert.Error(t, err)
}

func TestNextID(t *testing.T) {
	id := nextID([12]byte{11: 0xff})
	assert.Equal(t, [12]byte{10: 1}, [12]byte(id))
}

package graph

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph/generated"
)

// TestScanCounts checks the hand-written list of counts that scan against
// the schema: each names a field that exists and returns a type with the
// count, so a rename cannot leave a scan priced as a plain field.
func TestScanCounts(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}}).Schema()
	require.NotEmpty(t, scanCounts)
	for coord, count := range scanCounts {
		typ, field, ok := strings.Cut(coord, ".")
		require.True(t, ok, coord)
		def := schema.Types[typ]
		require.NotNil(t, def, "type %s", typ)
		f := def.Fields.ForName(field)
		require.NotNil(t, f, "field %s", coord)
		ret := schema.Types[f.Type.Name()]
		require.NotNil(t, ret, "type of %s", coord)
		assert.NotNil(t, ret.Fields.ForName(count), "%s returns %s, which has no %s", coord, ret.Name, count)
	}
}

func TestSatArithmetic(t *testing.T) {
	const huge = int(^uint(0) >> 1)
	assert.Equal(t, huge, satAdd(huge, 1))
	assert.Equal(t, 5, satAdd(2, 3))
	assert.Equal(t, huge, satMul(4, huge/2), "a product that would wrap saturates")
	assert.Equal(t, 0, satMul(0, huge))
	assert.Equal(t, 12, satMul(3, 4))
}

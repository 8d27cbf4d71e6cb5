package graph

import (
	"encoding/json"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// marshalResponse is what writeResponse wrote before appendDataResponse.
func marshalResponse(t testing.TB, data []byte) []byte {
	b, err := json.Marshal(&graphql.Response{Data: data})
	require.NoError(t, err)
	return b
}

func TestAppendDataResponse(t *testing.T) {
	for _, data := range []string{
		`null`,
		`{}`,
		`{"inbox":{"totalCount":3,"edges":[{"cursor":"aQ","node":{"text":"a \"b\" \\ c"}}]}}`,
		`{"text":"<b>&amp;</b> \u003c"}`,
		"{\"text\":\"line\u2028sep\u2029para \xe2\x80\"}",
		`{ "spaced" : [ 1 , 2 ] , "in string": " \t " }`,
		"{\"tabs\":\n\t[true,false]\r\n}",
		`{"escaped":"\\","next":"x"}`,
	} {
		in := []byte(data)
		assert.Equal(t, string(marshalResponse(t, in)), string(appendDataResponse(nil, in)), "data %q", data)
	}
}

func FuzzAppendDataResponse(f *testing.F) {
	f.Add([]byte(`{"a":"<\u2028>","b":[1, 2]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			t.Skip("gqlgen writes valid JSON")
		}
		assert.Equal(t, string(marshalResponse(t, data)), string(appendDataResponse(nil, data)))
	})
}

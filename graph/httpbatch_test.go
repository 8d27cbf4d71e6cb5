package graph_test

// Batched POSTs (HTTPTransport.MaxBatch): a JSON array of requests in, a
// JSON array of responses out, in order. The GraphQL-over-HTTP spec has no
// batches; Apollo's BatchHttpLink and others send them.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
)

// batchElem is one response of a batch as a client sees it.
type batchElem map[string]json.RawMessage

func (e batchElem) code(t *testing.T) string {
	t.Helper()
	var errs []gqlError
	require.NoError(t, json.Unmarshal(e["errors"], &errs))
	require.NotEmpty(t, errs)
	return errs[0].Extensions.Code
}

// serveReq serves req and returns what the client sees; Body is decoded
// only when the answer is a JSON object.
func serveReq(t *testing.T, h http.Handler, req *http.Request) httpResult {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := httpResult{Status: rec.Code, ContentType: rec.Header().Get("Content-Type"), Header: rec.Header(), Raw: rec.Body.String()}
	if strings.HasPrefix(res.Raw, "{") {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res.Body), "body: %q", res.Raw)
	}
	return res
}

// postBatch posts body and decodes the answer, which must be an array.
func postBatch(t *testing.T, h http.Handler, accept, body string) (httpResult, []batchElem) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
	req.Header.Set("Content-Type", mtJSON)
	req.Header.Set("Accept", accept)
	res := serveReq(t, h, req)
	var elems []batchElem
	require.NoError(t, json.Unmarshal([]byte(res.Raw), &elems), "an array: %s", res.Raw)
	return res, elems
}

func maxBatch(n int) func(*graph.Config) { return func(c *graph.Config) { c.MaxBatch = n } }

// A batch is answered with an array of the operations' responses, in the
// order sent, with 200 and either response type. The operations run one
// after another: the third sees the user the second created.
func TestGraphQLHTTP_BatchInOrder(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for i, accept := range []string{mtJSON, mtGQL} {
			handle := []string{"batch_a", "batch_b"}[i]
			body := `[
				{"query":"{ __typename }"},
				{"query":"mutation($h: String!) { signUp(input: {handle: $h, password: \"correct-horse\"}) { user { handle } } }","variables":{"h":"` + handle + `"}},
				{"query":"query Q($h: String!) { user(handle: $h) { handle } }","operationName":"Q","variables":{"h":"` + handle + `"}}
			]`
			res, elems := postBatch(t, h, accept, body)
			assert.Equal(t, http.StatusOK, res.Status)
			assert.Equal(t, accept+"; charset=utf-8", res.ContentType)
			require.Len(t, elems, 3)
			assert.JSONEq(t, `{"__typename":"Query"}`, string(elems[0]["data"]))
			assert.JSONEq(t, `{"signUp":{"user":{"handle":"`+handle+`"}}}`, string(elems[1]["data"]))
			assert.JSONEq(t, `{"user":{"handle":"`+handle+`"}}`, string(elems[2]["data"]))
			for _, e := range elems {
				assert.NotContains(t, e, "errors")
			}
		}
	})
}

// Each element is answered as it would be alone: executed (data, maybe
// errors), refused before execution (errors, no data), or not a well-formed
// request (BAD_USER_INPUT, no data). The batch as a whole is still 200 with
// application/graphql-response+json: one status cannot tell several
// outcomes.
func TestGraphQLHTTP_BatchMixed(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		body := `[
			{"query":"{ __typename }"},
			{"query":"{ noSuchField }"},
			{"query":1},
			"{ __typename }",
			{"query":"mutation { markInboxRead }"},
			{"query":"subscription { inboxEvents { type } }"}
		]`
		for _, accept := range []string{mtJSON, mtGQL} {
			res, elems := postBatch(t, h, accept, body)
			assert.Equal(t, http.StatusOK, res.Status)
			require.Len(t, elems, 6)
			assert.JSONEq(t, `{"__typename":"Query"}`, string(elems[0]["data"]))
			assert.NotContains(t, elems[0], "errors")

			assert.NotContains(t, elems[1], "data")
			assert.Equal(t, "GRAPHQL_VALIDATION_FAILED", elems[1].code(t))

			assert.NotContains(t, elems[2], "data")
			assert.Equal(t, "BAD_USER_INPUT", elems[2].code(t))
			assert.NotContains(t, elems[3], "data")
			assert.Equal(t, "BAD_USER_INPUT", elems[3].code(t))

			assert.JSONEq(t, `null`, string(elems[4]["data"]), "executed: data present, null")
			assert.Equal(t, "UNAUTHENTICATED", elems[4].code(t))
			assert.NotContains(t, elems[5], "data", "a subscription does not run over plain HTTP")
			assert.Equal(t, graph.CodeSubscriptionOverHTTP, elems[5].code(t))
			assert.Empty(t, res.Header.Get("Retry-After"))
		}
	})
}

// A batch that cannot be served as a whole is one request error, 400 with
// either response type, and runs nothing: an empty array and a body that
// is not an array of JSON values are malformed (BAD_USER_INPUT), more
// operations than MaxBatch is BATCH_TOO_LARGE.
func TestGraphQLHTTP_BatchRefused400(t *testing.T) {
	signUp := `{"query":"mutation { signUp(input: {handle: \"toomany\", password: \"correct-horse\"}) { token } }"}`
	q := `{"query":"{ __typename }"}`
	specTest(t, maxBatch(3), func(t *testing.T, h http.Handler) {
		for _, tt := range []struct{ name, body, code string }{
			{"Empty", `[]`, "BAD_USER_INPUT"},
			{"EmptyWithSpace", " \n[ ] ", "BAD_USER_INPUT"},
			{"Malformed", `[{"query":"{ __typename }"},`, "BAD_USER_INPUT"},
			{"TrailingData", `[` + q + `] [` + q + `]`, "BAD_USER_INPUT"},
			{"OverLimit", `[` + signUp + `,` + q + `,` + q + `,` + q + `]`, graph.CodeBatchTooLarge},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for _, accept := range []string{mtJSON, mtGQL} {
					r := post(t, h, accept, tt.body)
					assert.Equal(t, http.StatusBadRequest, r.Status, accept)
					assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
					assert.False(t, r.hasData())
					assert.Equal(t, tt.code, r.code(t))
				}
			})
		}
		r := post(t, h, mtJSON, `{"query":"{ user(handle: \"toomany\") { id } }"}`)
		assert.JSONEq(t, `{"user":null}`, string(r.Body["data"]), "no operation of a refused batch ran")

		res, elems := postBatch(t, h, mtGQL, `[`+q+`,`+q+`,`+q+`]`)
		assert.Equal(t, http.StatusOK, res.Status, "a batch at the limit is served")
		assert.Len(t, elems, 3)
	})
}

// With MaxBatch 0 or 1 any array, even of one request, is refused with
// BATCHING_DISABLED and 400; a single request still works.
func TestGraphQLHTTP_BatchingOff(t *testing.T) {
	for _, n := range []int{0, 1} {
		t.Run(fmt.Sprintf("MaxBatch%d", n), func(t *testing.T) {
			specTest(t, maxBatch(n), func(t *testing.T, h http.Handler) {
				for _, accept := range []string{mtJSON, mtGQL} {
					r := post(t, h, accept, `[{"query":"{ __typename }"}]`)
					assert.Equal(t, http.StatusBadRequest, r.Status)
					assert.False(t, r.hasData())
					assert.Equal(t, graph.CodeBatchingDisabled, r.code(t))

					r = post(t, h, accept, `{"query":"{ __typename }"}`)
					assert.Equal(t, http.StatusOK, r.Status)
					assert.JSONEq(t, `{"__typename":"Query"}`, string(r.Body["data"]))
				}
			})
		})
	}
}

// Each operation of a batch is checked against the limits on its own: two
// operations each just under the complexity limit pass together, though
// their sum is over it.
func TestGraphQLHTTP_BatchLimitsPerOperation(t *testing.T) {
	specTest(t, limits, func(t *testing.T, h http.Handler) {
		// complexity 1 + (1 + 30 × 3) = 92 of 100
		op := `{"query":"{ viewer { followers(first: 30) { edges { node { id } } } } }"}`
		r := post(t, h, mtGQL, op)
		require.Equal(t, http.StatusOK, r.Status, "under the limit alone: %s", r.Raw)
		res, elems := postBatch(t, h, mtGQL, `[`+op+`,`+op+`]`)
		assert.Equal(t, http.StatusOK, res.Status)
		require.Len(t, elems, 2)
		for _, e := range elems {
			assert.JSONEq(t, `{"viewer":null}`, string(e["data"]))
			assert.NotContains(t, e, "errors")
		}
	})
}

// GET never batches: its query parameter is one GraphQL document, so an
// array there is a document that does not parse.
func TestGraphQLHTTP_GETNeverBatches(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		r := get(t, h, mtGQL, url.Values{"query": {`[{"query":"{ __typename }"}]`}})
		assert.Equal(t, http.StatusBadRequest, r.Status)
		assert.Equal(t, "GRAPHQL_PARSE_FAILED", r.code(t))
	})
}

package graph_test

// Tests of the GraphQL-over-HTTP specification (graphql/graphql-over-http,
// spec/GraphQLOverHTTP.md, Stage 2 draft) as a client sees /graphql: status,
// Content-Type and body shape. Each test names the section and rule it
// covers.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
)

const (
	mtJSON = "application/json"
	mtGQL  = "application/graphql-response+json"
)

// httpResult is what a client sees of a response.
type httpResult struct {
	Status      int
	ContentType string
	Header      http.Header
	Body        map[string]json.RawMessage
	Raw         string
}

func (r httpResult) hasData() bool { _, ok := r.Body["data"]; return ok }

func (r httpResult) errs(t *testing.T) []gqlError {
	t.Helper()
	var errs []gqlError
	if raw, ok := r.Body["errors"]; ok {
		require.NoError(t, json.Unmarshal(raw, &errs), r.Raw)
	}
	return errs
}

func (r httpResult) code(t *testing.T) string {
	t.Helper()
	errs := r.errs(t)
	require.NotEmpty(t, errs, r.Raw)
	return errs[0].Extensions.Code
}

func do(t *testing.T, h http.Handler, method, target, contentType, accept, body string) httpResult {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := httpResult{
		Status:      rec.Code,
		ContentType: rec.Header().Get("Content-Type"),
		Header:      rec.Header(),
		Raw:         rec.Body.String(),
	}
	if method != http.MethodHead {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res.Body), "body: %q", res.Raw)
	}
	return res
}

// specHandler returns the GraphQL handler, with the test viewer middleware,
// over a fresh embedded store.
func specHandler(t *testing.T, mod func(*graph.Config)) http.Handler {
	t.Helper()
	// newEnv needs a backend name in the test's name.
	if !strings.Contains(t.Name(), backendEmbedded) {
		t.Fatalf("specHandler must run inside a test named for %q", backendEmbedded)
	}
	e := newEnv(t, mod)
	return withViewer(e.tokens, e.srv)
}

// specTest runs body under a subtest named for the embedded backend.
func specTest(t *testing.T, mod func(*graph.Config), body func(t *testing.T, h http.Handler)) {
	t.Run(backendEmbedded, func(t *testing.T) {
		body(t, specHandler(t, mod))
	})
}

func post(t *testing.T, h http.Handler, accept, body string) httpResult {
	t.Helper()
	return do(t, h, http.MethodPost, "/graphql", mtJSON, accept, body)
}

func get(t *testing.T, h http.Handler, accept string, params url.Values) httpResult {
	t.Helper()
	return do(t, h, http.MethodGet, "/graphql?"+params.Encode(), "", accept, "")
}

// Spec §Body: "If an Accept header is provided, the server MUST respect the
// given Accept header and attempt to encode the response in the highest
// priority media type listed that is supported by the server"; §Legacy
// watershed: no Accept is treated as "Accept: application/json" (the
// pre-2025 SHOULD Herald keeps for legacy clients); §Body: the server "MUST
// indicate the media type of the response with a Content-Type header, and
// SHOULD indicate the encoding".
func TestGraphQLHTTP_AcceptNegotiation(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for _, tt := range []struct{ accept, want string }{
			{"", mtJSON},
			{mtGQL, mtGQL},
			{mtJSON, mtJSON},
			{"application/graphql-response+json; charset=utf-8, application/json; charset=utf-8", mtGQL},
			{"application/json, application/graphql-response+json", mtJSON},
			{"application/json;q=0.5, application/graphql-response+json", mtGQL},
			{"application/graphql-response+json;q=0.1, application/json;q=0.9", mtJSON},
			{"*/*", mtJSON},
			{"application/*", mtJSON},
			{"*/*;q=0.1, application/graphql-response+json", mtGQL},
			{"text/html, */*;q=0.8", mtJSON},
			{"application/json;q=0, */*", mtGQL},
			{"application/graphql-response+json;q=0, */*", mtJSON},
			{"application/graphql-response+json; charset=UTF-8", mtGQL},
			{"garbage;;, application/graphql-response+json", mtGQL},
		} {
			t.Run(tt.accept, func(t *testing.T) {
				r := post(t, h, tt.accept, `{"query":"{ __typename }"}`)
				assert.Equal(t, http.StatusOK, r.Status)
				assert.Equal(t, tt.want+"; charset=utf-8", r.ContentType)
				assert.JSONEq(t, `{"__typename":"Query"}`, string(r.Body["data"]))
				assert.NotContains(t, r.Body, "errors")
			})
		}
	})
}

// Spec §Body: "when a client does not include at least one supported media
// type in the Accept HTTP header, the server MUST either: 1. Respond with a
// 406 Not Acceptable status code and stop processing the request
// (RECOMMENDED)". A charset other than UTF-8 is not something Herald can
// produce.
func TestGraphQLHTTP_NotAcceptable406(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for _, accept := range []string{
			"text/html",
			"application/xml, text/*",
			"application/json;q=0",
			"application/json;q=0, application/graphql-response+json;q=0",
			"application/json; charset=iso-8859-1",
			"image/*",
		} {
			t.Run(accept, func(t *testing.T) {
				for _, method := range []string{http.MethodPost, http.MethodGet} {
					var r httpResult
					if method == http.MethodPost {
						// A mutation: stopping processing means it must not run.
						r = post(t, h, accept, `{"query":"mutation { signUp(input: {handle: \"n406\", password: \"correct-horse\"}) { token } }"}`)
					} else {
						r = get(t, h, accept, url.Values{"query": {"{ __typename }"}})
					}
					assert.Equal(t, http.StatusNotAcceptable, r.Status, method)
					assert.Equal(t, mtJSON+"; charset=utf-8", r.ContentType)
					assert.False(t, r.hasData())
					assert.Equal(t, "BAD_USER_INPUT", r.code(t))
				}
				u := post(t, h, mtJSON, `{"query":"{ user(handle: \"n406\") { id } }"}`)
				assert.JSONEq(t, `{"user":null}`, string(u.Body["data"]), "the mutation did not run")
			})
		}
	})
}

// Spec §POST: "A server MUST support POST requests encoded with the
// application/json media type ... encoded with UTF-8"; "For POST requests
// using an officially recognized GraphQL Content-Type without indicating an
// encoding, the server MUST assume the encoding is utf-8"; "If the client
// does not supply a Content-Type header with a POST request, the server
// SHOULD reject the request using the appropriate 4xx status code". Herald
// supports no other media type or encoding: 415 Unsupported Media Type.
func TestGraphQLHTTP_POSTContentType(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for _, tt := range []struct {
			contentType string
			want        int
		}{
			{"application/json", http.StatusOK},
			{"application/json; charset=utf-8", http.StatusOK},
			{"application/json;charset=UTF-8", http.StatusOK},
			{"", http.StatusUnsupportedMediaType},
			{"text/plain", http.StatusUnsupportedMediaType},
			{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
			{"multipart/form-data; boundary=x", http.StatusUnsupportedMediaType},
			{"application/graphql", http.StatusUnsupportedMediaType},
			{"application/json; charset=iso-8859-1", http.StatusUnsupportedMediaType},
			{"application/json; charset=utf-16", http.StatusUnsupportedMediaType},
			{"not a media type;;", http.StatusUnsupportedMediaType},
		} {
			t.Run(tt.contentType, func(t *testing.T) {
				for _, accept := range []string{mtJSON, mtGQL} {
					r := do(t, h, http.MethodPost, "/graphql", tt.contentType, accept, `{"query":"{ __typename }"}`)
					assert.Equal(t, tt.want, r.Status, accept)
					assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
					if tt.want == http.StatusOK {
						assert.JSONEq(t, `{"__typename":"Query"}`, string(r.Body["data"]))
					} else {
						assert.False(t, r.hasData())
						assert.Equal(t, "BAD_USER_INPUT", r.code(t))
					}
				}
			})
		}
	})
}

// Spec §Request Parameters and §JSON Encoding: query is a required string,
// operationName an optional string, variables and extensions optional
// objects; "An HTTP request that encodes parameters of the same names but of
// the wrong type, or that omits required parameters, is not a well-formed
// GraphQL-over-HTTP request". §Status Codes (both media types), examples
// "JSON parsing failure" and "Invalid parameters": such a request SHOULD get
// 400, and (no GraphQL response was generated) MUST NOT get 2xx with
// application/graphql-response+json. A JSON array is a batch, Herald's
// extension (httpbatch_test.go).
func TestGraphQLHTTP_MalformedPOST400(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for _, body := range []string{
			`NONSENSE`,
			`{"query":`,
			``,
			`null`,
			`"{ __typename }"`,
			`{}`,
			`{"qeury":"{ __typename }"}`,
			`{"query":null}`,
			`{"query":""}`,
			`{"query":1}`,
			`{"query":["{ __typename }"]}`,
			`{"query":"{ __typename }","operationName":1}`,
			`{"query":"query Q ($i: Int!) { __typename }","variables":[7]}`,
			`{"query":"{ __typename }","variables":"{}"}`,
			`{"query":"{ __typename }","extensions":[]}`,
			`{"query":"{ __typename }"} {"query":"{ __typename }"}`,
		} {
			t.Run(body, func(t *testing.T) {
				for _, accept := range []string{mtJSON, mtGQL} {
					r := post(t, h, accept, body)
					assert.Equal(t, http.StatusBadRequest, r.Status, accept)
					assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
					assert.False(t, r.hasData(), "no data entry: %s", r.Raw)
					assert.Equal(t, "BAD_USER_INPUT", r.code(t))
				}
			})
		}
	})
}

// Spec §JSON Encoding: other property names are reserved for future
// expansion, so a request carrying one is still served (Herald ignores
// them); §Request Parameters: "Specifying null for optional request
// parameters is equivalent to not specifying them at all".
func TestGraphQLHTTP_UnknownKeysAndNullParams(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for _, body := range []string{
			`{"query":"{ __typename }","futureKey":{"a":1}}`,
			`{"query":"{ __typename }","operationName":null,"variables":null,"extensions":null}`,
			`{"query":"{ __typename }","operationName":"","variables":{},"extensions":{}}`,
		} {
			for _, accept := range []string{mtJSON, mtGQL} {
				r := post(t, h, accept, body)
				assert.Equal(t, http.StatusOK, r.Status, body)
				assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
				assert.JSONEq(t, `{"__typename":"Query"}`, string(r.Body["data"]))
			}
		}
	})
}

// requestErrorCases are well-formed requests that fail before execution:
// document parse failure, validation failure, an operation that cannot be
// determined, variable coercion failure, and Herald's extra validation rules
// (depth and complexity limits, §Validation: "The server MAY ... apply
// additional validation rules").
var requestErrorCases = []struct {
	name, body, code string
}{
	{"DocumentParse", `{"query":"{"}`, "GRAPHQL_PARSE_FAILED"},
	{"DocumentValidation", `{"query":"{ noSuchField }"}`, "GRAPHQL_VALIDATION_FAILED"},
	{"OperationUnknown", `{"query":"query A { __typename }","operationName":"B"}`, "GRAPHQL_VALIDATION_FAILED"},
	{"OperationAmbiguous", `{"query":"query A { __typename } query B { __typename }"}`, "GRAPHQL_VALIDATION_FAILED"},
	{"VariableMissing", `{"query":"query Q($h: String!) { user(handle: $h) { id } }"}`, "GRAPHQL_VALIDATION_FAILED"},
	{"VariableWrongType", `{"query":"query Q($h: String!) { user(handle: $h) { id } }","variables":{"h":{"not":"a string"}}}`, "GRAPHQL_VALIDATION_FAILED"},
	{"DepthLimit", `{"query":"{ viewer { followers { edges { node { followers { edges { node { id } } } } } } } }"}`, graph.CodeQueryTooDeep},
	{"ComplexityLimit", `{"query":"{ viewer { followers(first: 100) { edges { node { id handle } } } } }"}`, "COMPLEXITY_LIMIT_EXCEEDED"},
	// Not the spec's: plain HTTP answers once, so a subscription is refused
	// before it runs rather than held open until its first event.
	{"SubscriptionOverHTTP", `{"query":"subscription { inboxEvents { type } }"}`, graph.CodeSubscriptionOverHTTP},
	{"PersistedQueryNotFound", `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + strings.Repeat("ab", 32) + `"}}}`, "PERSISTED_QUERY_NOT_FOUND"},
}

func limits(c *graph.Config) { c.MaxDepth = 6; c.ComplexityLimit = 100 }

// Spec §application/graphql-response+json: "If the GraphQL response does
// not contain the {data} entry then the server MUST reply with a 4xx or 5xx
// status code"; "If the request is not a well-formed GraphQL-over-HTTP
// request, or it does not pass validation, then the server SHOULD reply with
// 400"; examples "Document parsing failure", "Document validation failure",
// "Operation cannot be determined", "Variable coercion failure": 400. Since
// execution never started, the body has errors and no data entry (GraphQL
// spec, Response Format).
func TestGraphQLHTTP_GraphQLResponseJSON_RequestError400(t *testing.T) {
	specTest(t, limits, func(t *testing.T, h http.Handler) {
		for _, tt := range requestErrorCases {
			t.Run(tt.name, func(t *testing.T) {
				r := post(t, h, mtGQL, tt.body)
				assert.Equal(t, http.StatusBadRequest, r.Status)
				assert.Equal(t, mtGQL+"; charset=utf-8", r.ContentType)
				assert.False(t, r.hasData(), "no data entry: %s", r.Raw)
				assert.Equal(t, tt.code, r.code(t))
			})
		}
	})
}

// Spec §application/json: "The server SHOULD use the 200 status code for
// every response to a well-formed GraphQL-over-HTTP request, independent of
// any GraphQL request error or GraphQL field error raised" and "SHOULD NOT
// use a 4xx or 5xx status code" for one; examples "Document parsing
// failure", "Document validation failure", "Operation cannot be determined",
// "Variable coercion failure": 200 (gqlgen's default is 422). No data entry,
// as execution never started.
func TestGraphQLHTTP_JSON_RequestError200(t *testing.T) {
	specTest(t, limits, func(t *testing.T, h http.Handler) {
		for _, tt := range requestErrorCases {
			t.Run(tt.name, func(t *testing.T) {
				for _, accept := range []string{mtJSON, ""} {
					r := post(t, h, accept, tt.body)
					assert.Equal(t, http.StatusOK, r.Status)
					assert.Equal(t, mtJSON+"; charset=utf-8", r.ContentType)
					assert.False(t, r.hasData(), "no data entry: %s", r.Raw)
					assert.Equal(t, tt.code, r.code(t))
				}
			})
		}
	})
}

// Spec §application/graphql-response+json: "If the GraphQL response
// contains the {data} entry and it is not {null}, then the server MUST reply
// with a 2xx status code and SHOULD reply with 200"; "If ... it is {null},
// then the server SHOULD reply with a 2xx status code and it is RECOMMENDED
// it replies with 200"; §application/json: "If the GraphQL response contains
// a non-null {data} entry then the server MUST use the 200 status code"; both
// sections' "Field errors encountered during execution": 200.
func TestGraphQLHTTP_Executed200(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for _, tt := range []struct{ name, body, data, code string }{
			{"NoErrors", `{"query":"{ viewer { id } }"}`, `{"viewer":null}`, ""},
			{"PartialData", `{"query":"{ __typename node(id: \"not-an-id\") { id } }"}`, `{"__typename":"Query","node":null}`, "BAD_USER_INPUT"},
			{"NullData", `{"query":"mutation { markInboxRead }"}`, `null`, "UNAUTHENTICATED"},
			{"NullDataLogIn", `{"query":"mutation { logIn(input: {handle: \"nobody\", password: \"wrong-password\"}) { token } }"}`, `null`, "UNAUTHENTICATED"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for _, accept := range []string{mtJSON, mtGQL} {
					r := post(t, h, accept, tt.body)
					assert.Equal(t, http.StatusOK, r.Status, accept)
					assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
					require.True(t, r.hasData(), "data entry present once execution started: %s", r.Raw)
					assert.JSONEq(t, tt.data, string(r.Body["data"]))
					if tt.code == "" {
						assert.NotContains(t, r.Body, "errors")
					} else {
						assert.Equal(t, tt.code, r.code(t))
					}
				}
			})
		}
	})
}

// Spec §GET: the parameters are in the URL's query component; "Each of the
// {variables} and {extensions} parameters, if used, MUST be encoded as a JSON
// string"; "Setting the value of the {operationName} parameter to the empty
// string is equivalent to omitting" it; §Request: "MAY accept other HTTP
// methods, such as GET".
func TestGraphQLHTTP_GETQuery(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		doc := `query A($h: String!) { user(handle: $h) { id } } query B { __typename }`
		for _, tt := range []struct {
			name   string
			params url.Values
			data   string
		}{
			{"Query", url.Values{"query": {"{ __typename }"}}, `{"__typename":"Query"}`},
			{"EmptyOperationName", url.Values{"query": {"{ __typename }"}, "operationName": {""}}, `{"__typename":"Query"}`},
			{"Variables", url.Values{"query": {doc}, "operationName": {"A"}, "variables": {`{"h":"nobody"}`}}, `{"user":null}`},
			{"OperationName", url.Values{"query": {doc}, "operationName": {"B"}}, `{"__typename":"Query"}`},
			{"NullVariables", url.Values{"query": {"{ __typename }"}, "variables": {"null"}}, `{"__typename":"Query"}`},
			{"Extensions", url.Values{"query": {"{ __typename }"}, "extensions": {`{"x":1}`}}, `{"__typename":"Query"}`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for _, accept := range []string{mtJSON, mtGQL} {
					r := get(t, h, accept, tt.params)
					assert.Equal(t, http.StatusOK, r.Status, accept)
					assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
					assert.JSONEq(t, tt.data, string(r.Body["data"]))
				}
			})
		}
	})
}

// Spec §GET: "Each of the {variables} and {extensions} parameters, if used,
// MUST be encoded as a JSON string" (an object); a request breaking that, or
// without a query, is not well-formed: 400 with either media type (§Status
// Codes, "Invalid parameters").
func TestGraphQLHTTP_GETMalformed400(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for _, tt := range []struct {
			name     string
			rawQuery string
		}{
			{"NoQuery", ""},
			{"EmptyQuery", "query="},
			{"VariablesNotJSON", "query=%7B__typename%7D&variables=%7Bnope"},
			{"VariablesArray", "query=%7B__typename%7D&variables=%5B7%5D"},
			{"VariablesString", "query=%7B__typename%7D&variables=%22x%22"},
			{"ExtensionsNotJSON", "query=%7B__typename%7D&extensions=nope"},
			{"ExtensionsArray", "query=%7B__typename%7D&extensions=%5B%5D"},
			{"BadEscape", "query=%zz"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for _, accept := range []string{mtJSON, mtGQL} {
					r := do(t, h, http.MethodGet, "/graphql?"+tt.rawQuery, "", accept, "")
					assert.Equal(t, http.StatusBadRequest, r.Status, accept)
					assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
					assert.False(t, r.hasData())
					assert.Equal(t, "BAD_USER_INPUT", r.code(t))
				}
			})
		}
	})
}

// Spec §GET: "GET requests MUST NOT be used for executing mutation
// operations. If the values of {query} and {operationName} indicate that a
// mutation operation is to be executed, the server MUST respond with error
// status code 405 (Method Not Allowed) and halt execution." RFC 9110 §15.5.6:
// a 405 carries Allow (here POST, the method that runs it).
func TestGraphQLHTTP_GETMutation405(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		signUp := `mutation { signUp(input: {handle: "viaget", password: "correct-horse"}) { token } }`
		both := `query Q { __typename } mutation M { signUp(input: {handle: "viaget", password: "correct-horse"}) { token } }`
		for _, tt := range []struct {
			name   string
			params url.Values
		}{
			{"Mutation", url.Values{"query": {signUp}}},
			{"OperationNameSelectsMutation", url.Values{"query": {both}, "operationName": {"M"}}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for _, accept := range []string{mtJSON, mtGQL} {
					r := get(t, h, accept, tt.params)
					assert.Equal(t, http.StatusMethodNotAllowed, r.Status, accept)
					assert.Equal(t, "POST", r.Header.Get("Allow"))
					assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
					assert.False(t, r.hasData())
					assert.Equal(t, "BAD_USER_INPUT", r.code(t))
				}
			})
		}
		// A subscription by GET is refused as by POST: it needs a websocket.
		for _, accept := range []string{mtJSON, mtGQL} {
			r := get(t, h, accept, url.Values{"query": {"subscription { inboxEvents { type } }"}})
			assert.Equal(t, map[string]int{mtJSON: http.StatusOK, mtGQL: http.StatusBadRequest}[accept], r.Status)
			assert.False(t, r.hasData())
			assert.Equal(t, graph.CodeSubscriptionOverHTTP, r.code(t))
		}
		// Execution halted: the user was not created.
		r := post(t, h, mtJSON, `{"query":"{ user(handle: \"viaget\") { id } }"}`)
		assert.JSONEq(t, `{"user":null}`, string(r.Body["data"]))
		// The same document's query runs by GET.
		r = get(t, h, mtGQL, url.Values{"query": {both}, "operationName": {"Q"}})
		assert.Equal(t, http.StatusOK, r.Status)
		assert.JSONEq(t, `{"__typename":"Query"}`, string(r.Body["data"]))
	})
}

// Spec §Request: "A server MUST accept POST requests, and MAY accept other
// HTTP methods, such as GET." Herald serves GET, POST and OPTIONS; RFC 9110
// §15.5.6: any other method gets 405 with an Allow header listing them.
func TestGraphQLHTTP_OtherMethods405(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead, "PROPFIND"} {
			t.Run(method, func(t *testing.T) {
				r := do(t, h, method, "/graphql", mtJSON, mtGQL, `{"query":"{ __typename }"}`)
				assert.Equal(t, http.StatusMethodNotAllowed, r.Status)
				assert.Equal(t, "GET, POST, OPTIONS", r.Header.Get("Allow"))
				if method != http.MethodHead {
					assert.Equal(t, mtGQL+"; charset=utf-8", r.ContentType)
					assert.False(t, r.hasData())
					assert.Equal(t, "BAD_USER_INPUT", r.code(t))
				}
			})
		}
		t.Run("OPTIONS", func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodOptions, "/graphql", nil))
			assert.Equal(t, http.StatusOK, rec.Code)
			assert.Equal(t, "GET, POST, OPTIONS", rec.Header().Get("Allow"))
		})
	})
}

// Automatic persisted queries (an {extensions} use, §Request Parameters:
// "reserved for implementors to extend the protocol") still work by POST
// and by GET: a request with only the hash of a known query is well-formed.
func TestGraphQLHTTP_PersistedQueries(t *testing.T) {
	specTest(t, nil, func(t *testing.T, h http.Handler) {
		q := "{ __typename }"
		sum := sha256.Sum256([]byte(q))
		ext := `{"persistedQuery":{"version":1,"sha256Hash":"` + hex.EncodeToString(sum[:]) + `"}}`

		r := get(t, h, mtGQL, url.Values{"extensions": {ext}})
		assert.Equal(t, http.StatusBadRequest, r.Status)
		assert.Equal(t, "PERSISTED_QUERY_NOT_FOUND", r.code(t))
		assert.False(t, r.hasData())

		r = post(t, h, mtGQL, `{"query":"`+q+`","extensions":`+ext+`}`)
		assert.Equal(t, http.StatusOK, r.Status)
		assert.JSONEq(t, `{"__typename":"Query"}`, string(r.Body["data"]))

		r = get(t, h, mtGQL, url.Values{"extensions": {ext}})
		assert.Equal(t, http.StatusOK, r.Status)
		assert.JSONEq(t, `{"__typename":"Query"}`, string(r.Body["data"]))
		r = post(t, h, mtJSON, `{"extensions":`+ext+`}`)
		assert.Equal(t, http.StatusOK, r.Status)
		assert.JSONEq(t, `{"__typename":"Query"}`, string(r.Body["data"]))
	})
}

// TestNegotiateResponseType covers the Accept rules of spec §Body directly,
// including q-values and the specificity of media ranges (RFC 9110
// §12.5.1), without a server.
func TestNegotiateResponseType(t *testing.T) {
	for _, tt := range []struct {
		accept string
		want   string
		ok     bool
	}{
		{"", mtJSON, true},
		{"  ", mtJSON, true},
		{mtGQL, mtGQL, true},
		{"application/graphql-response+json;q=0.9, application/json;q=0.9", mtGQL, true},
		{"application/json;q=0.9, application/graphql-response+json;q=0.9", mtJSON, true},
		{"*/*;q=0.5, application/json;q=0.1", mtGQL, true},
		{"application/*;q=0.2, */*;q=0.9", mtJSON, true},
		{"application/json;q=bogus, application/graphql-response+json;q=0.1", mtGQL, true},
		{"application/json;q=2", "", false},
		{"text/plain", "", false},
		{"*/*;q=0", "", false},
	} {
		got, ok := graph.NegotiateResponseType(tt.accept)
		assert.Equal(t, tt.ok, ok, tt.accept)
		assert.Equal(t, tt.want, got, tt.accept)
	}
}

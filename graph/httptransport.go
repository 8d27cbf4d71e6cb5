package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"herald/store"
)

// The GraphQL media types of GraphQL over HTTP
// (https://github.com/graphql/graphql-over-http, spec/GraphQLOverHTTP.md).
const (
	// MediaTypeJSON is the legacy response type, and the only request type
	// Herald accepts.
	MediaTypeJSON = "application/json"
	// MediaTypeGraphQLResponse is the preferred response type: its status
	// codes tell request errors (4xx, no data) from execution (200).
	MediaTypeGraphQLResponse = "application/graphql-response+json"
)

// DefaultResponseType is the response type for a request without an Accept
// header, or whose Accept header prefers no GraphQL type over the other
// (*/*, application/*). It is application/json, the legacy default that
// existing clients, curl users and Herald's tests rely on; the spec's
// post-2025 SHOULD would be application/graphql-response+json.
const DefaultResponseType = MediaTypeJSON

// allowedMethods is what /graphql serves over plain HTTP (the websocket
// upgrade is a GET).
const allowedMethods = "GET, POST, OPTIONS"

// NegotiateResponseType picks the response media type for an Accept header
// value: of the two GraphQL response types, the one with the highest q-value,
// where a media range's q applies to the types it matches and the most
// specific matching range wins (RFC 9110 §12.5.1). Ties go to the type the
// header names first, then to DefaultResponseType. A range with a charset
// other than utf-8 matches nothing, since Herald only writes UTF-8. ok is
// false when neither type is acceptable (a 406).
func NegotiateResponseType(accept string) (mediaType string, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return DefaultResponseType, true
	}
	type score struct {
		q           float64
		specificity int // 0: */*, 1: type/*, 2: exact, -1: no match yet
		pos         int
	}
	candidates := []string{MediaTypeGraphQLResponse, MediaTypeJSON}
	scores := map[string]*score{}
	for _, c := range candidates {
		scores[c] = &score{specificity: -1}
	}
	for pos, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 || v > 1 {
				continue
			}
			q = v
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			continue
		}
		for _, c := range candidates {
			spec := -1
			switch {
			case mt == c:
				spec = 2
			case mt == "application/*":
				spec = 1
			case mt == "*/*":
				spec = 0
			}
			if s := scores[c]; spec > s.specificity {
				*s = score{q: q, specificity: spec, pos: pos}
			}
		}
	}
	best, bestScore := "", score{}
	for _, c := range []string{DefaultResponseType, otherType(DefaultResponseType)} {
		s := scores[c]
		if s.specificity < 0 || s.q <= 0 {
			continue
		}
		if best == "" || s.q > bestScore.q || (s.q == bestScore.q && s.pos < bestScore.pos) {
			best, bestScore = c, *s
		}
	}
	return best, best != ""
}

func otherType(mt string) string {
	if mt == MediaTypeJSON {
		return MediaTypeGraphQLResponse
	}
	return MediaTypeJSON
}

// HTTPTransport is gqlgen's GET and POST transports made to follow GraphQL
// over HTTP, which gqlgen's own do not in several places (q-values, 406, 415,
// 405 for a mutation by GET, 422 with application/json, "data": null before
// execution, parameter types). It serves every method but OPTIONS
// (transport.Options) and requests that ask for a protocol upgrade (the
// websocket transport):
//
//   - GET runs queries only, from the URL's query, operationName, and the
//     JSON-encoded variables and extensions; anything else is 405 with
//     "Allow: POST".
//   - POST needs Content-Type application/json (a charset, if any, utf-8),
//     else 415, and a JSON object body whose query is a string, operationName a
//     string, variables and extensions objects (null counts as absent; other
//     keys are ignored), else 400.
//   - Any other method is 405 with "Allow: GET, POST, OPTIONS".
//   - The response type follows Accept (NegotiateResponseType), else 406.
//
// A request refused before execution (parse, validation, variables, limits,
// unknown persisted query) gets an "errors" entry and no "data": status 400
// with application/graphql-response+json, 200 with application/json. A
// mutation refused by RateLimiter is such a request error, with status 429
// instead of 400, and a Retry-After header with either type. Once execution
// starts the status is 200 and "data" is always present.
//
// A POST whose body is a JSON array is a batch (as Apollo's BatchHttpLink
// sends): see MaxBatch.
type HTTPTransport struct {
	// MaxBatch is the most operations a batch may hold; 0 or 1 refuses
	// batches with BATCHING_DISABLED. A batch over it is refused with
	// BATCH_TOO_LARGE, an empty one with BAD_USER_INPUT, all with 400 and
	// either response type: the spec has no batches, so such a body is
	// not a well-formed request, as a body that is not a JSON object
	// isn't. Otherwise the answer is 200 and an array holding, in order,
	// each operation's response as the body of a request of its own would
	// be (an operation refused before execution has errors and no data).
	// One status cannot tell several outcomes, so only Retry-After (the
	// longest wait) says some operation was rate limited. The operations
	// run one after another, each as its own operation (its own loaders,
	// limits and rate limit tokens), so a batch takes no more of the server
	// at once than a single request; the body limit applies to the batch.
	MaxBatch int
}

var _ graphql.Transport = HTTPTransport{}

// Supports implements graphql.Transport.
func (HTTPTransport) Supports(r *http.Request) bool {
	return r.Header.Get("Upgrade") == "" && r.Method != http.MethodOptions
}

// Do implements graphql.Transport.
func (t HTTPTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", allowedMethods)
		ct, _ := NegotiateResponseType(r.Header.Get("Accept"))
		writeHTTPError(w, ct, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: use GET (queries) or POST", r.Method))
		return
	}
	ct, ok := NegotiateResponseType(r.Header.Get("Accept"))
	if !ok {
		writeHTTPError(w, MediaTypeJSON, http.StatusNotAcceptable,
			"Accept names no supported media type: use application/graphql-response+json or application/json")
		return
	}
	var (
		raw *graphql.RawParams
		err error
	)
	start := graphql.Now()
	if r.Method == http.MethodGet {
		raw, err = paramsFromURL(r.URL.RawQuery)
	} else {
		if status, msg := checkRequestType(r.Header.Get("Content-Type")); status != 0 {
			writeHTTPError(w, ct, status, msg)
			return
		}
		body, rerr := io.ReadAll(r.Body)
		if rerr != nil {
			writeHTTPError(w, ct, http.StatusBadRequest, "could not read request body")
			return
		}
		if isBatch(body) {
			t.doBatch(w, r, exec, ct, body, start)
			return
		}
		raw, err = paramsFromJSON(body, "request body")
	}
	if err != nil {
		// Not a well-formed GraphQL-over-HTTP request: 400 whatever the type.
		writeHTTPError(w, ct, http.StatusBadRequest, err.Error())
		return
	}
	ctx := withPlainHTTP(r.Context())
	opCtx, refused, wait := prepare(ctx, exec, r, raw, graphql.TraceTiming{Start: start, End: graphql.Now()})
	if refused != nil {
		status := http.StatusOK
		if ct == MediaTypeGraphQLResponse {
			status = http.StatusBadRequest
		}
		if wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			if ct == MediaTypeGraphQLResponse {
				status = http.StatusTooManyRequests
			}
		}
		writeResponse(w, ct, status, refused)
		return
	}
	if r.Method == http.MethodGet && opCtx.Operation.Operation != ast.Query {
		w.Header().Set("Allow", http.MethodPost)
		writeHTTPError(w, ct, http.StatusMethodNotAllowed,
			fmt.Sprintf("GET runs queries only: send a %s by POST", opCtx.Operation.Operation))
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, opCtx)
	writeResponse(w, ct, http.StatusOK, responses(ctx))
}

// Codes of a batch refused as a whole (HTTPTransport.MaxBatch).
const (
	CodeBatchingDisabled = "BATCHING_DISABLED"
	CodeBatchTooLarge    = "BATCH_TOO_LARGE"
)

// isBatch reports whether a POST body is a JSON array: a batch.
func isBatch(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// doBatch answers a batch: see HTTPTransport.MaxBatch.
func (t HTTPTransport) doBatch(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor, ct string, body []byte, start time.Time) {
	if t.MaxBatch <= 1 {
		writeHTTPErrorCode(w, ct, http.StatusBadRequest, CodeBatchingDisabled,
			"batching is disabled: send one operation per request, as a JSON object")
		return
	}
	var elems []json.RawMessage
	if err := decodeJSON(body, &elems); err != nil {
		writeHTTPError(w, ct, http.StatusBadRequest, fmt.Sprintf("a batch must be a JSON array of request objects: %v", err))
		return
	}
	if len(elems) == 0 {
		writeHTTPError(w, ct, http.StatusBadRequest, "a batch must hold at least one operation")
		return
	}
	if len(elems) > t.MaxBatch {
		writeHTTPErrorCode(w, ct, http.StatusBadRequest, CodeBatchTooLarge,
			fmt.Sprintf("a batch may hold at most %d operations; this one holds %d", t.MaxBatch, len(elems)))
		return
	}
	readTime := graphql.TraceTiming{Start: start, End: graphql.Now()}
	ctx := withPlainHTTP(r.Context())
	out := make([]any, len(elems))
	retryAfter := 0
	for i, elem := range elems {
		raw, err := paramsFromJSON(elem, fmt.Sprintf("batch element %d", i))
		if err != nil {
			out[i] = requestErrorBody{Errors: gqlerror.List{{
				Message:    err.Error(),
				Extensions: map[string]any{"code": store.EINVALID},
			}}}
			continue
		}
		opCtx, refused, wait := prepare(ctx, exec, r, raw, readTime)
		if refused != nil {
			out[i] = refused
			retryAfter = max(retryAfter, wait)
			continue
		}
		responses, opCtxWithResponse := exec.DispatchOperation(ctx, opCtx)
		out[i] = responses(opCtxWithResponse)
	}
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeResponse(w, ct, http.StatusOK, out)
}

// prepare parses, validates and checks the operation raw names (of the
// request r, read by readTime), ready to run. An operation refused before it
// runs gets instead its response body and, for RATE_LIMITED, the seconds
// to wait (0 otherwise).
func prepare(ctx context.Context, exec graphql.GraphExecutor, r *http.Request, raw *graphql.RawParams, readTime graphql.TraceTiming) (*graphql.OperationContext, *requestErrorBody, int) {
	raw.Headers = r.Header
	raw.ReadTime = readTime
	opCtx, gqlErrs := exec.CreateOperationContext(ctx, raw)
	if gqlErrs == nil {
		return opCtx, nil, 0
	}
	resp := exec.DispatchError(graphql.WithOperationContext(ctx, opCtx), gqlErrs)
	return nil, &requestErrorBody{Errors: resp.Errors, Extensions: resp.Extensions}, RetryAfter(resp.Errors)
}

// requestErrorBody is the response to a request refused before execution:
// unlike graphql.Response it has no "data" entry at all.
type requestErrorBody struct {
	Errors     gqlerror.List  `json:"errors"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// checkRequestType returns 415 and a message unless contentType is
// application/json with no charset or utf-8.
func checkRequestType(contentType string) (int, string) {
	if contentType == "" {
		return http.StatusUnsupportedMediaType, "Content-Type missing: send application/json"
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != MediaTypeJSON {
		return http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q not supported: send application/json", contentType)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return http.StatusUnsupportedMediaType, fmt.Sprintf("charset %q not supported: send utf-8", cs)
	}
	return 0, ""
}

// paramsFromURL reads a GET request's parameters.
func paramsFromURL(rawQuery string) (*graphql.RawParams, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("malformed URL query: %v", err)
	}
	raw := &graphql.RawParams{Query: q.Get("query"), OperationName: q.Get("operationName")}
	if raw.Variables, err = jsonObjectParam("variables", q.Get("variables")); err != nil {
		return nil, err
	}
	if raw.Extensions, err = jsonObjectParam("extensions", q.Get("extensions")); err != nil {
		return nil, err
	}
	return raw, checkQuery(raw)
}

// jsonObjectParam decodes a JSON-encoded object parameter; empty or null
// means absent.
func jsonObjectParam(name, s string) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]any
	if err := decodeJSON([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("%s must be a JSON-encoded object: %v", name, err)
	}
	return m, nil
}

// paramsFromJSON reads a POST request's JSON body, or one element of a batch
// (named by subject in errors), and checks each known parameter's type;
// unknown keys are ignored.
func paramsFromJSON(b []byte, subject string) (*graphql.RawParams, error) {
	var fields map[string]json.RawMessage
	if err := decodeJSON(b, &fields); err != nil || fields == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("%s must be a JSON object: %v", subject, err)
	}
	raw := &graphql.RawParams{}
	for _, p := range []struct {
		name string
		dst  any
		kind string
	}{
		{"query", &raw.Query, "a string"},
		{"operationName", &raw.OperationName, "a string"},
		{"variables", &raw.Variables, "an object"},
		{"extensions", &raw.Extensions, "an object"},
	} {
		v, ok := fields[p.name]
		if !ok || string(v) == "null" {
			continue
		}
		if err := decodeJSON(v, p.dst); err != nil {
			return nil, fmt.Errorf("%s must be %s", p.name, p.kind)
		}
	}
	return raw, checkQuery(raw)
}

// checkQuery refuses a request without a query, unless it names a persisted
// query for the APQ extension to fill in.
func checkQuery(raw *graphql.RawParams) error {
	if raw.Query != "" {
		return nil
	}
	if _, ok := raw.Extensions["persistedQuery"]; ok {
		return nil
	}
	return errors.New("query is required: a string holding a GraphQL document")
}

// decodeJSON decodes exactly one JSON value from b into v, with numbers kept
// as json.Number as gqlgen expects.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// writeHTTPError writes a request error that never reached GraphQL: status
// as given, an "errors" entry with the message and code BAD_USER_INPUT (as
// the server's other request errors), and no "data".
func writeHTTPError(w http.ResponseWriter, mediaType string, status int, message string) {
	writeHTTPErrorCode(w, mediaType, status, store.EINVALID, message)
}

// writeHTTPErrorCode is writeHTTPError with another code.
func writeHTTPErrorCode(w http.ResponseWriter, mediaType string, status int, code, message string) {
	writeResponse(w, mediaType, status, requestErrorBody{Errors: gqlerror.List{{
		Message:    message,
		Extensions: map[string]any{"code": code},
	}}})
}

// writeResponse writes body as JSON with the media type and UTF-8 charset.
func writeResponse(w http.ResponseWriter, mediaType string, status int, body any) {
	var b []byte
	var err error
	if resp, ok := body.(*graphql.Response); ok && resp != nil && isDataOnly(resp) && len(resp.Data) > 0 {
		pb := getBuf()
		defer putBuf(pb)
		b = appendDataResponse(slices.Grow((*pb)[:0], len(resp.Data)+16), resp.Data)
		*pb = b
	} else {
		b, err = json.Marshal(body)
	}
	if err != nil {
		b, _ = json.Marshal(requestErrorBody{Errors: gqlerror.List{{Message: "could not encode the response"}}})
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", mediaType+"; charset=utf-8")
	w.WriteHeader(status)
	// Write copies b into the connection's buffer or the socket before it
	// returns, so b can go back to the pool after.
	_, _ = w.Write(b)
}

// bufPool holds the buffers responses (a timeline page is ~15 KB) are
// written into, twice on the fast path (fastInbox, writeResponse): without
// it they are a fair part of the bytes a request allocates, and so of how
// often the GC runs.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf is the largest buffer put back: one outsized response does
// not pin its buffer for the life of the pool.
const maxPooledBuf = 256 << 10

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// isDataOnly reports whether json.Marshal would write resp as
// {"data":...} alone: no errors, no extensions, no incremental delivery.
func isDataOnly(resp *graphql.Response) bool {
	return len(resp.Errors) == 0 && resp.Label == "" && resp.Path == nil && resp.HasNext == nil && len(resp.Extensions) == 0
}

// appendDataResponse appends {"data":data} to dst as json.Marshal writes a
// graphql.Response holding data alone, without its cost: json.Marshal
// checks and compacts a json.RawMessage with a byte-by-byte state machine,
// the largest cost of encoding a page. gqlgen writes data itself, as
// compact JSON, so this only does what compacting would change: it drops
// whitespace outside strings and escapes <, >, & and U+2028/U+2029 as
// json.Marshal does (its HTML escaping).
func appendDataResponse(dst, data []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, `{"data":`...)
	inString, escaped := false, false
	start := 0
	for i := 0; i < len(data); i++ {
		// Skip, a table lookup a byte, the run of bytes the switch below
		// would pass over in this state (most of a page), instead of
		// running the switch on each.
		if !escaped {
			skip := &dataOutside
			if inString {
				skip = &dataInString
			}
			for i < len(data) && skip[data[i]] {
				i++
			}
			if i == len(data) {
				break
			}
		}
		c := data[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, data[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && data[i+2]&^1 == 0xA8:
			dst = append(dst, data[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[data[i+2]&0xF])
			i += 2
			start = i + 1
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, data[start:i]...)
			start = i + 1
		}
	}
	dst = append(dst, data[start:]...)
	return append(dst, '}')
}

// dataOutside and dataInString are the bytes appendDataResponse copies as
// they are and that leave its state alone, outside a string and inside one
// (not after a backslash): all but the ones its switch acts on.
var dataOutside, dataInString = dataBytes(`<>&"` + " \t\n\r\xE2"), dataBytes(`<>&"\` + "\xE2")

func dataBytes(special string) (t [256]bool) {
	for i := range t {
		t[i] = true
	}
	for i := 0; i < len(special); i++ {
		t[special[i]] = false
	}
	return t
}

// CodeSubscriptionOverHTTP is the extensions.code of a subscription sent by
// plain HTTP, which answers once: subscriptions need a websocket.
const CodeSubscriptionOverHTTP = "SUBSCRIPTION_OVER_HTTP"

func init() { errcode.RegisterErrorType(CodeSubscriptionOverHTTP, errcode.KindProtocol) }

type plainHTTPKey struct{}

// withPlainHTTP marks ctx as an operation that came by plain HTTP.
func withPlainHTTP(ctx context.Context) context.Context {
	return context.WithValue(ctx, plainHTTPKey{}, true)
}

// httpSubscriptions refuses a subscription that came by plain HTTP before
// it runs. Run, it would hold the request open until the first event and
// answer with that event alone; in a batch it would hold up the operations
// after it.
type httpSubscriptions struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = httpSubscriptions{}

// ExtensionName implements graphql.HandlerExtension.
func (httpSubscriptions) ExtensionName() string { return "HTTPSubscriptions" }

// Validate implements graphql.HandlerExtension.
func (httpSubscriptions) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext implements graphql.OperationContextMutator.
func (httpSubscriptions) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation == nil || opCtx.Operation.Operation != ast.Subscription || ctx.Value(plainHTTPKey{}) == nil {
		return nil
	}
	err := gqlerror.Errorf("subscriptions need a websocket: open one on /graphql with the graphql-transport-ws protocol")
	errcode.Set(err, CodeSubscriptionOverHTTP)
	return err
}

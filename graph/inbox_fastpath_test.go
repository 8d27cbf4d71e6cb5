package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// postRaw sends a GraphQL request to h as the holder of token and returns the
// response body.
func postRaw(t testing.TB, h http.Handler, tokens interface {
	Verify(string) (store.Session, error)
}, token, query string, vars map[string]any) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return fmt.Sprintf("%d %s", rec.Code, rec.Body.String())
}

// TestInboxFastPath checks that the inbox fast path answers exactly as
// gqlgen's executor does, byte for byte, for selections it writes and for
// those it leaves to gqlgen, and that it reads the store once.
func TestInboxFastPath(t *testing.T) { forStrategies(t, testInboxFastPath) }

func testInboxFastPath(t *testing.T) {
	e := newEnv(t, nil)
	reader := timelineOfFive(t, e, 12, "message %d")
	odd, _ := mustSignUp(t, e, "odd")
	var oddUser struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	e.mustExec(t, "", `{ user(handle: "odd") { id } }`, nil, &oddUser)
	mustFollow(t, e, reader, oddUser.User.ID)
	// Text that needs escaping, and an edited message.
	mustPost(t, e, odd, "quote \" backslash \\ tab \t newline \n return \r unicode é ✓ \u2028")
	edited := mustPost(t, e, odd, "before the edit")
	e.mustExec(t, odd, `mutation($id: ID!) { editMessage(id: $id, text: "after the edit") { id } }`, map[string]any{"id": edited}, nil)
	// A liked message, a reply to it, and mentions.
	e.mustExec(t, reader, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": edited}, nil)
	mustReply(t, e, odd, "a reply mentioning @odd and @nobody_at_all", edited)
	// A repost, by odd, of a message by a user the reader does not follow,
	// which the reader reposts too.
	far, _ := mustSignUp(t, e, "far")
	farMsg := mustPost(t, e, far, "reposted from afar")
	mustRepost(t, e, odd, farMsg)
	mustRepost(t, e, reader, farMsg)
	waitFanOut(t, e)
	empty, _ := mustSignUp(t, e, "nobody")

	var page struct {
		Inbox struct {
			PageInfo struct {
				EndCursor string `json:"endCursor"`
			} `json:"pageInfo"`
		} `json:"inbox"`
	}
	e.mustExec(t, reader, `{ inbox(first: 3) { pageInfo { endCursor } } }`, nil, &page)
	cursor := page.Inbox.PageInfo.EndCursor

	slow := withViewer(e.tokens, graph.NewServerWithoutFastPaths(e.cfg))
	fast := withViewer(e.tokens, e.srv)
	const home = `query Home { inbox(first: 50) { totalCount unreadCount edges { cursor node { id text createdAt author { handle displayName } } } pageInfo { hasNextPage endCursor } } }`
	for _, tc := range []struct {
		name  string
		token string
		query string
		vars  map[string]any
		fast  bool // the fast path answers it alone
	}{
		{"Home", reader, home, nil, true},
		{"Everything", reader, `{ inbox { __typename totalCount unreadCount rebuilding
			edges { __typename cursor deliveredAt node { __typename id text kind createdAt editedAt
				author { __typename id handle displayName createdAt followerCount followingCount messageCount } } }
			pageInfo { __typename hasNextPage hasPreviousPage startCursor endCursor } } }`, nil, true},
		{"AliasesAndFragments", reader, `query { a: inbox(first: 4) { n: totalCount edges { ...E node { ... on Node { id } t: text } } edges { cursor } }
			pageInfo: inbox(first: 2) { pageInfo { ...P } } }
			fragment E on InboxEdge { c: cursor node { author { ... on User { handle } id } } }
			fragment P on PageInfo { hasNextPage endCursor }`, nil, true},
		{"SkipInclude", reader, `query($yes: Boolean!) { inbox(first: 5) { totalCount @skip(if: $yes) edges { cursor @include(if: $yes) node { text @skip(if: $yes) id } } } }`,
			map[string]any{"yes": true}, true},
		{"Variables", reader, `query($n: Int, $c: String) { inbox(first: $n, after: $c) { edges { cursor node { text } } pageInfo { hasNextPage startCursor } } }`,
			map[string]any{"n": 4, "c": cursor}, true},
		{"Backward", reader, `query($c: String!) { inbox(last: 2, before: $c) { edges { cursor } pageInfo { hasPreviousPage hasNextPage startCursor endCursor } } }`,
			map[string]any{"c": cursor}, true},
		{"FirstZero", reader, `{ inbox(first: 0) { edges { cursor } pageInfo { startCursor endCursor } } }`, nil, true},
		{"Empty", empty, `{ inbox { totalCount edges { cursor } pageInfo { hasNextPage startCursor } } }`, nil, true},
		{"Typename", reader, `{ __typename inbox(first: 1) { totalCount } }`, nil, true},
		{"Social", reader, `{ inbox(first: 10) { edges { node { id likeCount replyCount viewerHasLiked
			mentions { __typename id handle } author { handle } } } } }`, nil, true},
		{"Reposts", reader, `{ inbox(first: 10) { edges { cursor repostedBy { __typename id handle } node { id kind text repostCount viewerHasReposted
			author { handle } } } } }`, nil, true},
		{"OtherFields", reader, `{ inbox(first: 3) { edges { node { id replyTo { id } author { viewerFollows } } } } }`, nil, false},
		{"Deferred", reader, `{ inbox(first: 3) { edges { cursor ... @defer { node { id } } } } }`, nil, false},
		{"ErrUnauthenticated", "", home, nil, false},
		{"ErrCursor", reader, `{ inbox(first: 3, after: "nope") { totalCount } }`, nil, false},
		{"ErrPageSize", reader, `{ inbox(first: 1000) { totalCount } }`, nil, false},
		{"ErrBothDirections", reader, `{ inbox(first: 1, last: 1) { totalCount } }`, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			postRaw(t, fast, e.tokens, tc.token, tc.query, tc.vars) // the cache strategy fills its cache
			e.backend.Reset()
			want := postRaw(t, slow, e.tokens, tc.token, tc.query, tc.vars)
			_, slowCalls := e.backend.Snapshot()
			e.backend.Reset()
			got := postRaw(t, fast, e.tokens, tc.token, tc.query, tc.vars)
			_, fastCalls := e.backend.Snapshot()
			assert.Equal(t, want, got)
			if tc.fast {
				// A fallback would read the inbox twice.
				assert.Equal(t, slowCalls, fastCalls, "store calls")
			}
		})
	}
	require.Contains(t, postRaw(t, fast, e.tokens, reader, home, nil), `after the edit`)
	require.Contains(t, postRaw(t, fast, e.tokens, reader, `{ inbox(first: 10) { edges { repostedBy { handle } node { text repostCount viewerHasReposted } } } }`, nil),
		`{"repostedBy":{"handle":"odd"},"node":{"text":"reposted from afar","repostCount":2,"viewerHasReposted":true}}`)
}

// authorFails fails FindUsersByIDs for one user, as a storage error would.
type authorFails struct {
	storage.Backend
	id store.ID
}

func (b authorFails) FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	users, err := b.Backend.FindUsersByIDs(ctx, ids)
	for i, id := range ids {
		if id == b.id && err == nil {
			users[i] = nil
		}
	}
	return users, err
}

// TestInboxFastPath_AuthorError checks that an author that fails to load on
// one edge gets the response gqlgen gives: the error at that edge's path,
// and null propagated up to the nearest nullable field (here data).
func TestInboxFastPath_AuthorError(t *testing.T) { forBackends(t, testInboxFastPathAuthorError) }

func testInboxFastPathAuthorError(t *testing.T) {
	e := newEnv(t, nil)
	reader := timelineOfFive(t, e, 10, "message %d")
	var u struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	e.mustExec(t, "", `{ user(handle: "author3") { id } }`, nil, &u)
	id, err := graph.ParseUserIDForTest(u.User.ID)
	require.NoError(t, err)

	svc := service.NewService(authorFails{Backend: e.backend, id: id}, e.hub, service.Options{})
	cfg := e.cfg
	cfg.Service = svc
	const q = `{ inbox(first: 10) { totalCount edges { node { text author { handle } } } } }`
	want := postRaw(t, withViewer(e.tokens, graph.NewServerWithoutFastPaths(cfg)), e.tokens, reader, q, nil)
	got := postRaw(t, withViewer(e.tokens, graph.NewServer(cfg)), e.tokens, reader, q, nil)
	// gqlgen resolves the edges concurrently, so the errors come in any
	// order.
	assert.Equal(t, sortedErrors(t, want), sortedErrors(t, got))
	assert.Contains(t, got, `"data":null`)
	assert.Contains(t, got, `"path":["inbox","edges",`)
	assert.Contains(t, got, `"NOT_FOUND"`)
}

// sortedErrors returns a response (status, then body) with its errors
// sorted, for comparing responses whose errors gqlgen reports in the order
// its goroutines happen to finish.
func sortedErrors(t testing.TB, resp string) string {
	t.Helper()
	status, body, _ := strings.Cut(resp, " ")
	var r map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	var errs []json.RawMessage
	if raw, ok := r["errors"]; ok {
		require.NoError(t, json.Unmarshal(raw, &errs))
	}
	slices.SortFunc(errs, func(a, b json.RawMessage) int { return strings.Compare(string(a), string(b)) })
	b, err := json.Marshal(errs)
	require.NoError(t, err)
	r["errors"] = b
	out, err := json.Marshal(r)
	require.NoError(t, err)
	return status + " " + string(out)
}

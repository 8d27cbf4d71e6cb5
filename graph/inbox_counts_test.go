package graph_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store/service"
)

func TestInbox_CountsOnlyWhenAsked(t *testing.T) { forStrategies(t, testInbox_CountsOnlyWhenAsked) }

// testInbox_CountsOnlyWhenAsked checks that a home page counts its inbox
// only when the selection asks for totalCount, unreadCount or rebuilding:
// under read and cache counting is a count of every followee's outbox. A
// page without them has the same items; one with them, however they are
// selected (a fragment, @include), has exact counts.
func testInbox_CountsOnlyWhenAsked(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	mustFollow(t, e, alice, bobID)
	mustFollow(t, e, alice, carolID)
	mustPost(t, e, bob, "b1")
	mustPost(t, e, carol, "c1")
	mustPost(t, e, bob, "b2")
	waitFanOut(t, e)
	e.mustExec(t, alice, `mutation { markInboxRead }`, nil, nil)
	mustPost(t, e, carol, "c2")
	waitFanOut(t, e)
	want := []string{"c2", "b2", "c1", "b1"}

	type page struct {
		Inbox struct {
			TotalCount  *int       `json:"totalCount"`
			UnreadCount *int       `json:"unreadCount"`
			Rebuilding  *bool      `json:"rebuilding"`
			Edges       []homeEdge `json:"edges"`
		} `json:"inbox"`
	}
	// read runs q and returns its page and the CountOutbox calls it made.
	read := func(q string, vars map[string]any) (page, int64) {
		t.Helper()
		e.backend.Reset()
		var p page
		e.mustExec(t, alice, q, vars, &p)
		n, _ := e.backend.Snapshot()
		return p, n["CountOutbox"]
	}
	outboxCounted := strategyOf(t) == service.StrategyRead || strategyOf(t) == service.StrategyCache

	for name, q := range map[string]string{
		// The fast path writes this selection.
		"fast": `{ inbox(first: 10) { edges { node { text author { handle } } } pageInfo { hasNextPage } } }`,
		// replyTo is outside the fast path: gqlgen resolves the page.
		"gqlgen": `{ inbox(first: 10) { edges { node { text replyTo { id } } } } }`,
	} {
		p, counted := read(q, nil)
		assert.Equal(t, want, edgeTexts(p.Inbox.Edges), name)
		assert.Nil(t, p.Inbox.TotalCount, name)
		assert.Zero(t, counted, "%s: no count without totalCount or unreadCount", name)
	}

	const withInclude = `query($c: Boolean!) { inbox(first: 10) { totalCount @include(if: $c) unreadCount @include(if: $c) edges { node { text } } } }`
	p, counted := read(withInclude, map[string]any{"c": false})
	assert.Equal(t, want, edgeTexts(p.Inbox.Edges))
	assert.Zero(t, counted, "no count when @include leaves the counts out")

	for name, q := range map[string]string{
		"fields":   `{ inbox(first: 10) { totalCount unreadCount edges { node { text } } } }`,
		"fragment": `{ inbox(first: 10) { ...counts edges { node { text replyTo { id } } } } } fragment counts on InboxConnection { totalCount unreadCount }`,
		"include":  withInclude,
	} {
		p, counted := read(q, map[string]any{"c": true})
		assert.Equal(t, want, edgeTexts(p.Inbox.Edges), name)
		require.NotNil(t, p.Inbox.TotalCount, name)
		require.NotNil(t, p.Inbox.UnreadCount, name)
		assert.Equal(t, 4, *p.Inbox.TotalCount, name)
		assert.Equal(t, 1, *p.Inbox.UnreadCount, name)
		if outboxCounted {
			assert.Positive(t, counted, "%s: counted in the followees' outboxes", name)
		}
	}

	// Each count alone is exact too.
	p, _ = read(`{ inbox(first: 10) { totalCount edges { node { text } } } }`, nil)
	require.NotNil(t, p.Inbox.TotalCount)
	assert.Equal(t, 4, *p.Inbox.TotalCount)
	p, _ = read(`{ inbox(first: 10) { unreadCount edges { node { text } } } }`, nil)
	require.NotNil(t, p.Inbox.UnreadCount)
	assert.Equal(t, 1, *p.Inbox.UnreadCount)

	p, _ = read(`{ inbox(first: 1) { rebuilding edges { node { text } } } }`, nil)
	require.NotNil(t, p.Inbox.Rebuilding)
	assert.False(t, *p.Inbox.Rebuilding)
	assert.Equal(t, want[:1], edgeTexts(p.Inbox.Edges))
}

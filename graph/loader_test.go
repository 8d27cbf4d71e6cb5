package graph_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store/service"
)

// TestLoaders_InboxBatching proves a home timeline page costs a fixed number
// of backend calls whatever its size: the strategy's reads of the timeline
// and its counts (timelineCalls), FindMessagesByKeys (both in
// Service.Inbox) and one FindUsersByIDs for all the authors.
func TestLoaders_InboxBatching(t *testing.T) { forStrategies(t, testLoaders_InboxBatching) }

// timelineCalls are the backend calls a page of the timeline costs under
// the strategy besides loading its messages and their authors, with its
// counts if counts: one read for the stored layouts; for fan-out on read
// the followees and the users hidden from the reader (blocked, muted,
// blocking: two reads), their merged outboxes, and for the counts the read
// mark, their message counts and a count above the read mark; for the
// cache (a hit) the cache instead of the outboxes.
func timelineCalls(st service.Strategy, counts bool, more map[string]int64) map[string]int64 {
	var calls map[string]int64
	switch st {
	case service.StrategyRead:
		calls = map[string]int64{"ListFollowing": 1, "ListFiltered": 1, "ListBlockers": 1, "FindOutbox": 1}
	case service.StrategyCache:
		calls = map[string]int64{"ReadInboxCache": 1, "ListFollowing": 1, "ListFiltered": 1, "ListBlockers": 1, "FindOutbox": 1}
	default:
		calls = map[string]int64{"ReadInbox": 1, "FindOutbox": 1}
	}
	// Every strategy but read reads the viewer's own messages from their
	// outbox beside the inbox (FindOutbox): read merges the outbox into
	// the followees' read. For the counts, read and cache read the read
	// mark (ReadInbox) and count the followees' messages the timeline
	// shows, in all and unread (CountOutbox twice); the stored layouts'
	// read gives them.
	if counts && (st == service.StrategyRead || st == service.StrategyCache) {
		calls["ReadInbox"], calls["CountOutbox"] = 1, 2
	}
	for k, n := range more {
		calls[k] += n
	}
	return calls
}

// timelineSnapshot is the backend's calls since the last reset, without
// hybrid's refresh of the authors with pulled messages: it happens at most
// once a second, whichever request comes then.
func timelineSnapshot(e *env) (map[string]int64, int64) {
	calls, total := e.backend.Snapshot()
	if n, ok := calls["ListPullAuthors"]; ok {
		delete(calls, "ListPullAuthors")
		total -= n
	}
	return calls, total
}

func sum(calls map[string]int64) int64 {
	var n int64
	for _, c := range calls {
		n += c
	}
	return n
}

// timelineOfFive signs up a reader who follows five authors, has the
// authors post n messages in turn (texts from format and the message's
// number), waits for fan-out and returns the reader's token.
func timelineOfFive(t testing.TB, e *env, n int, format string) string {
	t.Helper()
	reader, _ := mustSignUp(t, e, "reader")
	var authors []string
	for i := range 5 {
		tok, id := mustSignUp(t, e, fmt.Sprintf("author%d", i))
		mustFollow(t, e, reader, id)
		authors = append(authors, tok)
	}
	for i := range n {
		mustPost(t, e, authors[i%len(authors)], fmt.Sprintf(format, i))
	}
	waitFanOut(t, e)
	return reader
}

func testLoaders_InboxBatching(t *testing.T) {
	e := newEnv(t, nil)
	reader := timelineOfFive(t, e, 60, "message %d")
	st := strategyOf(t)
	// The cache strategy builds the cache at the first read; measure hits.
	e.mustExec(t, reader, `{ inbox(first: 1) { totalCount } }`, nil, nil)

	const q = `query($first: Int) { inbox(first: $first) {
		totalCount unreadCount
		edges { node { id text author { handle displayName } } } } }`
	for _, first := range []int{5, 50} {
		t.Run(fmt.Sprintf("First%d", first), func(t *testing.T) {
			e.backend.Reset()
			var r struct {
				Inbox struct {
					TotalCount int `json:"totalCount"`
					Edges      []struct {
						Node struct {
							Text   string `json:"text"`
							Author struct {
								Handle string `json:"handle"`
							} `json:"author"`
						} `json:"node"`
					} `json:"edges"`
				} `json:"inbox"`
			}
			e.mustExec(t, reader, q, map[string]any{"first": first}, &r)
			require.Len(t, r.Inbox.Edges, first)
			assert.Equal(t, 60, r.Inbox.TotalCount)
			assert.Equal(t, "message 59", r.Inbox.Edges[0].Node.Text)
			assert.Equal(t, "author4", r.Inbox.Edges[0].Node.Author.Handle)

			calls, total := timelineSnapshot(e)
			t.Logf("inbox(first: %d): %d backend calls %v", first, total, calls)
			want := timelineCalls(st, true, map[string]int64{"FindMessagesByKeys": 1, "FindUsersByIDs": 1})
			assert.Equal(t, want, calls)
			assert.Equal(t, sum(want), total)
		})
	}

	// Backward pages cost the same calls: last: 5 before "message 50", and
	// last: 50 before "message 9" (under cache, the oldest cached item).
	var all struct {
		Inbox inbox `json:"inbox"`
	}
	e.mustExec(t, reader, `{ inbox(first: 60) { edges { cursor node { text } } } }`, nil, &all)
	cursorOf := map[string]string{}
	for _, edge := range all.Inbox.Edges {
		cursorOf[edge.Node.Text] = edge.Cursor
	}
	const qb = `query($last: Int, $before: String) { inbox(last: $last, before: $before) {
		totalCount unreadCount
		edges { node { id text author { handle displayName } } } } }`
	for _, tc := range []struct {
		last          int
		before, first string
	}{{5, "message 50", "message 55"}, {50, "message 9", "message 59"}} {
		t.Run(fmt.Sprintf("Last%d", tc.last), func(t *testing.T) {
			e.backend.Reset()
			var r struct {
				Inbox inbox `json:"inbox"`
			}
			e.mustExec(t, reader, qb, map[string]any{"last": tc.last, "before": cursorOf[tc.before]}, &r)
			require.Len(t, r.Inbox.Edges, tc.last)
			assert.Equal(t, 60, r.Inbox.TotalCount)
			assert.Equal(t, tc.first, r.Inbox.Edges[0].Node.Text)
			calls, total := timelineSnapshot(e)
			t.Logf("inbox(last: %d): %d backend calls %v", tc.last, total, calls)
			want := timelineCalls(st, true, map[string]int64{"FindMessagesByKeys": 1, "FindUsersByIDs": 1})
			assert.Equal(t, want, calls)
		})
	}

	t.Run("WithViewerFollows", func(t *testing.T) {
		e.backend.Reset()
		e.mustExec(t, reader, `{ inbox(first: 50) { edges { node { author { handle viewerFollows } replyTo { id } } } } }`, nil, nil)
		calls, _ := timelineSnapshot(e)
		assert.Equal(t, timelineCalls(st, false, map[string]int64{"FindMessagesByKeys": 1, "FindUsersByIDs": 1, "FindFollowing": 1}), calls)
	})

	t.Run("Followers", func(t *testing.T) {
		e.backend.Reset()
		e.mustExec(t, reader, `{ viewer { following(first: 50) { edges { node { handle viewerFollows messageCount } } } } }`, nil, nil)
		calls, _ := e.backend.Snapshot()
		// viewer: FindUsersByIDs; following: ListFollowing + FindUsersByIDs;
		// viewerFollows: FindFollowing.
		assert.Equal(t, map[string]int64{"FindUsersByIDs": 2, "ListFollowing": 1, "FindFollowing": 1}, calls)
	})

	t.Run("FreshPerOperation", func(t *testing.T) {
		e.backend.Reset()
		for range 3 {
			e.mustExec(t, reader, `{ viewer { handle } }`, nil, nil)
		}
		calls, _ := e.backend.Snapshot()
		assert.Equal(t, int64(3), calls["FindUsersByIDs"], "no caching across operations")
	})
}

// TestLoaders_InboxReplies proves the messages a page's replies answer, and
// their authors, cost one batch call each whatever the page size, and that
// every message lookup names the author (so a sharded backend asks one
// shard): the page's messages by their inbox entries, the replied-to ones by
// ReplyToAuthorID.
func TestLoaders_InboxReplies(t *testing.T) { forStrategies(t, testLoaders_InboxReplies) }

func testLoaders_InboxReplies(t *testing.T) {
	e := newEnv(t, nil)
	reader, _ := mustSignUp(t, e, "reader")
	// The outsider's messages are older than any page below; the reader
	// follows the outsider so that replies to them come home.
	outsider, outsiderID := mustSignUp(t, e, "outsider")
	var outside []string
	for i := range 10 {
		outside = append(outside, mustPost(t, e, outsider, fmt.Sprintf("outside %d", i)))
	}
	mustFollow(t, e, reader, outsiderID)
	var authors []string
	for i := range 5 {
		tok, id := mustSignUp(t, e, fmt.Sprintf("author%d", i))
		mustFollow(t, e, reader, id)
		authors = append(authors, tok)
	}
	// Message i is a reply to an outsider's message (i%3 == 0), a reply to
	// message i-1 (i%3 == 1), or a post.
	type target struct{ text, author string }
	want := map[string]*target{}
	var ids []string
	for i := range 60 {
		text, tok := fmt.Sprintf("message %d", i), authors[i%len(authors)]
		switch {
		case i%3 == 0:
			ids = append(ids, mustReply(t, e, tok, text, outside[i%10]))
			want[text] = &target{fmt.Sprintf("outside %d", i%10), "outsider"}
		case i%3 == 1:
			ids = append(ids, mustReply(t, e, tok, text, ids[i-1]))
			want[text] = &target{fmt.Sprintf("message %d", i-1), fmt.Sprintf("author%d", (i-1)%len(authors))}
		default:
			ids = append(ids, mustPost(t, e, tok, text))
			want[text] = nil
		}
	}
	// Replies to a deleted message show replyTo null.
	e.mustExec(t, outsider, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": outside[0]}, nil)
	want["message 0"], want["message 30"] = nil, nil
	waitFanOut(t, e)
	st := strategyOf(t)
	e.mustExec(t, reader, `{ inbox(first: 1) { totalCount } }`, nil, nil) // builds the cache

	const q = `query($first: Int) { inbox(first: $first) {
		edges { node { id text author { handle } replyTo { id text author { handle } } } } } }`
	for _, first := range []int{5, 50} {
		t.Run(fmt.Sprintf("First%d", first), func(t *testing.T) {
			e.backend.Reset()
			var r struct {
				Inbox struct {
					Edges []struct {
						Node struct {
							Text    string `json:"text"`
							ReplyTo *struct {
								ID     string `json:"id"`
								Text   string `json:"text"`
								Author struct {
									Handle string `json:"handle"`
								} `json:"author"`
							} `json:"replyTo"`
						} `json:"node"`
					} `json:"edges"`
				} `json:"inbox"`
			}
			e.mustExec(t, reader, q, map[string]any{"first": first}, &r)
			require.Len(t, r.Inbox.Edges, first)
			var replies int
			for _, edge := range r.Inbox.Edges {
				n := edge.Node
				w, ok := want[n.Text]
				require.True(t, ok, "unexpected message %q", n.Text)
				if w == nil {
					assert.Nil(t, n.ReplyTo, "%s", n.Text)
					continue
				}
				replies++
				if assert.NotNil(t, n.ReplyTo, "%s", n.Text) {
					assert.Equal(t, *w, target{n.ReplyTo.Text, n.ReplyTo.Author.Handle}, "%s", n.Text)
					assert.NotEmpty(t, n.ReplyTo.ID)
				}
			}
			require.NotZero(t, replies)

			calls, total := timelineSnapshot(e)
			t.Logf("inbox(first: %d) with replies: %d backend calls %v", first, total, calls)
			// FindMessagesByKeys: the page (Service.Inbox), then the messages
			// replied to that are not on it, shown by the visibility rule
			// of their authors: one FindBlockers (none is private).
			assert.Equal(t, timelineCalls(st, false, map[string]int64{"FindMessagesByKeys": 2, "FindUsersByIDs": 1, "FindBlockers": 1}), calls)
			assert.Zero(t, e.backend.NoAuthor(), "every message lookup names the author")
		})
	}

	t.Run("WithViewerFollows", func(t *testing.T) {
		e.backend.Reset()
		e.mustExec(t, reader, `{ inbox(first: 50) { edges { node { author { viewerFollows } replyTo { id author { handle viewerFollows } } } } } }`, nil, nil)
		calls, _ := timelineSnapshot(e)
		assert.Equal(t, timelineCalls(st, false, map[string]int64{"FindMessagesByKeys": 2, "FindUsersByIDs": 1, "FindFollowing": 1, "FindBlockers": 1}), calls)
	})
}

// TestLoaders_InboxReposts proves a page holding reposts costs one more
// call than a page without, whatever its size: one FindMessagesByKeys for
// the messages reposted (in Service.Inbox), their authors and the reposters
// joining the page's one FindUsersByIDs, and viewerHasReposted one
// FindReposts; every message lookup names the author.
func TestLoaders_InboxReposts(t *testing.T) { forStrategies(t, testLoaders_InboxReposts) }

func testLoaders_InboxReposts(t *testing.T) {
	e := newEnv(t, nil)
	reader, _ := mustSignUp(t, e, "reader")
	// The reader does not follow the outsider, whose messages come home
	// only as the authors' reposts.
	outsider, _ := mustSignUp(t, e, "outsider")
	var outside []string
	for i := range 31 {
		outside = append(outside, mustPost(t, e, outsider, fmt.Sprintf("outside %d", i)))
	}
	var authors []string
	for i := range 5 {
		tok, id := mustSignUp(t, e, fmt.Sprintf("author%d", i))
		mustFollow(t, e, reader, id)
		authors = append(authors, tok)
	}
	// Every other item is a repost of an outsider's message.
	for i := range 60 {
		tok := authors[i%len(authors)]
		if i%2 == 0 {
			mustRepost(t, e, tok, outside[i/2])
		} else {
			mustPost(t, e, tok, fmt.Sprintf("message %d", i))
		}
	}
	mustRepost(t, e, reader, outside[30])
	waitFanOut(t, e)
	st := strategyOf(t)
	e.mustExec(t, reader, `{ inbox(first: 1) { totalCount } }`, nil, nil) // builds the cache

	const q = `query($first: Int) { inbox(first: $first) {
		edges { cursor repostedBy { handle } node { id text repostCount viewerHasReposted author { handle } } } } }`
	for _, first := range []int{5, 50} {
		t.Run(fmt.Sprintf("First%d", first), func(t *testing.T) {
			e.backend.Reset()
			var r struct {
				Inbox struct {
					Edges []repostEdge `json:"edges"`
				} `json:"inbox"`
			}
			e.mustExec(t, reader, q, map[string]any{"first": first}, &r)
			require.Len(t, r.Inbox.Edges, first)
			var reposts int
			for _, edge := range r.Inbox.Edges {
				if edge.RepostedBy == nil {
					continue
				}
				reposts++
				assert.Equal(t, "outsider", edge.Node.Author.Handle, "a repost shows the message reposted")
				assert.Contains(t, edge.Node.Text, "outside ")
			}
			require.NotZero(t, reposts)
			assert.Equal(t, "reader", r.Inbox.Edges[0].RepostedBy.Handle, "the reader's own repost, newest")
			assert.True(t, r.Inbox.Edges[0].Node.ViewerHasReposted)

			calls, total := timelineSnapshot(e)
			t.Logf("inbox(first: %d) with reposts: %d backend calls %v", first, total, calls)
			// FindMessagesByKeys: the page, then the messages reposted.
			// The reader's own repost is at home by its mark, made when
			// it was reposted: no check of the follow graph. The messages
			// reposted pass the visibility rule (one FindBlockers; none is
			// private), whose read of their authors loads the page's
			// users too.
			assert.Equal(t, timelineCalls(st, false, map[string]int64{"FindMessagesByKeys": 2, "FindUsersByIDs": 1, "FindReposts": 1, "FindBlockers": 1}), calls)
			assert.Zero(t, e.backend.NoAuthor(), "every message lookup names the author")
		})
	}
}

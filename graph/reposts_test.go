package graph_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/store"
)

// repostResult is what repost and unrepost return, as a client reads it.
type repostResult struct {
	ID                string `json:"id"`
	RepostCount       int    `json:"repostCount"`
	ViewerHasReposted bool   `json:"viewerHasReposted"`
}

// repostEdge is an inbox edge as a client showing reposts reads it.
type repostEdge struct {
	Cursor     string `json:"cursor"`
	RepostedBy *struct {
		Handle string `json:"handle"`
	} `json:"repostedBy"`
	Node struct {
		ID                string `json:"id"`
		Text              string `json:"text"`
		Kind              string `json:"kind"`
		RepostCount       int    `json:"repostCount"`
		ViewerHasReposted bool   `json:"viewerHasReposted"`
		Author            struct {
			Handle string `json:"handle"`
		} `json:"author"`
	} `json:"node"`
}

const repostPageQuery = `{ inbox(first: 20) { edges { cursor repostedBy { handle }
	node { id text kind repostCount viewerHasReposted author { handle } } } } }`

// repostPage returns the token's user's inbox page as repostPageQuery reads it.
func repostPage(t *testing.T, e *env, token string) []repostEdge {
	t.Helper()
	var r struct {
		Inbox struct {
			Edges []repostEdge `json:"edges"`
		} `json:"inbox"`
	}
	e.mustExec(t, token, repostPageQuery, nil, &r)
	return r.Inbox.Edges
}

// repostEvent is an inbox event as a client showing reposts reads it.
type repostEvent struct {
	InboxEvents struct {
		Type             string      `json:"type"`
		Edge             *repostEdge `json:"edge"`
		RemovedMessageID *string     `json:"removedMessageId"`
		DeletedMessageID *string     `json:"deletedMessageId"`
		MessageID        *string     `json:"messageId"`
		Message          *struct {
			ID string `json:"id"`
		} `json:"message"`
	} `json:"inboxEvents"`
}

const repostEventsQuery = `subscription { inboxEvents { type edge { cursor repostedBy { handle }
	node { id text kind repostCount viewerHasReposted author { handle } } }
	removedMessageId deletedMessageId messageId message { id } } }`

func TestReposts(t *testing.T) { forStrategies(t, testReposts) }

// testReposts follows a repost from the reposter to a follower who follows
// the reposter but not the author of the message reposted: the follower's
// page and live events show the message with its reposter, and the
// unrepost takes the item away.
func testReposts(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	dave, _ := mustSignUp(t, e, "dave")
	mustFollow(t, e, carol, bobID)
	msg := mustPost(t, e, alice, "worth repeating")
	waitFanOut(t, e)

	setRepost := func(token, field, id string) repostResult {
		t.Helper()
		var r map[string]repostResult
		e.mustExec(t, token, `mutation($id: ID!) { `+field+`(messageId: $id) { id repostCount viewerHasReposted } }`, map[string]any{"id": id}, &r)
		return r[field]
	}
	sub := e.client.Websocket(repostEventsQuery, opts(carol, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	assert.Equal(t, repostResult{ID: msg, RepostCount: 1, ViewerHasReposted: true}, setRepost(bob, "repost", msg))
	assert.Equal(t, repostResult{ID: msg, RepostCount: 1, ViewerHasReposted: true}, setRepost(bob, "repost", msg), "idempotent")

	ev := nextOf[repostEvent](t, sub).InboxEvents
	require.Equal(t, "ADDED", ev.Type)
	require.NotNil(t, ev.Edge, "the repost's edge")
	waitFanOut(t, e)
	page := repostPage(t, e, carol)
	require.Len(t, page, 1, "the repost reached bob's follower")
	item := page[0]
	require.NotNil(t, item.RepostedBy)
	assert.Equal(t, "bob", item.RepostedBy.Handle)
	assert.Equal(t, msg, item.Node.ID, "the node is the message reposted")
	assert.Equal(t, "worth repeating", item.Node.Text)
	assert.Equal(t, "POST", item.Node.Kind)
	assert.Equal(t, "alice", item.Node.Author.Handle)
	assert.Equal(t, 1, item.Node.RepostCount)
	assert.False(t, item.Node.ViewerHasReposted, "carol has not reposted it")
	assert.Equal(t, item, *ev.Edge, "the live edge is the page's, cursor included")
	require.NotNil(t, ev.Message)
	assert.Equal(t, msg, ev.Message.ID)
	require.NotNil(t, ev.MessageID)
	assert.Equal(t, msg, *ev.MessageID, "messageId is the edge's node, as edge.node.id")

	// bob's own messages list the repost itself.
	var bobs struct {
		User struct {
			Messages struct {
				Edges []struct {
					Node struct {
						ID       string `json:"id"`
						Kind     string `json:"kind"`
						Text     string `json:"text"`
						RepostOf *struct {
							ID string `json:"id"`
						} `json:"repostOf"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"messages"`
		} `json:"user"`
	}
	e.mustExec(t, "", `{ user(handle: "bob") { messages(first: 5) { edges { node { id kind text repostOf { id } } } } } }`, nil, &bobs)
	require.Len(t, bobs.User.Messages.Edges, 1)
	repost := bobs.User.Messages.Edges[0].Node
	assert.Equal(t, "REPOST", repost.Kind)
	assert.Empty(t, repost.Text, "a repost has no text of its own")
	require.NotNil(t, repost.RepostOf)
	assert.Equal(t, msg, repost.RepostOf.ID)
	var orig struct {
		Node struct {
			RepostOf *struct{ ID string } `json:"repostOf"`
		} `json:"node"`
	}
	e.mustExec(t, "", `query($id: ID!) { node(id: $id) { ... on Message { repostOf { id } } } }`, map[string]any{"id": msg}, &orig)
	assert.Nil(t, orig.Node.RepostOf, "a post reposts nothing")

	t.Run("a repost of a repost, a reply to and a like of one apply to its message", func(t *testing.T) {
		assert.Equal(t, repostResult{ID: msg, RepostCount: 2, ViewerHasReposted: true}, setRepost(dave, "repost", repost.ID))
		var liked struct {
			Like struct {
				ID        string `json:"id"`
				LikeCount int    `json:"likeCount"`
			} `json:"like"`
		}
		e.mustExec(t, dave, `mutation($id: ID!) { like(messageId: $id) { id likeCount } }`, map[string]any{"id": repost.ID}, &liked)
		assert.Equal(t, msg, liked.Like.ID)
		assert.Equal(t, 1, liked.Like.LikeCount)
		var reply struct {
			PostMessage struct {
				ReplyTo struct{ ID string } `json:"replyTo"`
			} `json:"postMessage"`
		}
		e.mustExec(t, dave, `mutation($in: PostMessageInput!) { postMessage(input: $in) { replyTo { id } } }`,
			map[string]any{"in": map[string]any{"text": "agreed", "replyTo": repost.ID}}, &reply)
		assert.Equal(t, msg, reply.PostMessage.ReplyTo.ID)
		assert.Equal(t, store.EINVALID, e.errCode(t, bob, `mutation($id: ID!) { editMessage(id: $id, text: "words") { id } }`, map[string]any{"id": repost.ID}),
			"a repost has no text to edit")
	})

	t.Run("unrepost takes the item away", func(t *testing.T) {
		assert.Equal(t, repostResult{ID: msg, RepostCount: 1, ViewerHasReposted: false}, setRepost(bob, "unrepost", msg))
		assert.Equal(t, repostResult{ID: msg, RepostCount: 1, ViewerHasReposted: false}, setRepost(bob, "unrepost", msg), "idempotent")
		// The repost's own deletion (DELETED, naming the repost) and the
		// item's removal come by different paths, in either order.
		var removed *repostEvent
		for range 2 {
			ev := nextOf[repostEvent](t, sub)
			switch ev.InboxEvents.Type {
			case "REMOVED":
				removed = &ev
			case "DELETED":
				assert.NotEqual(t, msg, *ev.InboxEvents.DeletedMessageID, "the message reposted is not deleted")
			default:
				t.Fatalf("unexpected %s event", ev.InboxEvents.Type)
			}
		}
		require.NotNil(t, removed, "REMOVED")
		require.NotNil(t, removed.InboxEvents.RemovedMessageID)
		assert.Equal(t, msg, *removed.InboxEvents.RemovedMessageID, "the id of the node the edge showed")
		require.NotNil(t, removed.InboxEvents.MessageID)
		assert.Equal(t, msg, *removed.InboxEvents.MessageID)
		assert.Nil(t, removed.InboxEvents.Edge)
		assert.Nil(t, removed.InboxEvents.DeletedMessageID)
		waitFanOut(t, e)
		assert.Empty(t, repostPage(t, e, carol), "the repost left bob's follower's inbox")
		// bob may repost it again.
		assert.Equal(t, repostResult{ID: msg, RepostCount: 2, ViewerHasReposted: true}, setRepost(bob, "repost", msg))
		waitFanOut(t, e)
		require.Len(t, repostPage(t, e, carol), 1)
	})

	t.Run("a repost whose message is deleted leaves the page", func(t *testing.T) {
		gone := mustPost(t, e, alice, "soon gone")
		setRepost(bob, "repost", gone)
		waitFanOut(t, e)
		require.Len(t, repostPage(t, e, carol), 2)
		e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": gone}, nil)
		page := repostPage(t, e, carol)
		require.Len(t, page, 1)
		assert.Equal(t, msg, page[0].Node.ID)
	})

	t.Run("refusals", func(t *testing.T) {
		for _, field := range []string{"repost", "unrepost"} {
			q := `mutation($id: ID!) { ` + field + `(messageId: $id) { id } }`
			assert.Equal(t, store.EUNAUTHENTICATED, e.errCode(t, "", q, map[string]any{"id": msg}), field)
			assert.Equal(t, store.ENOTFOUND, e.errCode(t, bob, q, map[string]any{"id": fakeGlobalID("Message")}), field)
			assert.Equal(t, store.EINVALID, e.errCode(t, bob, q, map[string]any{"id": "not-an-id"}), field)
		}
		deleted := mustPost(t, e, alice, "deleted")
		e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": deleted}, nil)
		assert.Equal(t, store.ENOTFOUND, e.errCode(t, bob, `mutation($id: ID!) { repost(messageId: $id) { id } }`, map[string]any{"id": deleted}))
	})

	t.Run("signed out, viewerHasReposted is false", func(t *testing.T) {
		var r struct {
			Node repostResult `json:"node"`
		}
		e.mustExec(t, "", `query($id: ID!) { node(id: $id) { ... on Message { id repostCount viewerHasReposted } } }`, map[string]any{"id": msg}, &r)
		assert.Equal(t, repostResult{ID: msg, RepostCount: 2}, r.Node)
		e.mustExec(t, bob, `query($id: ID!) { node(id: $id) { ... on Message { id repostCount viewerHasReposted } } }`, map[string]any{"id": msg}, &r)
		assert.True(t, r.Node.ViewerHasReposted)
	})
}

func TestReposts_FollowerOfTheAuthor(t *testing.T) { forStrategies(t, testRepostsFollowerOfTheAuthor) }

// testRepostsFollowerOfTheAuthor checks that an unrepost does not take the
// message away from a reader who follows its author too: their inbox shows
// the message itself, whose edge a REMOVED naming it would delete.
func testRepostsFollowerOfTheAuthor(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	dave, _ := mustSignUp(t, e, "dave")
	mustFollow(t, e, dave, aliceID)
	mustFollow(t, e, dave, bobID)
	msg := mustPost(t, e, alice, "followed twice")
	waitFanOut(t, e)
	sub := e.client.Websocket(repostEventsQuery, opts(dave, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	mustRepost(t, e, bob, msg)
	waitFanOut(t, e)
	e.mustExec(t, bob, `mutation($id: ID!) { unrepost(messageId: $id) { id } }`, map[string]any{"id": msg}, nil)
	waitFanOut(t, e)
	later := mustPost(t, e, alice, "later")
	for {
		ev := nextOf[repostEvent](t, sub).InboxEvents
		assert.NotEqual(t, "REMOVED", ev.Type, "dave still has alice's message")
		if ev.Type == "ADDED" && ev.Edge != nil && ev.Edge.Node.ID == later {
			break
		}
	}
	var ids []string
	for _, edge := range repostPage(t, e, dave) {
		ids = append(ids, edge.Node.ID)
	}
	assert.Equal(t, []string{later, msg}, ids)
}

func TestReposts_Unfollow(t *testing.T) { forStrategies(t, testRepostsUnfollow) }

// testRepostsUnfollow checks that unfollowing a reposter takes their
// repost's item away with a REMOVED naming the message the edge showed.
func testRepostsUnfollow(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	mustFollow(t, e, carol, bobID)
	msg := mustPost(t, e, alice, "passed along")
	mustRepost(t, e, bob, msg)
	waitFanOut(t, e)
	require.Len(t, repostPage(t, e, carol), 1)
	sub := e.client.Websocket(repostEventsQuery, opts(carol, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	e.mustExec(t, carol, `mutation($id: ID!) { unfollow(userId: $id) { id } }`, map[string]any{"id": bobID}, nil)
	waitFanOut(t, e)
	assert.Empty(t, repostPage(t, e, carol))
	// Where the inbox is read from outboxes nothing is stored to remove
	// and no event is sent (as for any unfollow).
	if strategyOf(t).Layout().Stores() {
		ev := nextOf[repostEvent](t, sub).InboxEvents
		assert.Equal(t, "REMOVED", ev.Type)
		require.NotNil(t, ev.RemovedMessageID)
		assert.Equal(t, msg, *ev.RemovedMessageID, "the id of the node the edge showed, not the repost's")
		require.NotNil(t, ev.Message)
		assert.Equal(t, msg, ev.Message.ID)
	}
}

func TestReposts_Notifications(t *testing.T) { forBackends(t, testRepostsNotifications) }

// testRepostsNotifications checks that reposts of one message group into
// one REPOSTED notification, as likes do, and that one's own repost
// notifies no one.
func testRepostsNotifications(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	post := mustPost(t, e, alice, "a post")
	mustRepost(t, e, alice, post)
	assert.Empty(t, notifications(t, e, alice, nil).Notifications.Edges, "no notification of one's own repost")
	var reposters []string
	for i := range 3 {
		tok, _ := mustSignUp(t, e, fmt.Sprintf("fan%d", i))
		mustRepost(t, e, tok, post)
		reposters = append(reposters, tok)
	}
	e.mustExec(t, reposters[0], `mutation($id: ID!) { unrepost(messageId: $id) { id } }`, map[string]any{"id": post}, nil)
	mustRepost(t, e, reposters[0], post)
	p := notifications(t, e, alice, nil).Notifications
	require.Len(t, p.Edges, 1, "reposts of one post are one group")
	g := p.Edges[0].Node
	assert.Equal(t, "REPOSTED", g.Kind)
	assert.Equal(t, 3, g.Count, "a repost taken back and made again counts once")
	require.NotNil(t, g.Message)
	assert.Equal(t, post, g.Message.ID)
	require.Len(t, g.LatestActors, 3)
	assert.Equal(t, "fan2", g.LatestActors[0].Handle)
}

// TestReposts_RateLimited checks that repost and unrepost take a token of
// the signed-in user's mutation bucket each, as every mutation does.
func TestReposts_RateLimited(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		e, h, _ := rateEnv(t, graph.RateLimits{User: graph.Rate{Count: 3, Per: time.Hour, Burst: 3}})
		alice, _ := mustSignUp(t, e, "alice")
		bob, _ := mustSignUp(t, e, "bob")
		msg := mustPost(t, e, alice, "reposted")
		const addr = "192.0.2.1:1"
		both := `{"query":"mutation { a: repost(messageId: \"` + msg + `\") { id } b: unrepost(messageId: \"` + msg + `\") { id } }"}`
		requireOK(t, rlPost(t, h, mtGQL, bob, addr, both))
		requireLimited(t, rlPost(t, h, mtGQL, bob, addr, both), mtGQL, 1200)
		requireOK(t, rlPost(t, h, mtGQL, bob, addr, `{"query":"mutation { repost(messageId: \"`+msg+`\") { id } }"}`), "one token was left")
	})
}

func TestReposts_OwnHome(t *testing.T) { forStrategies(t, testRepostsOwnHome) }

// testRepostsOwnHome checks the reposter's own timeline and events: a
// repost of a followee's message is not at the reposter's home, so neither
// it nor its unrepost tells their subscriptions anything (a REMOVED naming
// the message would take the followee's own item away), while a repost of
// a stranger's is, and stays so once the reposter follows the stranger:
// that was decided when it was made.
func testRepostsOwnHome(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	mustFollow(t, e, bob, aliceID)
	ofAlice := mustPost(t, e, alice, "followed")
	ofCarol := mustPost(t, e, carol, "stranger")
	waitFanOut(t, e)
	sub := e.client.Websocket(repostEventsQuery, opts(bob, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	mustRepost(t, e, bob, ofAlice)
	mustRepost(t, e, bob, ofCarol)
	waitFanOut(t, e)
	e.mustExec(t, bob, `mutation($id: ID!) { unrepost(messageId: $id) { id } }`, map[string]any{"id": ofAlice}, nil)
	waitFanOut(t, e)
	done := mustPost(t, e, bob, "done")
	added := 0
	for {
		ev := nextOf[repostEvent](t, sub).InboxEvents
		if ev.Type == "ADDED" && ev.Edge != nil && ev.Edge.Node.ID == done {
			break
		}
		assert.NotEqual(t, "REMOVED", ev.Type, "bob still has alice's message")
		assert.NotEqual(t, "DELETED", ev.Type, "bob's repost of alice's message was not at his home")
		if ev.Type == "ADDED" {
			require.NotNil(t, ev.Edge)
			require.NotNil(t, ev.Edge.RepostedBy)
			assert.Equal(t, ofCarol, ev.Edge.Node.ID, "only the repost of the stranger's message is at bob's home")
			added++
		}
	}
	assert.Equal(t, 1, added)

	mustFollow(t, e, bob, carolID)
	waitFanOut(t, e)
	var reposted []string
	for _, edge := range repostPage(t, e, bob) {
		if edge.RepostedBy != nil {
			reposted = append(reposted, edge.Node.ID)
		}
	}
	assert.Equal(t, []string{ofCarol}, reposted, "following carol later leaves bob's repost of her message at his home")
}

package graph_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/store"
)

// privateUser is a user as a client showing a private account reads it.
type privateUser struct {
	ID                    string `json:"id"`
	Handle                string `json:"handle"`
	Private               bool   `json:"private"`
	ViewerFollows         bool   `json:"viewerFollows"`
	ViewerRequestedFollow bool   `json:"viewerRequestedFollow"`
	FollowerCount         int    `json:"followerCount"`
}

const privateUserFields = `id handle private viewerFollows viewerRequestedFollow followerCount`

// profileLists is what a profile page shows of a user's lists.
type profileLists struct {
	Messages struct {
		TotalCount int `json:"totalCount"`
		Edges      []struct {
			Node struct {
				Text     string `json:"text"`
				RepostOf *struct {
					Text string `json:"text"`
				} `json:"repostOf"`
			} `json:"node"`
		} `json:"edges"`
	} `json:"messages"`
	Likes struct {
		Edges []struct {
			Node struct {
				Text string `json:"text"`
			} `json:"node"`
		} `json:"edges"`
	} `json:"likes"`
	Followers struct {
		Edges []struct {
			Node struct {
				Handle string `json:"handle"`
			} `json:"node"`
		} `json:"edges"`
	} `json:"followers"`
	Following struct {
		Edges []struct {
			Node struct {
				Handle string `json:"handle"`
			} `json:"node"`
		} `json:"edges"`
	} `json:"following"`
}

const profileListsQuery = `query($h: String!) { user(handle: $h) { messages(first: 20) { totalCount edges { node { text repostOf { text } } } }
	likes(first: 20) { edges { node { text } } } followers(first: 20) { edges { node { handle } } } following(first: 20) { edges { node { handle } } } } }`

func (p profileLists) texts() []string {
	out := []string{}
	for _, e := range p.Messages.Edges {
		out = append(out, e.Node.Text)
	}
	return out
}

func (p profileLists) liked() []string {
	out := []string{}
	for _, e := range p.Likes.Edges {
		out = append(out, e.Node.Text)
	}
	return out
}

// readProfile reads a user's lists as the token's user (anonymous for "").
func readProfile(t *testing.T, e *env, token, handle string) profileLists {
	t.Helper()
	var r struct {
		User profileLists `json:"user"`
	}
	e.mustExec(t, token, profileListsQuery, map[string]any{"h": handle}, &r)
	return r.User
}

// nodeText returns the text of the message with global id id as the
// token's user reads it through node and nodes (which must agree), or ""
// when it is hidden (null).
func nodeText(t *testing.T, e *env, token, id string) string {
	t.Helper()
	var r struct {
		Node *struct {
			Text string `json:"text"`
		} `json:"node"`
		Nodes []*struct {
			Text string `json:"text"`
		} `json:"nodes"`
	}
	e.mustExec(t, token, `query($id: ID!) { node(id: $id) { ... on Message { text } } nodes(ids: [$id]) { ... on Message { text } } }`, map[string]any{"id": id}, &r)
	require.Len(t, r.Nodes, 1)
	if r.Node == nil {
		assert.Nil(t, r.Nodes[0], "nodes agrees with node")
		return ""
	}
	require.NotNil(t, r.Nodes[0], "nodes agrees with node")
	return r.Node.Text
}

// replyTexts returns the texts of the replies to message id as the
// token's user reads them, in a page of size first.
func replyTexts(t *testing.T, e *env, token, id string, first int) ([]string, bool) {
	t.Helper()
	var r struct {
		Node struct {
			Replies struct {
				Edges []struct {
					Node struct {
						Text string `json:"text"`
					} `json:"node"`
				} `json:"edges"`
				PageInfo struct {
					HasNextPage bool `json:"hasNextPage"`
				} `json:"pageInfo"`
			} `json:"replies"`
		} `json:"node"`
	}
	e.mustExec(t, token, `query($id: ID!, $n: Int) { node(id: $id) { ... on Message { replies(first: $n) { edges { node { text } } pageInfo { hasNextPage } } } } }`,
		map[string]any{"id": id, "n": first}, &r)
	out := []string{}
	for _, e := range r.Node.Replies.Edges {
		out = append(out, e.Node.Text)
	}
	return out, r.Node.Replies.PageInfo.HasNextPage
}

// replyToText returns the text of the message that message id replies to
// (or, with field "repostOf", reposts), "" when it is hidden.
func linkedText(t *testing.T, e *env, token, id, field string) string {
	t.Helper()
	var r struct {
		Node map[string]*struct {
			Text string `json:"text"`
		} `json:"node"`
	}
	e.mustExec(t, token, `query($id: ID!) { node(id: $id) { ... on Message { `+field+` { text } } } }`, map[string]any{"id": id}, &r)
	if m := r.Node[field]; m != nil {
		return m.Text
	}
	return ""
}

// userAs reads a user as the token's user.
func userAs(t *testing.T, e *env, token, handle string) privateUser {
	t.Helper()
	var r struct {
		User privateUser `json:"user"`
	}
	e.mustExec(t, token, `query($h: String!) { user(handle: $h) { `+privateUserFields+` } }`, map[string]any{"h": handle}, &r)
	return r.User
}

// requestHandles returns the handles of the token's user's follow
// requests, and their total.
func requestHandles(t *testing.T, e *env, token string, args string) ([]string, int, string) {
	t.Helper()
	var r struct {
		Viewer struct {
			FollowRequests struct {
				TotalCount int `json:"totalCount"`
				Edges      []struct {
					Node struct {
						Handle string `json:"handle"`
					} `json:"node"`
				} `json:"edges"`
				PageInfo struct {
					EndCursor string `json:"endCursor"`
				} `json:"pageInfo"`
			} `json:"followRequests"`
		} `json:"viewer"`
	}
	e.mustExec(t, token, `{ viewer { followRequests`+args+` { totalCount edges { node { handle } } pageInfo { endCursor } } } }`, nil, &r)
	out := []string{}
	for _, e := range r.Viewer.FollowRequests.Edges {
		out = append(out, e.Node.Handle)
	}
	return out, r.Viewer.FollowRequests.TotalCount, r.Viewer.FollowRequests.PageInfo.EndCursor
}

func setPrivate(t *testing.T, e *env, token string, on bool) privateUser {
	t.Helper()
	var r struct {
		SetPrivate privateUser `json:"setPrivate"`
	}
	e.mustExec(t, token, `mutation($p: Boolean!) { setPrivate(private: $p) { `+privateUserFields+` } }`, map[string]any{"p": on}, &r)
	return r.SetPrivate
}

func follow(t *testing.T, e *env, token, id string) privateUser {
	t.Helper()
	var r struct {
		Follow privateUser `json:"follow"`
	}
	e.mustExec(t, token, `mutation($id: ID!) { follow(userId: $id) { `+privateUserFields+` } }`, map[string]any{"id": id}, &r)
	return r.Follow
}

func TestPrivateAccounts(t *testing.T) { forBackends(t, testPrivateAccounts) }

// testPrivateAccounts follows a private account through its requests and
// its readers: an approved follower, a requester still waiting, a
// stranger and nobody signed in.
func testPrivateAccounts(t *testing.T) {
	e := newEnv(t, nil)
	locked, lockedID := mustSignUp(t, e, "locked")
	fan, fanID := mustSignUp(t, e, "fan")
	asker, askerID := mustSignUp(t, e, "asker")
	stranger, strangerID := mustSignUp(t, e, "stranger")
	pub, pubID := mustSignUp(t, e, "pub")
	rejected, rejectedID := mustSignUp(t, e, "rejected")

	// Before the account turns private: a post that pub reposts (reaching
	// the stranger's home) and likes, and a follow of pub.
	mustFollow(t, e, stranger, pubID)
	old := mustPost(t, e, locked, "old news")
	mustRepost(t, e, pub, old)
	e.mustExec(t, pub, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": old}, nil)
	mustFollow(t, e, locked, pubID)
	pubPost := mustPost(t, e, pub, "a public post")

	waitFanOut(t, e)
	assert.Equal(t, []string{"a public post", "old news"}, homeTexts(t, e, stranger), "pub's post and repost")
	t.Run("setPrivate", func(t *testing.T) {
		u := setPrivate(t, e, locked, true)
		assert.Equal(t, privateUser{ID: lockedID, Handle: "locked", Private: true}, u)
		assert.True(t, userAs(t, e, "", "locked").Private, "anyone sees that an account is private")
		assert.Equal(t, "UNAUTHENTICATED", e.errCode(t, "", `mutation { setPrivate(private: true) { id } }`, nil))
		assert.False(t, userAs(t, e, "", "pub").Private, "accounts are public by default")
	})
	secret := mustPost(t, e, locked, "a secret @stranger")
	lockedReply := mustReply(t, e, locked, "a private reply", pubPost)

	t.Run("following asks", func(t *testing.T) {
		for _, tok := range []string{fan, asker, rejected} {
			u := follow(t, e, tok, lockedID)
			assert.True(t, u.ViewerRequestedFollow)
			assert.False(t, u.ViewerFollows)
			assert.Zero(t, u.FollowerCount, "a request is no follow")
		}
		u := follow(t, e, fan, lockedID)
		assert.True(t, u.ViewerRequestedFollow, "asking twice is one request")
		assert.False(t, userAs(t, e, stranger, "locked").ViewerRequestedFollow)
		assert.False(t, userAs(t, e, "", "locked").ViewerRequestedFollow)

		handles, total, _ := requestHandles(t, e, locked, "")
		assert.Equal(t, []string{"fan", "asker", "rejected"}, handles, "oldest request first")
		assert.Equal(t, 3, total)
		handles, _, cursor := requestHandles(t, e, locked, "(first: 1)")
		assert.Equal(t, []string{"fan"}, handles)
		handles, _, _ = requestHandles(t, e, locked, `(first: 5, after: "`+cursor+`")`)
		assert.Equal(t, []string{"asker", "rejected"}, handles)

		var n struct {
			Notifications struct {
				Edges []struct {
					Node struct {
						Kind   string `json:"kind"`
						Actors struct {
							TotalCount int `json:"totalCount"`
							Edges      []struct {
								Node struct {
									Handle string `json:"handle"`
								} `json:"node"`
							} `json:"edges"`
						} `json:"actors"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"notifications"`
		}
		e.mustExec(t, locked, `{ notifications(first: 10) { edges { node { kind actors(first: 10) { totalCount edges { node { handle } } } } } } }`, nil, &n)
		var found bool
		for _, edge := range n.Notifications.Edges {
			if edge.Node.Kind == "FOLLOW_REQUESTED" {
				found = true
				assert.Equal(t, 3, edge.Node.Actors.TotalCount, "the requests group as follows do")
				require.Len(t, edge.Node.Actors.Edges, 3)
				assert.Equal(t, "rejected", edge.Node.Actors.Edges[0].Node.Handle, "newest first")
			}
		}
		assert.True(t, found, "FOLLOW_REQUESTED notifies the account")
	})

	t.Run("followRequests refusals", func(t *testing.T) {
		q := `query($h: String!) { user(handle: $h) { followRequests { edges { node { id } } } } }`
		assert.Equal(t, "FORBIDDEN", e.errCode(t, stranger, q, map[string]any{"h": "locked"}))
		assert.Equal(t, "UNAUTHENTICATED", e.errCode(t, "", q, map[string]any{"h": "locked"}))
		assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, locked, `{ viewer { followRequests(first: 1, after: "nope") { totalCount } } }`, nil))
	})

	t.Run("approve and reject", func(t *testing.T) {
		var r struct {
			ApproveFollow privateUser `json:"approveFollow"`
		}
		e.mustExec(t, locked, `mutation($id: ID!) { approveFollow(userId: $id) { `+privateUserFields+` } }`, map[string]any{"id": fanID}, &r)
		assert.Equal(t, "fan", r.ApproveFollow.Handle, "returns the requester")
		u := userAs(t, e, fan, "locked")
		assert.True(t, u.ViewerFollows, "now a follower")
		assert.False(t, u.ViewerRequestedFollow, "the request is answered")
		assert.Equal(t, 1, u.FollowerCount)
		assert.Equal(t, "NOT_FOUND", e.errCode(t, locked, `mutation($id: ID!) { approveFollow(userId: $id) { id } }`, map[string]any{"id": fanID}), "approved already")
		assert.Equal(t, "NOT_FOUND", e.errCode(t, locked, `mutation($id: ID!) { approveFollow(userId: $id) { id } }`, map[string]any{"id": strangerID}), "never asked")

		var rj struct {
			RejectFollow privateUser `json:"rejectFollow"`
		}
		e.mustExec(t, locked, `mutation($id: ID!) { rejectFollow(userId: $id) { `+privateUserFields+` } }`, map[string]any{"id": rejectedID}, &rj)
		assert.Equal(t, "rejected", rj.RejectFollow.Handle)
		u = userAs(t, e, rejected, "locked")
		assert.False(t, u.ViewerFollows)
		assert.False(t, u.ViewerRequestedFollow)
		assert.Equal(t, "NOT_FOUND", e.errCode(t, locked, `mutation($id: ID!) { rejectFollow(userId: $id) { id } }`, map[string]any{"id": rejectedID}))

		for _, m := range []string{"approveFollow", "rejectFollow"} {
			assert.Equal(t, "UNAUTHENTICATED", e.errCode(t, "", `mutation($id: ID!) { `+m+`(userId: $id) { id } }`, map[string]any{"id": askerID}), m)
			assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, locked, `mutation($id: ID!) { `+m+`(userId: $id) { id } }`, map[string]any{"id": "nope"}), m)
			// Only the account answers its requests: another user has none.
			assert.Equal(t, "NOT_FOUND", e.errCode(t, stranger, `mutation($id: ID!) { `+m+`(userId: $id) { id } }`, map[string]any{"id": askerID}), m)
		}
		handles, total, _ := requestHandles(t, e, locked, "")
		assert.Equal(t, []string{"asker"}, handles)
		assert.Equal(t, 1, total)
	})
	waitFanOut(t, e)

	readers := []struct {
		name, token string
		sees        bool
	}{{"approved follower", fan, true}, {"the account itself", locked, true}, {"requester", asker, false}, {"stranger", stranger, false}, {"anonymous", "", false}}

	t.Run("node and nodes", func(t *testing.T) {
		for _, rd := range readers {
			want := ""
			if rd.sees {
				want = "a secret @stranger"
			}
			assert.Equal(t, want, nodeText(t, e, rd.token, secret), rd.name)
		}
	})

	t.Run("profile lists", func(t *testing.T) {
		for _, rd := range readers {
			p := readProfile(t, e, rd.token, "locked")
			assert.Equal(t, 3, p.Messages.TotalCount, "%s: the profile's count shows", rd.name)
			if rd.sees {
				assert.Equal(t, []string{"a private reply", "a secret @stranger", "old news"}, p.texts(), rd.name)
				require.Len(t, p.Following.Edges, 1, rd.name)
				assert.Equal(t, "pub", p.Following.Edges[0].Node.Handle)
				require.Len(t, p.Followers.Edges, 1, rd.name)
				assert.Equal(t, "fan", p.Followers.Edges[0].Node.Handle)
			} else {
				assert.Empty(t, p.texts(), rd.name)
				assert.Empty(t, p.Followers.Edges, rd.name)
				assert.Empty(t, p.Following.Edges, rd.name)
				assert.Empty(t, p.Likes.Edges, rd.name)
			}
		}
	})

	t.Run("another user's repost and likes of its messages", func(t *testing.T) {
		for _, rd := range readers {
			if rd.token == locked {
				continue
			}
			p := readProfile(t, e, rd.token, "pub")
			require.Len(t, p.Messages.Edges, 2, "%s: pub's own messages show", rd.name)
			repost := p.Messages.Edges[1].Node
			if rd.sees {
				require.NotNil(t, repost.RepostOf, rd.name)
				assert.Equal(t, "old news", repost.RepostOf.Text)
				assert.Equal(t, []string{"old news"}, p.liked(), rd.name)
			} else {
				assert.Nil(t, repost.RepostOf, "%s: the repost's original is hidden", rd.name)
				assert.Empty(t, p.liked(), "%s: a like of a hidden message is left out", rd.name)
			}
		}
	})

	t.Run("like, repost and reply", func(t *testing.T) {
		for _, tok := range []string{asker, stranger} {
			assert.Equal(t, "NOT_FOUND", e.errCode(t, tok, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": secret}))
			assert.Equal(t, "NOT_FOUND", e.errCode(t, tok, `mutation($id: ID!) { repost(messageId: $id) { id } }`, map[string]any{"id": secret}))
			assert.Equal(t, "NOT_FOUND", e.errCode(t, tok, `mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }`,
				map[string]any{"in": map[string]any{"text": "hi", "replyTo": secret}}))
		}
		e.mustExec(t, fan, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": secret}, nil)
		assert.Equal(t, "FORBIDDEN", e.errCode(t, fan, `mutation($id: ID!) { repost(messageId: $id) { id } }`, map[string]any{"id": secret}),
			"a private account's message cannot be reposted, even by a follower")
		mustRepost(t, e, locked, secret) // its author may
		fanReply := mustReply(t, e, fan, "a follower's reply", secret)
		for _, rd := range readers {
			want := ""
			if rd.sees {
				want = "a secret @stranger"
			}
			assert.Equal(t, want, linkedText(t, e, rd.token, fanReply, "replyTo"), "%s: replyTo", rd.name)
			assert.Equal(t, "a follower's reply", nodeText(t, e, rd.token, fanReply), "%s: the public reply itself shows", rd.name)
		}
	})

	t.Run("a repost at home", func(t *testing.T) {
		assert.Equal(t, []string{"a public post"}, homeTexts(t, e, stranger), "a repost shows its original, now private")
	})

	t.Run("threads", func(t *testing.T) {
		mustReply(t, e, stranger, "a stranger's reply", pubPost)
		for _, rd := range readers {
			texts, more := replyTexts(t, e, rd.token, pubPost, 1)
			assert.False(t, more && !rd.sees, "%s", rd.name)
			if rd.sees {
				assert.Equal(t, []string{"a private reply"}, texts, rd.name)
				assert.True(t, more, rd.name)
			} else {
				assert.Equal(t, []string{"a stranger's reply"}, texts, "%s: the page reads on past the hidden reply", rd.name)
			}
			all, _ := replyTexts(t, e, rd.token, pubPost, 10)
			if rd.sees {
				assert.Equal(t, []string{"a private reply", "a stranger's reply"}, all, rd.name)
			} else {
				assert.Equal(t, []string{"a stranger's reply"}, all, rd.name)
			}
		}
		assert.Equal(t, "", linkedText(t, e, stranger, lockedReply, "replyTo"), "a hidden reply is not found at all")
	})

	t.Run("search shows the profile only", func(t *testing.T) {
		var r struct {
			SearchUsers struct {
				Edges []struct {
					Node struct {
						Handle   string `json:"handle"`
						Private  bool   `json:"private"`
						Messages struct {
							Edges []json.RawMessage `json:"edges"`
						} `json:"messages"`
						Likes struct {
							Edges []json.RawMessage `json:"edges"`
						} `json:"likes"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"searchUsers"`
		}
		e.mustExec(t, stranger, `{ searchUsers(query: "locked") { edges { node { handle private messages(first: 5) { edges { cursor } } likes(first: 5) { edges { cursor } } } } } }`, nil, &r)
		require.Len(t, r.SearchUsers.Edges, 1)
		n := r.SearchUsers.Edges[0].Node
		assert.Equal(t, "locked", n.Handle)
		assert.True(t, n.Private)
		assert.Empty(t, n.Messages.Edges)
		assert.Empty(t, n.Likes.Edges)
	})

	t.Run("a private account's mention notifies its readers alone", func(t *testing.T) {
		var r struct {
			Notifications struct {
				Edges []struct {
					Node struct {
						Kind    string `json:"kind"`
						Message *struct {
							Text string `json:"text"`
						} `json:"message"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"notifications"`
		}
		e.mustExec(t, stranger, `{ notifications(first: 10) { edges { node { kind message { text } } } } }`, nil, &r)
		for _, edge := range r.Notifications.Edges {
			assert.NotEqual(t, "MENTIONED", edge.Node.Kind, "the stranger may not read the private post that mentions them")
		}
	})

	t.Run("unfollow takes a request back", func(t *testing.T) {
		var r struct {
			Unfollow privateUser `json:"unfollow"`
		}
		e.mustExec(t, asker, `mutation($id: ID!) { unfollow(userId: $id) { `+privateUserFields+` } }`, map[string]any{"id": lockedID}, &r)
		assert.False(t, r.Unfollow.ViewerRequestedFollow)
		handles, _, _ := requestHandles(t, e, locked, "")
		assert.Empty(t, handles)
	})

	t.Run("public again", func(t *testing.T) {
		follow(t, e, asker, lockedID)
		u := setPrivate(t, e, locked, false)
		assert.False(t, u.Private)
		handles, _, _ := requestHandles(t, e, locked, "")
		assert.Equal(t, []string{"asker"}, handles, "pending requests stay to be answered")
		assert.Equal(t, "a secret @stranger", nodeText(t, e, stranger, secret), "everyone sees a public account's messages")
		assert.Equal(t, "a secret @stranger", nodeText(t, e, "", secret))
		u = follow(t, e, stranger, lockedID)
		assert.True(t, u.ViewerFollows, "a public account is followed at once")
		_ = fanID
	})
}

// homeTexts returns the texts of the token's user's home timeline.
func homeTexts(t *testing.T, e *env, token string) []string {
	t.Helper()
	var r struct {
		Inbox struct {
			Edges []struct {
				Node struct {
					Text string `json:"text"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"inbox"`
	}
	e.mustExec(t, token, `{ inbox(first: 20) { edges { node { text } } } }`, nil, &r)
	out := []string{}
	for _, edge := range r.Inbox.Edges {
		out = append(out, edge.Node.Text)
	}
	return out
}

func TestBlockHidesMessages(t *testing.T) { forBackends(t, testBlockHidesMessages) }

// testBlockHidesMessages: a blocker's messages are hidden from the user it
// blocks, as if absent, everywhere they are read directly; a third user
// sees everything.
func testBlockHidesMessages(t *testing.T) {
	e := newEnv(t, nil)
	blocker, blockerID := mustSignUp(t, e, "blocker")
	blocked, blockedID := mustSignUp(t, e, "blocked")
	other, otherID := mustSignUp(t, e, "other")

	post := mustPost(t, e, blocker, "the blocker's post")
	otherPost := mustPost(t, e, other, "another post")
	blockerReply := mustReply(t, e, blocker, "the blocker's reply", otherPost)
	otherReply := mustReply(t, e, other, "a reply to the blocker", post)
	mustRepost(t, e, other, post)
	e.mustExec(t, blocker, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": otherPost}, nil)
	e.mustExec(t, other, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": post}, nil)
	e.mustExec(t, blocked, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": post}, nil)
	mustFollow(t, e, blocker, otherID)
	mustFollow(t, e, other, blockerID)
	mustFollow(t, e, blocked, otherID)
	waitFanOut(t, e)
	var before struct {
		Inbox struct {
			Edges []struct {
				RepostedBy *struct {
					Handle string `json:"handle"`
				} `json:"repostedBy"`
			} `json:"edges"`
		} `json:"inbox"`
	}
	e.mustExec(t, blocked, `{ inbox(first: 20) { edges { repostedBy { handle } } } }`, nil, &before)
	var reposted bool
	for _, edge := range before.Inbox.Edges {
		reposted = reposted || edge.RepostedBy != nil && edge.RepostedBy.Handle == "other"
	}
	require.True(t, reposted, "before the block, other's repost of the blocker's post is home")

	b, err := graph.ParseUserIDForTest(blockerID)
	require.NoError(t, err)
	v, err := graph.ParseUserIDForTest(blockedID)
	require.NoError(t, err)
	_, err = e.backend.Block(context.Background(), b, v, store.RelationBlock, time.Now())
	require.NoError(t, err)

	t.Run("node and nodes", func(t *testing.T) {
		assert.Equal(t, "", nodeText(t, e, blocked, post))
		assert.Equal(t, "", nodeText(t, e, blocked, blockerReply))
		assert.Equal(t, "the blocker's post", nodeText(t, e, other, post))
		assert.Equal(t, "the blocker's post", nodeText(t, e, "", post), "the block hides nothing from others")
	})
	t.Run("profile lists", func(t *testing.T) {
		p := readProfile(t, e, blocked, "blocker")
		assert.Empty(t, p.texts())
		assert.Empty(t, p.liked())
		assert.Empty(t, p.Followers.Edges)
		assert.Empty(t, p.Following.Edges)
		p = readProfile(t, e, other, "blocker")
		assert.Equal(t, []string{"the blocker's reply", "the blocker's post"}, p.texts())
		assert.Equal(t, []string{"another post"}, p.liked())
		assert.Len(t, p.Followers.Edges, 1)
	})
	t.Run("a third user's lists", func(t *testing.T) {
		p := readProfile(t, e, blocked, "other")
		require.Len(t, p.Messages.Edges, 3)
		assert.Nil(t, p.Messages.Edges[0].Node.RepostOf, "the repost's original is hidden")
		assert.Empty(t, p.liked(), "the like of the blocker's post is left out")
		texts, _ := replyTexts(t, e, blocked, otherPost, 10)
		assert.Empty(t, texts, "the blocker's reply is left out of the thread")
		assert.Equal(t, "", linkedText(t, e, blocked, otherReply, "replyTo"))
		assert.Equal(t, "", linkedText(t, e, blocked, otherReply, "root"))
		assert.Equal(t, "the blocker's post", linkedText(t, e, other, otherReply, "replyTo"))
	})
	t.Run("a third user's repost at home", func(t *testing.T) {
		// The blocker's own items at home are the blocks work's (its
		// unfollow); the repost shows the blocker's message, so it goes.
		var r struct {
			Inbox struct {
				Edges []struct {
					RepostedBy *struct {
						Handle string `json:"handle"`
					} `json:"repostedBy"`
				} `json:"edges"`
			} `json:"inbox"`
		}
		e.mustExec(t, blocked, `{ inbox(first: 20) { edges { repostedBy { handle } } } }`, nil, &r)
		require.NotEmpty(t, r.Inbox.Edges, "other's messages are home")
		for _, edge := range r.Inbox.Edges {
			assert.Nil(t, edge.RepostedBy, "no repost of the blocker's message")
		}
	})
	t.Run("like, repost and reply are refused as absent", func(t *testing.T) {
		assert.Equal(t, "NOT_FOUND", e.errCode(t, blocked, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": post}))
		assert.Equal(t, "NOT_FOUND", e.errCode(t, blocked, `mutation($id: ID!) { repost(messageId: $id) { id } }`, map[string]any{"id": post}))
		assert.Equal(t, "NOT_FOUND", e.errCode(t, blocked, `mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"text": "hey", "replyTo": post}}))
		e.mustExec(t, blocked, `mutation($id: ID!) { unlike(messageId: $id) { id } }`, map[string]any{"id": post}, nil)
		// The blocker still reads and answers the blocked user's messages.
		theirs := mustPost(t, e, blocked, "the blocked user's post")
		assert.Equal(t, "the blocked user's post", nodeText(t, e, blocker, theirs))
		mustReply(t, e, blocker, "an answer", theirs)
	})
}

func TestFollowRequestFanOut(t *testing.T) { forStrategies(t, testFollowRequestFanOut) }

// testFollowRequestFanOut: a private account's posts reach a requester's
// home timeline only once approved, the recent ones by the follow's
// backfill.
func testFollowRequestFanOut(t *testing.T) {
	e := newEnv(t, nil)
	locked, lockedID := mustSignUp(t, e, "locked")
	asker, askerID := mustSignUp(t, e, "asker")
	setPrivate(t, e, locked, true)
	mustPost(t, e, locked, "before the request")
	follow(t, e, asker, lockedID)
	mustPost(t, e, locked, "while asking")
	waitFanOut(t, e)
	home := func() []string {
		var r struct {
			Inbox struct {
				Edges []struct {
					Node struct {
						Text string `json:"text"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"inbox"`
		}
		e.mustExec(t, asker, `{ inbox(first: 10) { edges { node { text } } } }`, nil, &r)
		out := []string{}
		for _, edge := range r.Inbox.Edges {
			out = append(out, edge.Node.Text)
		}
		return out
	}
	assert.Empty(t, home(), "nothing reaches a requester")

	e.mustExec(t, locked, `mutation($id: ID!) { approveFollow(userId: $id) { id } }`, map[string]any{"id": askerID}, nil)
	waitFanOut(t, e)
	assert.Equal(t, []string{"while asking", "before the request"}, home(), "the approved follow brings the recent posts")
	mustPost(t, e, locked, "after")
	waitFanOut(t, e)
	assert.Equal(t, []string{"after", "while asking", "before the request"}, home())
}

func TestPrivateCosts(t *testing.T) { forBackends(t, testPrivateCosts) }

// testPrivateCosts: the rule and the request flags cost a fixed number of
// calls per page, and the new fields are priced and rate-limited.
func testPrivateCosts(t *testing.T) {
	e := newEnv(t, func(c *graph.Config) {
		c.ComplexityLimit = 200
		c.RateLimits.User = graph.Rate{Count: 3, Per: time.Hour, Burst: 3}
	})
	reader, _ := mustSignUp(t, e, "reader")
	pub, _ := mustSignUp(t, e, "pub")
	post := mustPost(t, e, pub, "a post")
	var lockedIDs []string
	for _, h := range []string{"locked_a", "locked_b", "locked_c"} {
		tok, id := mustSignUp(t, e, h)
		setPrivate(t, e, tok, true)
		mustReply(t, e, tok, "a reply by "+h, post)
		lockedIDs = append(lockedIDs, id)
	}
	for _, h := range []string{"open_a", "open_b"} {
		tok, _ := mustSignUp(t, e, h)
		mustReply(t, e, tok, "a reply by "+h, post)
	}

	t.Run("a thread page: one FindBlockers, one FindFollowing", func(t *testing.T) {
		e.backend.Reset()
		texts, _ := replyTexts(t, e, reader, post, 10)
		assert.Equal(t, []string{"a reply by open_a", "a reply by open_b"}, texts)
		calls, _ := e.backend.Snapshot()
		// One for the post (node); the page of replies needs none, as it
		// loads the reader with its authors and nobody blocks the reader.
		assert.Equal(t, int64(1), calls["FindBlockers"], "%v", calls)
		assert.Equal(t, int64(1), calls["FindFollowing"], "the private authors of the page, at once: %v", calls)
		assert.Equal(t, int64(1), calls["ListReplies"], "%v", calls)
	})
	t.Run("viewerRequestedFollow: one call a page", func(t *testing.T) {
		for _, id := range lockedIDs {
			follow(t, e, reader, id)
		}
		e.backend.Reset()
		var r struct {
			SearchUsers struct {
				Edges []struct {
					Node privateUser `json:"node"`
				} `json:"edges"`
			} `json:"searchUsers"`
		}
		e.mustExec(t, reader, `{ searchUsers(query: "locked") { edges { node { `+privateUserFields+` } } } }`, nil, &r)
		require.Len(t, r.SearchUsers.Edges, 3)
		for _, edge := range r.SearchUsers.Edges {
			assert.True(t, edge.Node.ViewerRequestedFollow, edge.Node.Handle)
		}
		calls, _ := e.backend.Snapshot()
		assert.Equal(t, int64(1), calls["FindFollowRequests"], "%v", calls)
	})
	t.Run("followRequests is priced as a connection", func(t *testing.T) {
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", e.errCode(t, reader, `{ viewer { followRequests(first: 100) { edges { node { id handle } } } } }`, nil))
		e.mustExec(t, reader, `{ viewer { followRequests(first: 25) { edges { node { id } } } } }`, nil, nil)
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", e.errCode(t, reader, `{ viewer { followRequests(first: 25) { totalCount edges { node { id } } } } }`, nil),
			"its count scans")
	})
	t.Run("the mutations are rate-limited per root field", func(t *testing.T) {
		// reader spent its three mutation tokens on its follows.
		assert.Equal(t, graph.CodeRateLimited, e.errCode(t, reader, `mutation { setPrivate(private: true) { id } }`, nil))
		assert.Equal(t, graph.CodeRateLimited, e.errCode(t, reader, `mutation($id: ID!) { approveFollow(userId: $id) { id } }`, map[string]any{"id": lockedIDs[0]}))
		assert.Equal(t, graph.CodeRateLimited, e.errCode(t, reader, `mutation($id: ID!) { rejectFollow(userId: $id) { id } }`, map[string]any{"id": lockedIDs[0]}))
	})
}

func TestApproveFollowResumes(t *testing.T) { forBackends(t, testApproveFollowResumes) }

// testApproveFollowResumes: an approval cut short after its follow, before
// its request was removed, is completed by approving again, counted once.
func testApproveFollowResumes(t *testing.T) {
	e := newEnv(t, nil)
	locked, lockedID := mustSignUp(t, e, "locked")
	fan, fanID := mustSignUp(t, e, "fan")
	setPrivate(t, e, locked, true)
	l, err := graph.ParseUserIDForTest(lockedID)
	require.NoError(t, err)
	f, err := graph.ParseUserIDForTest(fanID)
	require.NoError(t, err)
	ctx := context.Background()
	// What a crash between the approval's two steps leaves.
	_, err = e.backend.RequestFollow(ctx, f, l, time.Now())
	require.NoError(t, err)
	_, err = e.backend.Follow(ctx, f, l, time.Now())
	require.NoError(t, err)
	u := userAs(t, e, fan, "locked")
	assert.True(t, u.ViewerFollows)
	assert.True(t, u.ViewerRequestedFollow, "the request is still there")

	e.mustExec(t, locked, `mutation($id: ID!) { approveFollow(userId: $id) { id } }`, map[string]any{"id": fanID}, nil)
	u = userAs(t, e, fan, "locked")
	assert.True(t, u.ViewerFollows)
	assert.False(t, u.ViewerRequestedFollow, "approving again removed the request")
	assert.Equal(t, 1, u.FollowerCount, "the follow counted once")
	handles, _, _ := requestHandles(t, e, locked, "")
	assert.Empty(t, handles)
	// Following a private account one follows already asks nothing.
	u = follow(t, e, fan, lockedID)
	assert.True(t, u.ViewerFollows)
	assert.False(t, u.ViewerRequestedFollow)
}

func TestBlockEndsFollowRequests(t *testing.T) { forBackends(t, testBlockEndsFollowRequests) }

// testBlockEndsFollowRequests: a block removes a pending request to follow
// either way, and a request that raced the block cannot be approved into
// the follow the block forbids.
func testBlockEndsFollowRequests(t *testing.T) {
	e := newEnv(t, nil)
	locked, lockedID := mustSignUp(t, e, "locked")
	asker, askerID := mustSignUp(t, e, "asker")
	setPrivate(t, e, locked, true)
	require.True(t, follow(t, e, asker, lockedID).ViewerRequestedFollow)

	e.mustExec(t, locked, `mutation($id: ID!) { block(userId: $id) { id } }`, map[string]any{"id": askerID}, nil)
	handles, _, _ := requestHandles(t, e, locked, "")
	assert.Empty(t, handles, "the blocked user's request is gone")
	assert.False(t, userAs(t, e, asker, "locked").ViewerRequestedFollow)
	approve := `mutation($id: ID!) { approveFollow(userId: $id) { id } }`
	assert.Equal(t, "NOT_FOUND", e.errCode(t, locked, approve, map[string]any{"id": askerID}))

	// A request stored after the block's removal (a follow checked just
	// before the block): approving it is refused.
	l, err := graph.ParseUserIDForTest(lockedID)
	require.NoError(t, err)
	a, err := graph.ParseUserIDForTest(askerID)
	require.NoError(t, err)
	_, err = e.backend.RequestFollow(context.Background(), a, l, time.Now())
	require.NoError(t, err)
	assert.Equal(t, "FORBIDDEN", e.errCode(t, locked, approve, map[string]any{"id": askerID}))
	assert.Zero(t, userAs(t, e, asker, "locked").FollowerCount, "no follow across the block")
}

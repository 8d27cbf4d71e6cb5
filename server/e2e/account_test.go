package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/server/internal/servertest"
	"herald/store"
)

const (
	changePasswordOp = `mutation($o: String!, $n: String!) { changePassword(oldPassword: $o, newPassword: $n) }`
	deleteAccountOp  = `mutation($p: String!) { deleteAccount(password: $p) }`
)

// logInAgain opens another session of handle (signed up by MustSignUp).
func logInAgain(t *testing.T, base string, u servertest.User, password string) servertest.User {
	t.Helper()
	d := servertest.MustGQL(t, base, "", `mutation($h: String!, $p: String!) { logIn(input: {handle: $h, password: $p}) { token } }`,
		map[string]any{"h": u.Handle, "p": password})
	u.Token = d["logIn"].(map[string]any)["token"].(string)
	return u
}

// requireWSClosed reads c until the server closes it, within d.
func requireWSClosed(t *testing.T, c *servertest.WSClient, d time.Duration) {
	t.Helper()
	for {
		_, err := c.Read(d)
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return
		}
		require.NoError(t, err, "the socket was not closed by the server within %v", d)
	}
}

// requireWSOpen checks the server sends c nothing, and does not close it,
// for a while.
func requireWSOpen(t *testing.T, c *servertest.WSClient) {
	t.Helper()
	_, err := c.Read(300 * time.Millisecond)
	var ce *websocket.CloseError
	require.False(t, errors.As(err, &ce), "the socket was closed: %v", err)
}

// TestAccount_ChangePassword changes a password from one of two sessions:
// the other ends at once over HTTP and on its websocket, the first goes on,
// and only the new password logs in. Each refusal has its code.
func TestAccount_ChangePassword(t *testing.T) {
	ts := servertest.New(t, nil)
	first := servertest.MustSignUp(t, ts.URL, "pat")
	other := logInAgain(t, ts.URL, first, "correct horse")
	firstWS, otherWS := servertest.Acked(t, ts, first), servertest.Acked(t, ts, other)

	vars := func(o, n string) map[string]any { return map[string]any{"o": o, "n": n} }
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, "", changePasswordOp, vars("correct horse", "battery staple")).Code(), "anonymous")
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, first.Token, changePasswordOp, vars("wrong horse", "battery staple")).Code(), "a wrong old password")
	assert.Equal(t, store.EINVALID, servertest.GQL(t, ts.URL, first.Token, changePasswordOp, vars("correct horse", "short")).Code(), "a new password the rules refuse")
	servertest.MustGQL(t, ts.URL, other.Token, `{ viewer { id } }`, nil)

	d := servertest.MustGQL(t, ts.URL, first.Token, changePasswordOp, vars("correct horse", "battery staple"))
	assert.Equal(t, true, d["changePassword"])
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, other.Token, `{ viewer { id } }`, nil).Code(), "the other session ends")
	requireWSClosed(t, otherWS, 5*time.Second)
	d = servertest.MustGQL(t, ts.URL, first.Token, `{ viewer { handle } }`, nil)
	assert.Equal(t, "pat", d["viewer"].(map[string]any)["handle"], "the session that changed it goes on")
	requireWSOpen(t, firstWS)

	logIn := `mutation($p: String!) { logIn(input: {handle: "pat", password: $p}) { token } }`
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, "", logIn, map[string]any{"p": "correct horse"}).Code(), "the old password")
	servertest.MustGQL(t, ts.URL, "", logIn, map[string]any{"p": "battery staple"})
}

// TestAccount_WrongPasswordsAreLogInFailures: guessing the password
// through changePassword or deleteAccount with a stolen token spends the
// handle's failed-logIn budget, as logIn does.
func TestAccount_WrongPasswordsAreLogInFailures(t *testing.T) {
	ts := servertest.New(t, func(c *servertest.Config) { c.RateLimitLogIn = graph.Rate{Count: 2, Per: time.Hour, Burst: 2} })
	u := servertest.MustSignUp(t, ts.URL, "quinn")
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, u.Token, changePasswordOp, map[string]any{"o": "guess one", "n": "battery staple"}).Code())
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, u.Token, deleteAccountOp, map[string]any{"p": "guess two"}).Code())
	assert.Equal(t, graph.CodeRateLimited, servertest.GQL(t, ts.URL, u.Token, deleteAccountOp, map[string]any{"p": "correct horse"}).Code(), "even the right password waits")
	assert.Equal(t, graph.CodeRateLimited, servertest.GQL(t, ts.URL, "", `mutation { logIn(input: {handle: "quinn", password: "correct horse"}) { token } }`, nil).Code())
	servertest.MustGQL(t, ts.URL, u.Token, `{ viewer { id } }`, nil)
}

// TestAccount_Delete deletes an account over GraphQL: refusals first, then
// the user is gone everywhere a client could find it, its tokens end and
// its websockets close, its handle stays taken, and what it did to others
// is undone.
func TestAccount_Delete(t *testing.T) {
	ts := servertest.New(t, nil)
	gone := servertest.MustSignUp(t, ts.URL, "gone")
	second := logInAgain(t, ts.URL, gone, "correct horse")
	friend := servertest.MustSignUp(t, ts.URL, "friend")
	servertest.MustFollow(t, ts.URL, friend, gone)
	servertest.MustFollow(t, ts.URL, gone, friend)
	post := servertest.MustPost(t, ts.URL, gone, "soon gone")
	mine := servertest.MustPost(t, ts.URL, friend, "friend's post")
	servertest.MustGQL(t, ts.URL, gone.Token, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": mine})
	servertest.MustGQL(t, ts.URL, friend.Token, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": post})
	servertest.WaitIdle(t, ts.Svc)
	ws := servertest.Acked(t, ts, second)

	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, "", deleteAccountOp, map[string]any{"p": "correct horse"}).Code(), "anonymous")
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, gone.Token, deleteAccountOp, map[string]any{"p": "wrong horse"}).Code(), "a wrong password")
	servertest.MustGQL(t, ts.URL, gone.Token, `{ viewer { id } }`, nil)

	d := servertest.MustGQL(t, ts.URL, gone.Token, deleteAccountOp, map[string]any{"p": "correct horse"})
	assert.Equal(t, true, d["deleteAccount"])
	for _, tok := range []string{gone.Token, second.Token} {
		assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, tok, `{ viewer { id } }`, nil).Code(), "every session ends")
	}
	requireWSClosed(t, ws, 5*time.Second)
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, gone.Token, deleteAccountOp, map[string]any{"p": "correct horse"}).Code(), "twice")
	servertest.WaitIdle(t, ts.Svc)

	d = servertest.MustGQL(t, ts.URL, friend.Token, `query($id: ID!, $post: ID!, $mine: ID!) {
		user(handle: "gone") { id }
		node(id: $id) { id }
		post: node(id: $post) { id }
		nodes(ids: [$id]) { id }
		searchUsers(query: "gone") { totalCount edges { node { handle } } }
		mine: node(id: $mine) { ... on Message { likeCount likedBy(first: 10) { totalCount edges { node { id } } } } }
		viewer { followerCount followingCount followers(first: 10) { edges { node { id } } } following(first: 10) { edges { node { id } } } }
		inbox(first: 10) { totalCount edges { node { id } } }
	}`, map[string]any{"id": gone.ID, "post": post, "mine": mine})
	assert.Nil(t, d["user"], "user(handle)")
	assert.Nil(t, d["node"], "node(id)")
	assert.Nil(t, d["post"], "the deleted user's message")
	assert.Equal(t, []any{nil}, d["nodes"])
	assert.EqualValues(t, 0, d["searchUsers"].(map[string]any)["totalCount"])
	m := d["mine"].(map[string]any)
	assert.EqualValues(t, 0, m["likeCount"], "the deleted user's like is taken back")
	assert.EqualValues(t, 0, m["likedBy"].(map[string]any)["totalCount"])
	v := d["viewer"].(map[string]any)
	assert.EqualValues(t, 0, v["followerCount"])
	assert.EqualValues(t, 0, v["followingCount"])
	assert.Empty(t, v["followers"].(map[string]any)["edges"])
	assert.Empty(t, v["following"].(map[string]any)["edges"])
	inbox := d["inbox"].(map[string]any)
	assert.EqualValues(t, 0, inbox["totalCount"], "the deleted user's post leaves the friend's home")
	for _, e := range inbox["edges"].([]any) {
		assert.Equal(t, mine, e.(map[string]any)["node"].(map[string]any)["id"], "only the friend's own post is home")
	}

	r := servertest.GQL(t, ts.URL, "", `mutation { signUp(input: {handle: "gone", password: "another horse"}) { token } }`, nil)
	assert.Equal(t, store.ECONFLICT, r.Code(), "the handle stays taken during the grace period")
	r = servertest.GQL(t, ts.URL, "", `mutation { logIn(input: {handle: "gone", password: "correct horse"}) { token } }`, nil)
	assert.Equal(t, store.EUNAUTHENTICATED, r.Code())

	// The friend's notifications name the deleted user as an actor: it is
	// left out, and the feed reads without an error.
	d = servertest.MustGQL(t, ts.URL, friend.Token, `{ notifications(first: 10) { edges { node { latestActors { handle } } } } }`, nil)
	for _, e := range d["notifications"].(map[string]any)["edges"].([]any) {
		for _, a := range e.(map[string]any)["node"].(map[string]any)["latestActors"].([]any) {
			assert.NotEqual(t, "gone", a.(map[string]any)["handle"])
		}
	}
}

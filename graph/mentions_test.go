package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

func TestMentions(t *testing.T) { forBackends(t, testMentions) }

func testMentions(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	mustSignUp(t, e, "carol")

	handles := func(id string) []string {
		t.Helper()
		var r struct {
			Node struct {
				Mentions []struct{ Handle string } `json:"mentions"`
			} `json:"node"`
		}
		e.mustExec(t, bob, `query($id: ID!) { node(id: $id) { ... on Message { mentions { handle } } } }`, map[string]any{"id": id}, &r)
		out := []string{}
		for _, u := range r.Node.Mentions {
			out = append(out, u.Handle)
		}
		return out
	}

	t.Run("resolved in order, once each, any case", func(t *testing.T) {
		id := mustPost(t, e, alice, "hi @Bob and @carol, cc @nobody and me@carol.com, @BOB again")
		assert.Equal(t, []string{"bob", "carol"}, handles(id), "an unknown handle and an address mention no one")
	})
	t.Run("a message without mentions has an empty list", func(t *testing.T) {
		assert.Equal(t, []string{}, handles(mustPost(t, e, alice, "no one here")))
	})
	t.Run("an edit resolves them again", func(t *testing.T) {
		id := mustPost(t, e, alice, "@bob @carol")
		edit := `mutation($id: ID!, $t: String!) { editMessage(id: $id, text: $t) { mentions { handle } } }`
		var r struct {
			EditMessage struct {
				Mentions []struct{ Handle string } `json:"mentions"`
			} `json:"editMessage"`
		}
		e.mustExec(t, alice, edit, map[string]any{"id": id, "t": "just @carol"}, &r)
		require.Len(t, r.EditMessage.Mentions, 1)
		assert.Equal(t, "carol", r.EditMessage.Mentions[0].Handle)
		e.mustExec(t, alice, edit, map[string]any{"id": id, "t": "no one now"}, nil)
		assert.Equal(t, []string{}, handles(id))
	})
	t.Run("more than the limit is refused and nothing is posted", func(t *testing.T) {
		var many []string
		for i := range store.MaxMentions + 1 {
			many = append(many, fmt.Sprintf("@user%d", i))
		}
		count := func() int {
			var r struct {
				Viewer struct {
					MessageCount int `json:"messageCount"`
				} `json:"viewer"`
			}
			e.mustExec(t, alice, `{ viewer { messageCount } }`, nil, &r)
			return r.Viewer.MessageCount
		}
		before := count()
		code := e.errCode(t, alice, `mutation($t: String!) { postMessage(input: {text: $t}) { id } }`, map[string]any{"t": strings.Join(many, " ")})
		assert.Equal(t, store.EINVALID, code)
		assert.Equal(t, before, count())
		id := mustPost(t, e, alice, strings.Join(many[:store.MaxMentions], " "))
		code = e.errCode(t, alice, `mutation($id: ID!, $t: String!) { editMessage(id: $id, text: $t) { id } }`, map[string]any{"id": id, "t": strings.Join(many, " ")})
		assert.Equal(t, store.EINVALID, code, "an edit is held to the same limit")
	})
	t.Run("a timeline page loads them with its authors", func(t *testing.T) {
		var aliceID struct {
			User struct{ ID string } `json:"user"`
		}
		e.mustExec(t, "", `{ user(handle: "alice") { id } }`, nil, &aliceID)
		mustFollow(t, e, bob, aliceID.User.ID)
		mustPost(t, e, alice, "hello @bob")
		waitFanOut(t, e)
		calls := func(q string) int64 {
			e.backend.Reset()
			raw, errs := e.exec(t, bob, q, nil)
			require.Empty(t, errs)
			if strings.Contains(q, "mentions") {
				assert.Contains(t, string(raw), `"mentions":[{"handle":"bob"}]`)
			}
			_, n := e.backend.Snapshot()
			return n
		}
		without := calls(`{ inbox(first: 5) { edges { node { text author { handle } } } } }`)
		with := calls(`{ inbox(first: 5) { edges { node { text author { handle } mentions { handle } } } } }`)
		assert.Equal(t, without, with, "the mentioned users join the authors' batch")
	})
}

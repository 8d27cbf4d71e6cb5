package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

func ptr(s string) *string { return &s }

func attr(name, value string) store.Attribute { return store.Attribute{Name: name, Value: value} }

func testAttributes(t *testing.T, open OpenFunc) {
	t.Run("SetFindRemove", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u1, u2, u3 := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		// Names the app chooses: MongoDB field-name hazards included.
		odd := []string{"plan", "$where", "a.b.c", "emoji 🎉", "über"}
		var set []store.AttributeChange
		for i, n := range odd {
			set = append(set, store.AttributeChange{Name: n, Value: ptr(fmt.Sprintf("v%d", i))})
		}
		got, err := b.SetAttributes(ctx, u1.ID, set)
		require.NoError(t, err)
		assert.Equal(t, []store.Attribute{attr("$where", "v1"), attr("a.b.c", "v2"), attr("emoji 🎉", "v3"), attr("plan", "v0"), attr("über", "v4")}, got.Attributes, "sorted by name")
		assert.Equal(t, got.Attributes, mustUser(t, b, u1.ID).Attributes, "stored")

		_, err = b.SetAttributes(ctx, u2.ID, []store.AttributeChange{{Name: "plan", Value: ptr("v0")}})
		require.NoError(t, err)
		_, err = b.SetAttributes(ctx, u3.ID, []store.AttributeChange{{Name: "plan", Value: ptr("other")}})
		require.NoError(t, err)

		users, err := b.FindUsersByAttribute(ctx, "plan", "v0", store.Forward(store.NilID, 10))
		require.NoError(t, err)
		require.Len(t, users, 2)
		assert.Equal(t, u1.ID, users[0].ID, "in id order")
		assert.Equal(t, u2.ID, users[1].ID)
		n, err := b.CountUsersByAttribute(ctx, "plan", "v0")
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		n, err = b.CountUsersByAttribute(ctx, "never-set", "v0")
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		page2, err := b.FindUsersByAttribute(ctx, "plan", "v0", store.Forward(u1.ID, 10))
		require.NoError(t, err)
		require.Len(t, page2, 1)
		assert.Equal(t, u2.ID, page2[0].ID)
		users, err = b.FindUsersByAttribute(ctx, "a.b.c", "v2", store.Forward(store.NilID, 10))
		require.NoError(t, err)
		require.Len(t, users, 1)
		users, err = b.FindUsersByAttribute(ctx, "never-set", "v0", store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Empty(t, users)

		// Change one value and remove another: the index follows.
		got, err = b.SetAttributes(ctx, u1.ID, []store.AttributeChange{{Name: "plan", Value: ptr("pro")}, {Name: "$where"}, {Name: "unknown"}})
		require.NoError(t, err)
		assert.Equal(t, []store.Attribute{attr("a.b.c", "v2"), attr("emoji 🎉", "v3"), attr("plan", "pro"), attr("über", "v4")}, got.Attributes)
		users, err = b.FindUsersByAttribute(ctx, "plan", "v0", store.Forward(store.NilID, 10))
		require.NoError(t, err)
		require.Len(t, users, 1)
		assert.Equal(t, u2.ID, users[0].ID)
		users, err = b.FindUsersByAttribute(ctx, "$where", "v1", store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Empty(t, users)

		// Counters change without touching attributes.
		mustFollow(t, b, c, u2.ID, u1.ID)
		assert.Equal(t, got.Attributes, mustUser(t, b, u1.ID).Attributes)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		_, err := b.SetAttributes(ctx, store.NewID(c.Now()), []store.AttributeChange{{Name: "x", Value: ptr("y")}})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	})
	t.Run("TooMany", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		var set []store.AttributeChange
		for i := range store.MaxAttributes {
			set = append(set, store.AttributeChange{Name: fmt.Sprintf("n%03d", i), Value: ptr("v")})
		}
		_, err := b.SetAttributes(ctx, u.ID, set)
		require.NoError(t, err)
		_, err = b.SetAttributes(ctx, u.ID, []store.AttributeChange{{Name: "one-more", Value: ptr("v")}})
		assert.Equal(t, store.EINVALID, store.ErrorCode(err))
		assert.Len(t, mustUser(t, b, u.ID).Attributes, store.MaxAttributes, "nothing changed")
	})
	t.Run("ConcurrentNames", func(t *testing.T) {
		// Many writers registering the same and different names at once:
		// every name ends with one token, so every user reads back exactly
		// what it set, and lookups by any name find every user who set it.
		b, c := openBackend(t, open), newClock()
		const writers, shared, own = 8, 70, 10 // 70 + 8×10 = 150 names: past one name-store document
		users := make([]*store.User, writers)
		for i := range users {
			users[i] = mustCreateUser(t, b, c)
		}
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := range shared + own {
					name := fmt.Sprintf("shared.%d", (i+w*7)%shared)
					if i >= shared {
						name = fmt.Sprintf("own$%d.%d", w, i)
					}
					if _, err := b.SetAttributes(ctx, users[w].ID, []store.AttributeChange{{Name: name, Value: ptr(fmt.Sprint(w))}}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for w, u := range users {
			got := mustUser(t, b, u.ID).Attributes
			require.Len(t, got, shared+own)
			for _, a := range got {
				assert.Equal(t, fmt.Sprint(w), a.Value, a.Name)
			}
		}
		for i := range shared {
			found, err := b.FindUsersByAttribute(ctx, fmt.Sprintf("shared.%d", i), "3", store.Forward(store.NilID, 100))
			require.NoError(t, err)
			require.Len(t, found, 1)
			assert.Equal(t, users[3].ID, found[0].ID)
		}
	})
}

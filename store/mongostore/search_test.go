package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"

	"herald/store"
	"herald/store/mongostore"
)

// Users stored before search get their terms from BackfillSearch (run by
// herald mongo setup), once.
func TestBackfillSearch(t *testing.T) {
	ctx := context.Background()
	st := openLungo(t).(*mongostore.Store)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"Élodie Durand", "Eli", "Bob"} {
		at := now.Add(time.Duration(i) * time.Millisecond)
		require.NoError(t, st.CreateUser(ctx, &store.User{ID: store.NewID(at), Handle: fmt.Sprintf("user_%d", i), DisplayName: name, CreatedAt: at, LastSeenAt: at}))
	}
	_, err := st.Database().Collection("users").UpdateMany(ctx, bson.D{}, bson.D{{Key: "$unset", Value: bson.D{{Key: "q", Value: ""}}}})
	require.NoError(t, err)
	found, err := st.SearchUsers(ctx, "el", 10)
	require.NoError(t, err)
	require.Empty(t, found, "users from before search have no terms")

	n, err := st.BackfillSearch(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	found, err = st.SearchUsers(ctx, "el", 10)
	require.NoError(t, err)
	var names []string
	for _, u := range found {
		names = append(names, u.DisplayName)
	}
	assert.ElementsMatch(t, []string{"Élodie Durand", "Eli"}, names)
	n, err = st.BackfillSearch(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a second run has nothing to do")
}

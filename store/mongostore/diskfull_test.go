package mongostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/mongo"

	"herald/store"
	"herald/store/storage"
)

// A MongoDB whose disk is full answers writes with error code 14031
// (OutOfDiskSpace), in whichever shape the operation reports errors: a
// command error, a write error, a write concern error, a bulk write
// error. The store must report STORAGE_FULL for each, and nothing else.

func TestDiskFull_MapsToStorageFull(t *testing.T) {
	const msg = "Not enough available disk space"
	full := []struct {
		name string
		err  error
	}{
		{"CommandError", mongo.CommandError{Code: 14031, Name: "OutOfDiskSpace", Message: msg}},
		{"WriteError", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 14031, Message: msg}}}},
		{"WriteConcernError", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 14031, Name: "OutOfDiskSpace", Message: msg}}},
		{"BulkWriteError", mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Code: 14031, Message: msg}}}}},
	}
	for _, tc := range full {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, f := openFaulty(t)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			alice := &store.User{ID: store.NewID(now), Handle: "alice", CreatedAt: now, LastSeenAt: now}
			require.NoError(t, st.CreateUser(ctx, alice))
			bob := &store.User{ID: store.NewID(now.Add(time.Millisecond)), Handle: "bob", CreatedAt: now, LastSeenAt: now}
			require.NoError(t, st.CreateUser(ctx, bob))

			f.failWrites(tc.err)
			carol := &store.User{ID: store.NewID(now.Add(2 * time.Millisecond)), Handle: "carol", CreatedAt: now, LastSeenAt: now}
			m := &store.Message{ID: store.NewID(now.Add(3 * time.Millisecond)), AuthorID: alice.ID, Text: "hi", Kind: store.KindPost, CreatedAt: now}
			name := "Alice"
			for what, err := range map[string]error{
				"CreateUser":    st.CreateUser(ctx, carol),
				"CreateMessage": st.CreateMessage(ctx, m, nil),
				"Follow":        second(st.Follow(ctx, bob.ID, alice.ID, now)),
				"UpdateUser":    second(st.UpdateUser(ctx, alice.ID, storage.UserUpdate{DisplayName: &name})),
			} {
				require.Error(t, err, what)
				assert.Equal(t, store.ESTORAGEFULL, store.ErrorCode(err), "%s: %v", what, err)
				assert.Equal(t, "the database's disk is full: writes are refused until space is freed; reads still work", store.ErrorMessage(err), what)
				var se mongo.ServerError
				assert.True(t, errors.As(err, &se) && se.HasErrorCode(14031), "%s: the driver's error stays in the chain, for the log", what)
			}
			// Reads work.
			got, err := st.FindUserByID(ctx, alice.ID)
			require.NoError(t, err)
			assert.Equal(t, "alice", got.Handle)

			f.failWrites(nil)
			require.NoError(t, st.CreateUser(ctx, carol))
		})
	}

	// Other server errors are not STORAGE_FULL.
	t.Run("OtherCode", func(t *testing.T) {
		ctx := context.Background()
		st, f := openFaulty(t)
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		f.failWrites(mongo.CommandError{Code: 91, Name: "ShutdownInProgress", Message: "shutting down"})
		err := st.CreateUser(ctx, &store.User{ID: store.NewID(now), Handle: "alice", CreatedAt: now, LastSeenAt: now})
		require.Error(t, err)
		assert.Equal(t, store.EINTERNAL, store.ErrorCode(err))
	})
}

func second[T any](_ T, err error) error { return err }

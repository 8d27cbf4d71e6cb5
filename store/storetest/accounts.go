package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
)

// testAccountLife runs a password change and an account deletion through
// the service, under every timeline strategy: the sessions each ends, the
// counts the deletion's sweeper fixes, and the purge that frees the
// handle once the grace period has passed.
func testAccountLife(t *testing.T, open OpenFunc, st service.Strategy) {
	b := openBackend(t, open)
	c := newClock()
	const grace = time.Hour
	svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st, DeletionGrace: grace, DeletionPoll: 5 * time.Millisecond})
	signUp := func(t *testing.T, handle string) *store.User {
		t.Helper()
		u, err := svc.SignUp(ctx, service.SignUpInput{Handle: handle, Password: "old password"})
		require.NoError(t, err)
		return u
	}
	session := func(u *store.User, token string) store.Session {
		return store.Session{UserID: u.ID, TokenID: token, Version: u.TokenVersion, IssuedAt: c.Now(), ExpiresAt: c.Now().Add(time.Hour)}
	}
	code := func(err error) string { return store.ErrorCode(err) }

	t.Run("ChangePassword", func(t *testing.T) {
		u := signUp(t, "changer")
		this, other := session(u, "this"), session(u, "other")
		assert.Equal(t, store.EUNAUTHENTICATED, code(svc.ChangePassword(ctx, this, "wrong password", "new password")))
		assert.Equal(t, store.EINVALID, code(svc.ChangePassword(ctx, this, "old password", "short")))
		require.NoError(t, svc.Authenticate(ctx, other), "a refused change ends nothing")
		require.NoError(t, svc.ChangePassword(ctx, this, "old password", "new password"))
		assert.NoError(t, svc.Authenticate(ctx, this), "the session that changed it goes on")
		assert.Equal(t, store.EUNAUTHENTICATED, code(svc.Authenticate(ctx, other)), "every other session ends")
		_, err := svc.LogIn(ctx, "changer", "old password")
		assert.Equal(t, store.EUNAUTHENTICATED, code(err))
		again, err := svc.LogIn(ctx, "changer", "new password")
		require.NoError(t, err)
		// A session opened since is a session like any other: a second
		// change from it ends the first.
		third := session(again, "third")
		require.NoError(t, svc.Authenticate(ctx, third))
		require.NoError(t, svc.ChangePassword(ctx, third, "new password", "newer password"))
		assert.NoError(t, svc.Authenticate(ctx, third))
		assert.Equal(t, store.EUNAUTHENTICATED, code(svc.Authenticate(ctx, this)))
		// logOutEverywhere ends the kept one too.
		require.NoError(t, svc.LogOutEverywhere(ctx, u.ID))
		assert.Equal(t, store.EUNAUTHENTICATED, code(svc.Authenticate(ctx, third)))
	})

	t.Run("DeleteAccount", func(t *testing.T) {
		alice, bob, carol := signUp(t, "alice"), signUp(t, "bob"), signUp(t, "carol")
		_, err := svc.Follow(ctx, bob.ID, alice.ID)
		require.NoError(t, err)
		_, err = svc.Follow(ctx, alice.ID, carol.ID)
		require.NoError(t, err)
		_, err = svc.Follow(ctx, carol.ID, bob.ID)
		require.NoError(t, err)
		post, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "alice's post"})
		require.NoError(t, err)
		_, err = svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "alice's reply", ReplyToID: post.ID})
		require.NoError(t, err)
		carols, err := svc.PostMessage(ctx, carol.ID, service.PostInput{Text: "carol's post"})
		require.NoError(t, err)
		_, err = svc.Like(ctx, alice.ID, carols.ID)
		require.NoError(t, err)
		_, err = svc.Repost(ctx, alice.ID, carols.ID)
		require.NoError(t, err)
		_, err = svc.Like(ctx, bob.ID, post.ID)
		require.NoError(t, err)
		_, err = svc.Repost(ctx, bob.ID, post.ID)
		require.NoError(t, err)
		_, err = b.Block(ctx, alice.ID, carol.ID, store.RelationMute, c.Now())
		require.NoError(t, err)
		waitIdle(t, svc)
		page, err := svc.Inbox(ctx, bob.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		require.Len(t, page.Items, 3, "bob's home: alice's post, her reply and her repost of carol's")
		sess := session(alice, "alice's")

		assert.Equal(t, store.EUNAUTHENTICATED, code(svc.DeleteAccount(ctx, alice.ID, "wrong password")))
		require.NoError(t, svc.Authenticate(ctx, sess), "a refused deletion changes nothing")
		require.NoError(t, svc.DeleteAccount(ctx, alice.ID, "old password"))

		// At once: gone everywhere, its sessions ended, its handle taken.
		assert.Equal(t, store.EUNAUTHENTICATED, code(svc.Authenticate(ctx, sess)))
		_, err = svc.FindUserByID(ctx, alice.ID)
		assert.Equal(t, store.ENOTFOUND, code(err))
		_, err = svc.FindUserByHandle(ctx, "alice")
		assert.Equal(t, store.ENOTFOUND, code(err))
		found, err := svc.SearchUsers(ctx, "alice", 10, nil)
		require.NoError(t, err)
		assert.Empty(t, found.Users)
		_, err = svc.SignUp(ctx, service.SignUpInput{Handle: "alice", Password: "another password"})
		assert.Equal(t, store.ECONFLICT, code(err))
		_, err = svc.LogIn(ctx, "alice", "old password")
		assert.Equal(t, store.EUNAUTHENTICATED, code(err))

		// The sweeper, then the jobs it queued.
		waitIdle(t, svc)
		page, err = svc.Inbox(ctx, bob.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Empty(t, page.Items, "bob's home keeps nothing of alice")
		if st.Layout().Stores() {
			assert.Zero(t, page.Counts.Total)
			assert.Zero(t, page.Counts.Unread)
		}
		b2, c2 := mustUser(t, b, bob.ID), mustUser(t, b, carol.ID)
		assert.Zero(t, b2.FollowingCount, "bob followed alice alone")
		assert.Equal(t, 1, b2.FollowerCount, "carol's follow of bob stays")
		assert.Zero(t, b2.MessageCount, "bob's repost of alice's post goes with it")
		assert.Zero(t, c2.FollowerCount, "alice was carol's only follower")
		assert.Equal(t, 1, c2.FollowingCount)
		m, err := b.FindMessageByID(ctx, carols.ID)
		require.NoError(t, err)
		assert.Zero(t, m.LikeCount)
		assert.Zero(t, m.RepostCount)
		muted, err := b.ListBlocked(ctx, alice.ID, store.RelationMute, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Empty(t, muted)

		// Past the grace period the sweeper purges it: the handle is free.
		c.ms.Add(int64(grace / time.Millisecond))
		require.Eventually(t, func() bool {
			users, err := b.ListDeletedUsers(ctx, store.NilID, 10)
			return err == nil && len(users) == 0
		}, 10*time.Second, 5*time.Millisecond, "the deleted account is purged after the grace period")
		again, err := svc.SignUp(ctx, service.SignUpInput{Handle: "alice", Password: "another password"})
		require.NoError(t, err)
		assert.NotEqual(t, alice.ID, again.ID)
		assert.Zero(t, again.FollowerCount)
	})
	t.Run("GoneFromHomeAtOnce", func(t *testing.T) {
		// A service that runs no sweeper, as an instance that does not
		// hold the lease: the deleted account's messages are still
		// stored, and its followers' home timelines leave them out at
		// once rather than show messages whose author cannot be read.
		b := openBackend(t, open)
		svc, _ := newServiceStopped(t, b, c, service.Options{Strategy: service.StrategyRead})
		alice, err := svc.SignUp(ctx, service.SignUpInput{Handle: "alice", Password: "old password"})
		require.NoError(t, err)
		bob, err := svc.SignUp(ctx, service.SignUpInput{Handle: "bob", Password: "old password"})
		require.NoError(t, err)
		_, err = svc.Follow(ctx, bob.ID, alice.ID)
		require.NoError(t, err)
		post, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "alice's post"})
		require.NoError(t, err)
		_, err = svc.Repost(ctx, bob.ID, post.ID)
		require.NoError(t, err)
		own, err := svc.PostMessage(ctx, bob.ID, service.PostInput{Text: "bob's post"})
		require.NoError(t, err)
		page, err := svc.Inbox(ctx, bob.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		require.Len(t, page.Items, 2, "bob's home: his post and alice's (his repost of it is hidden at his home)")

		require.NoError(t, svc.DeleteAccount(ctx, alice.ID, "old password"))
		page, err = svc.Inbox(ctx, bob.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		require.Len(t, page.Items, 1, "only bob's own post is left")
		assert.Equal(t, own.ID, page.Items[0].MessageID)
	})
}

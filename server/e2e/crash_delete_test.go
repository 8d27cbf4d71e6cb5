package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/server/datadir"
	"herald/server/internal/servertest"
	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

const (
	// delFollowers follow the deleted user and nobody else; delPosts are
	// its messages, each delivered to all of them.
	delFollowers = 200
	delPosts     = 20
	// delStars are users the deleted user follows; it likes and reposts
	// their messages, as does fan0, so every count has a survivor.
	delStars = 3
	// delKills bounds the killed rounds.
	delKills = 4
)

// deletionFixture is what seedDeletion made.
type deletionFixture struct {
	victim    store.ID
	followers []store.ID // in ID order
	stars     []store.ID
	starPosts []store.MessageKey // one per star
	posts     []store.ID         // the victim's own
	fanRepost store.ID           // fan0's repost of the victim's first post
	fan       store.ID           // fan0: a follower who likes and reposts too
}

// TestCrash_KillDuringAccountDeletion deletes an account with followers,
// followees, messages in its followers' inboxes, likes, reposts and blocks,
// kills the real binary with SIGKILL while the deletion sweeper erases it
// (several rounds, at random moments), restarts it, and checks at the end
// that the deletion completed as if never interrupted: the user is gone,
// its handle still taken, no inbox holds its messages and every inbox
// count is exact, every follow, like and repost count of the others is
// exact, and no job is left.
func TestCrash_KillDuringAccountDeletion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server binary and kills it repeatedly; skipped in -short mode")
	}
	ctx := context.Background()
	bin := servertest.BuildHerald(t)
	data := t.TempDir()
	dbDir := filepath.Join(data, datadir.EmbeddedDir)
	fx := seedDeletion(t, dbDir)
	rng := crashRand(t)

	p := startHeraldForCrash(t, bin, data)
	base := "http://" + p.addr
	victim := logInForCrash(t, base, "victim")
	d := servertest.MustGQL(t, base, victim.Token, `mutation($p: String!) { deleteAccount(password: $p) }`, map[string]any{"p": crashPassword})
	require.Equal(t, true, d["deleteAccount"])
	accepted := time.Now()

	// Each round kills the server a random moment after it started (the
	// first, after the deletion was accepted), looks at what the sweeper
	// had done, and restarts it, until a kill finds the account erased.
	partial := 0
	for k := range delKills {
		if strings.Contains(p.log(), `"msg":"deleted account erased"`) {
			break
		}
		// The first kill comes early, among the message deletions and
		// their retractions; the later ones among the unfollows.
		delay := time.Duration(20+rng.IntN(300)) * time.Millisecond
		if k == 0 {
			delay = time.Duration(rng.IntN(50)) * time.Millisecond
		}
		time.Sleep(delay)
		killHerald(t, p)
		left := leftOf(t, dbDir, fx)
		t.Logf("round %d: killed %v in (%v after the deletion was accepted): %s", k+1, delay, time.Since(accepted).Round(time.Millisecond), left)
		if left.partly() {
			partial++
		}
		p = startHeraldForCrash(t, bin, data)
	}
	base = "http://" + p.addr
	deadline := time.Now().Add(crashWait)
	for !strings.Contains(p.log(), `"msg":"deleted account erased"`) {
		require.True(t, time.Now().Before(deadline), "the deletion did not finish after the last restart; log:\n%s", p.log())
		time.Sleep(crashPoll)
	}

	// Over GraphQL: the user is gone, its token too, its handle taken.
	r := servertest.GQL(t, base, victim.Token, `{ viewer { id } }`, nil)
	assert.Equal(t, store.EUNAUTHENTICATED, r.Code(), "the deleted account's token")
	d = servertest.MustGQL(t, base, "", `query($id: ID!) { user(handle: "victim") { id } node(id: $id) { id } }`, map[string]any{"id": victim.ID})
	assert.Nil(t, d["user"])
	assert.Nil(t, d["node"])
	r = servertest.GQL(t, base, "", `mutation { signUp(input: {handle: "victim", password: "another password"}) { token } }`, nil)
	assert.Equal(t, store.ECONFLICT, r.Code(), "the handle stays taken during the grace period")
	r = servertest.GQL(t, base, "", `mutation($p: String!) { logIn(input: {handle: "victim", password: $p}) { token } }`, map[string]any{"p": crashPassword})
	assert.Equal(t, store.EUNAUTHENTICATED, r.Code())

	// A clean stop lets the fan-out finish the retractions and unfollows
	// the sweeper queued; then the store is read directly.
	p.stop(t)
	st, err := embedded.Open(dbDir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	_, err = st.FindUserByID(ctx, fx.victim)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	deleted, err := st.ListDeletedUsers(ctx, store.NilID, 10)
	require.NoError(t, err)
	require.Len(t, deleted, 1, "the tombstone stays until the grace period ends")
	assert.Equal(t, fx.victim, deleted[0].ID)
	assert.Zero(t, deleted[0].FollowerCount, "the deleted user's own counts")
	assert.Zero(t, deleted[0].FollowingCount)
	assert.Zero(t, deleted[0].MessageCount)

	msgs, err := st.FindMessages(ctx, storage.MessageFilter{AuthorID: fx.victim, Range: store.Forward(store.NilID, 100)})
	require.NoError(t, err)
	assert.Empty(t, msgs, "the deleted user's messages and reposts")
	gone := map[store.ID]bool{fx.fanRepost: true}
	for _, id := range fx.posts {
		gone[id] = true
	}
	var badInbox, badFollowing int
	var firstBad string
	for _, f := range fx.followers {
		items, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: f, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 100)})
		require.NoError(t, err)
		// Followers follow no one else: every entry they had was the
		// deleted user's (its posts and reposts), or fan0's repost of one.
		if len(items) != 0 || counts.Total != 0 || counts.Unread != 0 {
			badInbox++
			if firstBad == "" {
				firstBad = fmt.Sprintf("follower %s: %d entries, counts %+v", f, len(items), counts)
			}
		}
		u, err := st.FindUserByID(ctx, f)
		require.NoError(t, err)
		if u.FollowingCount != 0 || u.FollowerCount != 0 {
			badFollowing++
		}
	}
	assert.Zero(t, badInbox, "followers whose inbox still holds entries: %s", firstBad)
	assert.Zero(t, badFollowing, "followers with a follow count left")
	for _, s := range fx.stars {
		u, err := st.FindUserByID(ctx, s)
		require.NoError(t, err)
		assert.Zero(t, u.FollowerCount, "a star followed only by the deleted user")
	}
	fan, err := st.FindUserByID(ctx, fx.fan)
	require.NoError(t, err)
	assert.Equal(t, 1, fan.MessageCount, "fan0's repost of the deleted post is deleted; its repost of a star's stays")
	starMsgs, err := st.FindMessagesByKeys(ctx, fx.starPosts)
	require.NoError(t, err)
	for i, m := range starMsgs {
		require.NotNil(t, m)
		assert.Equal(t, 1, m.LikeCount, "star %d's message: fan0's like alone is left", i)
		assert.Equal(t, b2i(i == 0), m.RepostCount, "star %d's message: fan0's repost alone is left", i)
		likers, err := st.ListLikers(ctx, m.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Equal(t, []store.ID{fx.fan}, likeUsers(likers))
	}
	for _, kind := range []store.RelationKind{store.RelationBlock, store.RelationMute} {
		rels, err := st.ListBlocked(ctx, fx.victim, kind, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Empty(t, rels, "the deleted user's relations of kind %d", kind)
	}
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending, "jobs left after a clean stop")
	t.Logf("kills that found the deletion partly done: %d", partial)
	assert.Positive(t, partial, "no kill landed while the deletion was under way")
}

// left is what a kill found of the deleted account: its messages, likes
// and follow edges still stored.
type left struct{ posts, likes, followers, following int }

func (l left) String() string {
	return fmt.Sprintf("%d messages, %d likes, %d followers, %d followees left", l.posts, l.likes, l.followers, l.following)
}

// partly reports whether the deletion had begun and not finished.
func (l left) partly() bool {
	all := left{posts: delPosts + delStars - 1, likes: delStars, followers: delFollowers, following: delStars}
	return l != all && l != left{}
}

// leftOf opens the store of a killed server and counts what is left.
func leftOf(t *testing.T, dir string, fx deletionFixture) left {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Open(dir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	var l left
	msgs, err := st.FindMessages(ctx, storage.MessageFilter{AuthorID: fx.victim, Range: store.Forward(store.NilID, 1000)})
	require.NoError(t, err)
	l.posts = len(msgs)
	likes, err := st.ListLikes(ctx, fx.victim, store.Forward(store.NilID, 1000))
	require.NoError(t, err)
	l.likes = len(likes)
	fs, err := st.ListFollowers(ctx, fx.victim, store.Forward(store.NilID, 1000))
	require.NoError(t, err)
	l.followers = len(fs)
	fg, err := st.ListFollowing(ctx, fx.victim, store.Forward(store.NilID, 1000))
	require.NoError(t, err)
	l.following = len(fg)
	return l
}

func likeUsers(likes []store.Like) []store.ID {
	out := make([]store.ID, len(likes))
	for i, l := range likes {
		out[i] = l.UserID
	}
	return out
}

// seedDeletion makes, in the embedded store at dir, the account to delete
// ("victim", crashPassword) with delFollowers followers (fan0 among them),
// delStars followees whose one message each it likes and (but the last)
// reposts, delPosts posts delivered to its followers, a block and a mute;
// fan0 likes every star's message, reposts the first, and reposts the
// victim's first post. The service runs to deliver everything.
func seedDeletion(t *testing.T, dir string) deletionFixture {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(dir, embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	svc := service.NewService(st, hub, service.Options{Logger: log, PasswordCost: bcrypt.MinCost})
	require.NoError(t, svc.Start(ctx))
	defer func() {
		require.NoError(t, svc.Close(ctx))
		hub.Close()
		require.NoError(t, st.Close())
	}()
	victim, err := svc.SignUp(ctx, service.SignUpInput{Handle: "victim", Password: crashPassword})
	require.NoError(t, err)
	fx := deletionFixture{victim: victim.ID, followers: make([]store.ID, delFollowers)}
	seedParallel(t, delFollowers, func(i int) error {
		now := time.Now().UTC().Truncate(time.Millisecond)
		h := fmt.Sprintf("fan%d", i)
		u := &store.User{ID: store.NewID(now), Handle: h, DisplayName: h, CreatedAt: now, LastSeenAt: now}
		if err := st.CreateUser(ctx, u); err != nil {
			return err
		}
		fx.followers[i] = u.ID
		_, err := st.Follow(ctx, u.ID, victim.ID, now)
		return err
	})
	fx.fan = fx.followers[0]
	slices.SortFunc(fx.followers, store.ID.Compare)
	for i := range delStars {
		s, err := svc.SignUp(ctx, service.SignUpInput{Handle: fmt.Sprintf("star%d", i), Password: crashPassword})
		require.NoError(t, err)
		fx.stars = append(fx.stars, s.ID)
		m, err := svc.PostMessage(ctx, s.ID, service.PostInput{Text: fmt.Sprintf("star %d says hi", i)})
		require.NoError(t, err)
		fx.starPosts = append(fx.starPosts, m.Key())
		_, err = svc.Follow(ctx, victim.ID, s.ID)
		require.NoError(t, err)
		_, err = svc.Like(ctx, victim.ID, m.ID)
		require.NoError(t, err)
		_, err = svc.Like(ctx, fx.fan, m.ID)
		require.NoError(t, err)
		if i < delStars-1 {
			_, err = svc.Repost(ctx, victim.ID, m.ID)
			require.NoError(t, err)
		}
	}
	_, err = svc.Repost(ctx, fx.fan, fx.starPosts[0].ID)
	require.NoError(t, err)
	for i := range delPosts {
		m, err := svc.PostMessage(ctx, victim.ID, service.PostInput{Text: fmt.Sprintf("post %d", i)})
		require.NoError(t, err)
		fx.posts = append(fx.posts, m.ID)
	}
	r, err := svc.Repost(ctx, fx.fan, fx.posts[0])
	require.NoError(t, err)
	reposts, err := st.FindReposts(ctx, fx.fan, []store.MessageKey{r.Key()})
	require.NoError(t, err)
	fx.fanRepost = reposts[0]
	_, err = st.Block(ctx, victim.ID, fx.stars[0], store.RelationBlock, time.Now())
	require.NoError(t, err)
	_, err = st.Block(ctx, victim.ID, fx.stars[1], store.RelationMute, time.Now())
	require.NoError(t, err)
	servertest.WaitIdle(t, svc)

	// Every follower has the victim's posts and its two reposts.
	_, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: fx.followers[delFollowers-1], Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 1)})
	require.NoError(t, err)
	require.Equal(t, delPosts+delStars-1, counts.Total, "a follower's inbox before the deletion")
	return fx
}

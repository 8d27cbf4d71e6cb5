package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

func mustSignUp(t *testing.T, svc *service.Service, handle string) *store.User {
	t.Helper()
	u, err := svc.SignUp(ctx, service.SignUpInput{Handle: handle, Password: "password1"})
	require.NoError(t, err)
	return u
}

// inboxTexts pages through a whole inbox through the service.
func inboxTexts(t *testing.T, svc *service.Service, owner store.ID, pageSize int) []string {
	t.Helper()
	var texts []string
	before := store.NilID
	for {
		page, err := svc.Inbox(ctx, owner, store.Forward(before, pageSize))
		require.NoError(t, err)
		for _, it := range page.Items {
			require.NotNil(t, it.Message)
			texts = append(texts, it.Message.Text)
		}
		if !page.HasMore {
			return texts
		}
		before = page.Items[len(page.Items)-1].MessageID
	}
}

// inboxTextsBackward pages through owner's whole inbox backward, from the
// oldest item toward the newest, and returns the texts in the inbox's
// order (newest first). Each page must come in that order too, and its
// HasMore must say whether newer items remain.
func inboxTextsBackward(t *testing.T, svc *service.Service, owner store.ID, pageSize int) []string {
	t.Helper()
	var texts []string
	from := store.NilID
	for {
		page, err := svc.Inbox(ctx, owner, store.Backward(from, pageSize))
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), pageSize)
		var pageTexts []string
		for i, it := range page.Items {
			require.NotNil(t, it.Message)
			if i > 0 {
				require.Negative(t, it.MessageID.Compare(page.Items[i-1].MessageID), "a backward page is newest first too")
			}
			pageTexts = append(pageTexts, it.Message.Text)
		}
		texts = append(pageTexts, texts...)
		if !page.HasMore {
			return texts
		}
		require.NotEmpty(t, page.Items)
		from = page.Items[0].MessageID
	}
}

func nextEvent(t *testing.T, ch <-chan store.Event) store.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "subscription closed")
		return ev
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no event")
	}
	return store.Event{}
}

func testService(t *testing.T, open OpenFunc, st service.Strategy) {
	t.Run("Timeline", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		svc, hub := newServiceWith(t, b, c, service.Options{Strategy: st})
		alice := mustSignUp(t, svc, "Alice")
		assert.Equal(t, "alice", alice.Handle, "handles are stored lowercase")
		bob := mustSignUp(t, svc, "bob")
		// More followers than a chunk (7), so fan-out takes several chunks.
		var fans []store.ID
		for i := range 16 {
			f := mustSignUp(t, svc, fmt.Sprintf("fan_%02d", i))
			_, err := svc.Follow(ctx, f.ID, alice.ID)
			require.NoError(t, err)
			fans = append(fans, f.ID)
		}
		target, err := svc.Follow(ctx, bob.ID, alice.ID)
		require.NoError(t, err)
		assert.Equal(t, 17, target.FollowerCount)

		sctx, cancel := context.WithCancel(ctx)
		events, err := svc.Subscribe(sctx, bob.ID)
		require.NoError(t, err)

		var posted []*store.Message
		for i := range 55 {
			m, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: fmt.Sprintf("post %d", i)})
			require.NoError(t, err)
			posted = append(posted, m)
		}
		reply, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "a reply", ReplyToID: posted[0].ID})
		require.NoError(t, err)
		assert.Equal(t, store.KindReply, reply.Kind)
		assert.Equal(t, posted[0].ID, reply.ReplyToID)
		waitIdle(t, svc)

		ev := nextEvent(t, events)
		assert.Equal(t, store.EventAdded, ev.Type)
		assert.Equal(t, posted[0].ID, ev.MessageID)
		if st.Layout().Stores() {
			assert.Equal(t, 1, ev.Counts.Unread)
		} else {
			assert.True(t, ev.NoCounts, "the strategy counts at read time")
		}

		want := []string{"a reply"}
		for i := 54; i >= 0; i-- {
			want = append(want, fmt.Sprintf("post %d", i))
		}
		for _, size := range []int{1, 49, 50, 51, 100} {
			assert.Equal(t, want, inboxTexts(t, svc, bob.ID, size), "page size %d", size)
		}
		for _, f := range fans {
			page, err := svc.Inbox(ctx, f, store.Forward(store.NilID, 100))
			require.NoError(t, err)
			assert.Equal(t, 56, page.Counts.Total)
			assert.Len(t, page.Items, 56)
		}
		assert.Equal(t, 56, mustUser(t, b, alice.ID).MessageCount)

		edited, err := svc.EditMessage(ctx, alice.ID, posted[54].ID, "post 54, edited")
		require.NoError(t, err)
		require.NotNil(t, edited.EditedAt)
		page, err := svc.Inbox(ctx, bob.ID, store.Forward(store.NilID, 2))
		require.NoError(t, err)
		assert.Equal(t, "post 54, edited", page.Items[1].Message.Text, "an edit shows in every inbox at once")

		require.NoError(t, svc.DeleteMessage(ctx, alice.ID, posted[53].ID))
		page, err = svc.Inbox(ctx, bob.ID, store.Forward(store.NilID, 3))
		require.NoError(t, err)
		assert.Equal(t, []string{"a reply", "post 54, edited", "post 52"}, []string{page.Items[0].Message.Text, page.Items[1].Message.Text, page.Items[2].Message.Text}, "a deleted message disappears at once")
		waitIdle(t, svc)
		page, err = svc.Inbox(ctx, bob.ID, store.Forward(store.NilID, 100))
		require.NoError(t, err)
		assert.Equal(t, 55, page.Counts.Total)
		assert.Equal(t, 55, page.Counts.Unread)
		assert.Len(t, page.Items, 55)

		counts, err := svc.MarkInboxRead(ctx, bob.ID)
		require.NoError(t, err)
		assert.Equal(t, 0, counts.Unread)
		assert.Equal(t, 55, counts.Total)

		// Skip the remaining ADDED events, then expect EDITED, DELETED, READ.
		var types []store.EventType
		for len(types) < 3 {
			ev := nextEvent(t, events)
			if ev.Type != store.EventAdded {
				types = append(types, ev.Type)
			}
		}
		assert.Equal(t, []store.EventType{store.EventEdited, store.EventDeleted, store.EventRead}, types)

		cancel()
		require.Eventually(t, func() bool { return hub.Subscribers(bob.ID) == 0 }, 5*time.Second, time.Millisecond)
	})
	t.Run("Validation", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st})
		alice, bob := mustSignUp(t, svc, "alice"), mustSignUp(t, svc, "bob")
		for _, tc := range []struct {
			name string
			err  error
			code string
		}{
			{"ShortHandle", signUpErr(svc, "ab", "password1"), store.EINVALID},
			{"BadHandle", signUpErr(svc, "al-ice", "password1"), store.EINVALID},
			{"TakenHandleAnyCase", signUpErr(svc, "ALICE", "password1"), store.ECONFLICT},
			{"ShortPassword", signUpErr(svc, "carol", "short"), store.EINVALID},
			{"WrongPassword", loginErr(svc, "alice", "password2"), store.EUNAUTHENTICATED},
			{"UnknownHandle", loginErr(svc, "nobody", "password1"), store.EUNAUTHENTICATED},
			{"EmptyText", postErr(svc, alice.ID, " \n", store.NilID), store.EINVALID},
			{"LongText", postErr(svc, alice.ID, strings.Repeat("é", store.MessageMaxLen+1), store.NilID), store.EINVALID},
			{"ReplyToUnknown", postErr(svc, alice.ID, "hi", store.NewID(c.Now())), store.ENOTFOUND},
			{"FollowSelf", followErr(svc, alice.ID, alice.ID), store.EINVALID},
			{"FollowUnknown", followErr(svc, alice.ID, store.NewID(c.Now())), store.ENOTFOUND},
		} {
			t.Run(tc.name, func(t *testing.T) {
				assert.Equal(t, tc.code, store.ErrorCode(tc.err), "%v", tc.err)
			})
		}
		_, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: strings.Repeat("é", store.MessageMaxLen)})
		assert.NoError(t, err, "exactly the limit is fine")
		m, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "mine"})
		require.NoError(t, err)
		_, err = svc.EditMessage(ctx, bob.ID, m.ID, "theirs")
		assert.Equal(t, store.EFORBIDDEN, store.ErrorCode(err))
		assert.Equal(t, store.EFORBIDDEN, store.ErrorCode(svc.DeleteMessage(ctx, bob.ID, m.ID)))
		u, err := svc.LogIn(ctx, "ALICE", "password1")
		require.NoError(t, err)
		assert.Equal(t, alice.ID, u.ID)
	})
	if st == service.StrategyRead {
		return // it stores no fan-out jobs
	}
	t.Run("ResumesStoredJobs", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		mustFollow(t, b, c, owner.ID, author.ID)
		// A job stored by a process that stopped before running it.
		m := newMessage(c, author.ID, "left behind")
		job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: st.Layout(), MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
		require.NoError(t, b.CreateMessage(ctx, m, job))
		svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st})
		waitIdle(t, svc)
		assert.Equal(t, []string{"left behind"}, inboxTexts(t, svc, owner.ID, 10))
		pending, err := b.PendingJobs(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending)
	})
}

func signUpErr(svc *service.Service, h, p string) error {
	_, err := svc.SignUp(ctx, service.SignUpInput{Handle: h, Password: p})
	return err
}

func loginErr(svc *service.Service, h, p string) error {
	_, err := svc.LogIn(ctx, h, p)
	return err
}

func postErr(svc *service.Service, author store.ID, text string, replyTo store.ID) error {
	_, err := svc.PostMessage(ctx, author, service.PostInput{Text: text, ReplyToID: replyTo})
	return err
}

func followErr(svc *service.Service, a, b store.ID) error {
	_, err := svc.Follow(ctx, a, b)
	return err
}

// testConcurrency has many users follow and post at once, then checks every
// count and inbox exactly. Follows made while posts fan out target users who
// never post, so every inbox's contents are determined.
func testConcurrency(t *testing.T, open OpenFunc, st service.Strategy) {
	const posters, quiet, posts = 10, 4, 6
	b, c := openBackend(t, open), newClock()
	svc, _ := newServiceWith(t, b, c, service.Options{Strategy: st})
	var users []*store.User
	for i := range posters + quiet {
		users = append(users, mustSignUp(t, svc, fmt.Sprintf("conc_%02d", i)))
	}
	// Poster i follows posters i+1..i+3 (mod posters): set up concurrently.
	follows := func(i int) []int { return []int{(i + 1) % posters, (i + 2) % posters, (i + 3) % posters} }
	run := func(n int, f func(i int) error) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() { errs <- f(i) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	run(posters, func(i int) error {
		for _, j := range follows(i) {
			// Following twice must still count once.
			for range 2 {
				if _, err := svc.Follow(ctx, users[i].ID, users[j].ID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	// Everyone posts while also following every quiet user.
	run(posters, func(i int) error {
		for k := range posts {
			if _, err := svc.PostMessage(ctx, users[i].ID, service.PostInput{Text: fmt.Sprintf("%d/%d", i, k)}); err != nil {
				return err
			}
			if k < quiet {
				if _, err := svc.Follow(ctx, users[i].ID, users[posters+k].ID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	waitIdle(t, svc)

	for i := range posters {
		u := mustUser(t, b, users[i].ID)
		assert.Equal(t, 3, u.FollowerCount, "followers of %d", i)
		assert.Equal(t, 3+quiet, u.FollowingCount, "following of %d", i)
		assert.Equal(t, posts, u.MessageCount)

		var want []string
		for _, j := range follows(i) {
			for k := range posts {
				want = append(want, fmt.Sprintf("%d/%d", j, k))
			}
		}
		others := len(want)
		for k := range posts { // one's own posts are at home too, never counted
			want = append(want, fmt.Sprintf("%d/%d", i, k))
		}
		got := inboxTexts(t, svc, users[i].ID, 7)
		assert.ElementsMatch(t, want, got, "inbox of %d", i)
		page, err := svc.Inbox(ctx, users[i].ID, store.Forward(store.NilID, 0))
		require.NoError(t, err)
		assert.Equal(t, others, page.Counts.Total)
		assert.Equal(t, others, page.Counts.Unread)
	}
	for k := range quiet {
		assert.Equal(t, posters, mustUser(t, b, users[posters+k].ID).FollowerCount)
	}
}

func testSeen(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, _ := newService(t, b, c)
	u := mustSignUp(t, svc, "seen_user")
	signedUp := mustUser(t, b, u.ID).LastSeenAt
	svc.Seen(ctx, u.ID)
	first := mustUser(t, b, u.ID).LastSeenAt
	assert.True(t, first.After(signedUp), "a request after sign-up is recorded")
	svc.Seen(ctx, u.ID)
	assert.Equal(t, first, mustUser(t, b, u.ID).LastSeenAt, "not written again within the hour")
	c.ms.Add(service.SeenEvery.Milliseconds())
	svc.Seen(ctx, u.ID)
	assert.True(t, mustUser(t, b, u.ID).LastSeenAt.After(first), "written again after an hour")
}

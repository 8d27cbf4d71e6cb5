package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/server/internal/servertest"
	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

// TestAccount_Export exports an account with known content and checks the
// JSON holds exactly that content; then the refusals: anonymous, and a
// second export within the rate limit.
func TestAccount_Export(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	svc := service.NewService(st, hub, service.Options{Logger: log, PasswordCost: 4})
	require.NoError(t, svc.Start(ctx))
	opts := servertest.DefaultConfig().Options
	opts.RateLimitExport = graph.Rate{Count: 1, Per: time.Hour, Burst: 1}
	ts := servertest.Serve(t, opts, log, svc, nil, nil, func() { hub.Close(); _ = st.Close() })

	me := servertest.MustSignUp(t, ts.URL, "exporter")
	friend := servertest.MustSignUp(t, ts.URL, "friend")
	fan := servertest.MustSignUp(t, ts.URL, "fan")
	pest := servertest.MustSignUp(t, ts.URL, "pest")
	bore := servertest.MustSignUp(t, ts.URL, "bore")
	servertest.MustGQL(t, ts.URL, me.Token, `mutation { updateProfile(input: {displayName: "Ex Porter", bio: "Leaving soon.", websiteUrl: "https://ex.example"}) { id } }`, nil)
	servertest.MustGQL(t, ts.URL, me.Token, `mutation { setAttributes(input: [{name: "lang", value: "en"}]) { id } }`, nil)
	servertest.MustFollow(t, ts.URL, me, friend)
	servertest.MustFollow(t, ts.URL, fan, me)
	first := servertest.MustPost(t, ts.URL, me, "first words")
	d := servertest.MustGQL(t, ts.URL, me.Token, `mutation($r: ID!) { postMessage(input: {text: "a reply to myself", replyTo: $r}) { id } }`, map[string]any{"r": first})
	reply := d["postMessage"].(map[string]any)["id"].(string)
	friends := servertest.MustPost(t, ts.URL, friend, "friend's words")
	servertest.MustGQL(t, ts.URL, me.Token, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": friends})
	servertest.MustGQL(t, ts.URL, me.Token, `mutation($id: ID!) { repost(messageId: $id) { id } }`, map[string]any{"id": friends})
	for _, x := range []struct {
		u    servertest.User
		kind store.RelationKind
	}{{pest, store.RelationBlock}, {bore, store.RelationMute}} {
		_, err := st.Block(ctx, storeIDOf(t, "User", me.ID), storeIDOf(t, "User", x.u.ID), x.kind, time.Now())
		require.NoError(t, err)
	}

	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, "", `{ exportAccount }`, nil).Code())
	d = servertest.MustGQL(t, ts.URL, me.Token, `{ exportAccount }`, nil)
	var doc struct {
		Version    int       `json:"version"`
		ExportedAt time.Time `json:"exportedAt"`
		Profile    struct {
			ID, Handle, DisplayName, Bio, WebsiteURL, AvatarURL string
			CreatedAt                                           time.Time
			Attributes                                          map[string]string
		} `json:"profile"`
		Messages []struct {
			ID, Kind, Text, ReplyTo, RepostOf string
			CreatedAt                         time.Time
		} `json:"messages"`
		Following, Followers, Blocks, Mutes, Truncated []string
		Likes                                          []struct {
			MessageID string    `json:"messageId"`
			LikedAt   time.Time `json:"likedAt"`
		} `json:"likes"`
	}
	raw := d["exportAccount"].(string)
	require.NoError(t, json.Unmarshal([]byte(raw), &doc), raw)
	assert.Equal(t, graph.ExportVersion, doc.Version)
	assert.WithinDuration(t, time.Now(), doc.ExportedAt, time.Minute)
	p := doc.Profile
	assert.Equal(t, []string{me.ID, "exporter", "Ex Porter", "Leaving soon.", "https://ex.example", ""}, []string{p.ID, p.Handle, p.DisplayName, p.Bio, p.WebsiteURL, p.AvatarURL})
	assert.WithinDuration(t, time.Now(), p.CreatedAt, time.Minute)
	assert.Equal(t, map[string]string{"lang": "en"}, p.Attributes)
	require.Len(t, doc.Messages, 3, "two messages and a repost, newest first")
	assert.Equal(t, "REPOST", doc.Messages[0].Kind)
	assert.Equal(t, friends, doc.Messages[0].RepostOf)
	assert.Empty(t, doc.Messages[0].Text)
	assert.Equal(t, []string{reply, "REPLY", "a reply to myself", first}, []string{doc.Messages[1].ID, doc.Messages[1].Kind, doc.Messages[1].Text, doc.Messages[1].ReplyTo})
	assert.Equal(t, []string{first, "POST", "first words", ""}, []string{doc.Messages[2].ID, doc.Messages[2].Kind, doc.Messages[2].Text, doc.Messages[2].ReplyTo})
	assert.Equal(t, []string{"friend"}, doc.Following)
	assert.Equal(t, []string{"fan"}, doc.Followers)
	require.Len(t, doc.Likes, 1)
	assert.Equal(t, friends, doc.Likes[0].MessageID)
	assert.WithinDuration(t, time.Now(), doc.Likes[0].LikedAt, time.Minute)
	assert.Equal(t, []string{"pest"}, doc.Blocks)
	assert.Equal(t, []string{"bore"}, doc.Mutes)
	assert.Empty(t, doc.Truncated, "nothing was cut")
	assert.Contains(t, raw, `"truncated":[]`, "every section is there, empty or not")

	assert.Equal(t, graph.CodeRateLimited, servertest.GQL(t, ts.URL, me.Token, `{ exportAccount }`, nil).Code(), "a second export within the hour")
	servertest.MustGQL(t, ts.URL, friend.Token, `{ exportAccount }`, nil)
}

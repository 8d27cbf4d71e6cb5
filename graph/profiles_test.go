package graph_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// profile is a User's profile as the API returns it.
type profile struct {
	DisplayName string  `json:"displayName"`
	Bio         *string `json:"bio"`
	WebsiteURL  *string `json:"websiteUrl"`
	AvatarURL   *string `json:"avatarUrl"`
}

const (
	profileFields = `displayName bio websiteUrl avatarUrl`
	updateProfile = `mutation($in: UpdateProfileInput!) { updateProfile(input: $in) { ` + profileFields + ` } }`
)

// mustUpdateProfile applies in as the token's user and returns the profile
// the mutation reports.
func mustUpdateProfile(t *testing.T, e *env, token string, in map[string]any) profile {
	t.Helper()
	var r struct {
		UpdateProfile profile `json:"updateProfile"`
	}
	e.mustExec(t, token, updateProfile, map[string]any{"in": in}, &r)
	return r.UpdateProfile
}

// profileOf reads a user's profile by handle, anonymously.
func profileOf(t *testing.T, e *env, handle string) profile {
	t.Helper()
	var r struct {
		User profile `json:"user"`
	}
	e.mustExec(t, "", `query($h: String!) { user(handle: $h) { `+profileFields+` } }`, map[string]any{"h": handle}, &r)
	return r.User
}

func TestUpdateProfile(t *testing.T) { forBackends(t, testUpdateProfile) }

func testUpdateProfile(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")

	t.Run("UnsetIsNull", func(t *testing.T) {
		assert.Equal(t, profile{DisplayName: "alice"}, profileOf(t, e, "alice"))
	})

	t.Run("Set", func(t *testing.T) {
		want := profile{DisplayName: "Alice Liddell", Bio: ptr("Curious.\nFalls down rabbit holes."),
			WebsiteURL: ptr("https://alice.example/"), AvatarURL: ptr("http://img.example/a.png")}
		got := mustUpdateProfile(t, e, alice, map[string]any{"displayName": "  Alice Liddell ", "bio": want.Bio,
			"websiteUrl": *want.WebsiteURL, "avatarUrl": *want.AvatarURL})
		assert.Equal(t, want, got, "the name trimmed, the bio's line break kept")
		assert.Equal(t, want, profileOf(t, e, "alice"))
	})

	t.Run("LeftOutStaysEmptyClears", func(t *testing.T) {
		got := mustUpdateProfile(t, e, alice, map[string]any{"websiteUrl": "", "bio": nil})
		assert.Equal(t, profile{DisplayName: "Alice Liddell", Bio: ptr("Curious.\nFalls down rabbit holes."),
			AvatarURL: ptr("http://img.example/a.png")}, got)
		got = mustUpdateProfile(t, e, alice, map[string]any{"bio": "", "avatarUrl": ""})
		assert.Equal(t, profile{DisplayName: "Alice Liddell"}, got)
		assert.Equal(t, got, profileOf(t, e, "alice"))
	})

	t.Run("Invalid", func(t *testing.T) {
		for _, c := range []struct {
			in   map[string]any
			want string
		}{
			{map[string]any{"displayName": " \u200b "}, "display name must not be empty"},
			{map[string]any{"displayName": strings.Repeat("a", 65)}, "display name must be at most 64 characters"},
			{map[string]any{"displayName": "evil\u202Egnp.exe"}, "display name must not contain bidirectional formatting characters (found U+202E)"},
			{map[string]any{"bio": strings.Repeat("é", 301)}, "bio must be at most 300 characters"},
			{map[string]any{"bio": "tab\there"}, "bio must not contain control characters (found U+0009)"},
			{map[string]any{"bio": "hi \u2066there"}, "bio must not contain bidirectional formatting characters (found U+2066)"},
			{map[string]any{"websiteUrl": "javascript:alert(1)"}, "website URL must be an http or https URL"},
			{map[string]any{"websiteUrl": "alice.example"}, "website URL must be an absolute http or https URL"},
			{map[string]any{"websiteUrl": "https:///path"}, "website URL must name a host"},
			{map[string]any{"websiteUrl": "https://bank.example@evil.example/"}, "website URL must not contain a user name or password"},
			{map[string]any{"avatarUrl": "https://img.example/" + strings.Repeat("a", 500)}, "avatar URL must be valid text of at most 512 bytes"},
			{map[string]any{"avatarUrl": "https://img.example/a b.png"}, "avatar URL must not contain spaces, control or bidirectional formatting characters (found U+0020)"},
		} {
			in := map[string]any{"bio": "would be set"}
			for k, v := range c.in {
				in[k] = v
			}
			_, errs := e.exec(t, alice, updateProfile, map[string]any{"in": in})
			require.Len(t, errs, 1, "%v", c.in)
			assert.Equal(t, "BAD_USER_INPUT", errs[0].Extensions.Code, "%v", c.in)
			assert.Equal(t, c.want, errs[0].Message)
		}
		assert.Equal(t, profile{DisplayName: "Alice Liddell"}, profileOf(t, e, "alice"), "a refused change changes nothing")
	})

	t.Run("SignedOut", func(t *testing.T) {
		assert.Equal(t, "UNAUTHENTICATED", e.errCode(t, "", updateProfile, map[string]any{"in": map[string]any{"bio": "x"}}))
	})

	t.Run("ShowsEverywhereAtOnce", func(t *testing.T) {
		msg := mustPost(t, e, alice, "hello")
		// One operation reads Alice (cached for it), renames her, then reads
		// her again: the later field sees the new name.
		var r struct {
			Before struct {
				Author profile `json:"author"`
			} `json:"before"`
			After struct {
				Author profile `json:"author"`
			} `json:"after"`
		}
		e.mustExec(t, alice, `mutation($m: ID!, $in: UpdateProfileInput!) {
			before: like(messageId: $m) { author { displayName } }
			updateProfile(input: $in) { displayName }
			after: unlike(messageId: $m) { author { displayName } } }`,
			map[string]any{"m": msg, "in": map[string]any{"displayName": "Alice L."}}, &r)
		assert.Equal(t, "Alice Liddell", r.Before.Author.DisplayName)
		assert.Equal(t, "Alice L.", r.After.Author.DisplayName)

		var home struct {
			Inbox struct {
				Edges []struct {
					Node struct {
						Author profile `json:"author"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"inbox"`
		}
		e.mustExec(t, alice, `{ inbox(first: 5) { edges { node { author { displayName } } } } }`, nil, &home)
		require.NotEmpty(t, home.Inbox.Edges)
		assert.Equal(t, "Alice L.", home.Inbox.Edges[0].Node.Author.DisplayName, "the home timeline shows the new name")
	})
}

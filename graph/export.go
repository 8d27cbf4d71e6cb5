package graph

import (
	"context"
	"encoding/json"
	"time"

	"herald/store"
	"herald/store/service"
)

// ExportVersion is the version of exportAccount's document; a change that
// is not only an added field makes it the next.
const ExportVersion = 1

// accountExport is exportAccount's document. IDs are the API's global IDs,
// users are named by handle, times are RFC 3339 in UTC. Sections cut at
// their cap (service.ExportMaxMessages, service.ExportMaxItems) hold their
// newest items and are named in truncated.
type accountExport struct {
	Version    int             `json:"version"`
	ExportedAt time.Time       `json:"exportedAt"`
	Profile    exportProfile   `json:"profile"`
	Messages   []exportMessage `json:"messages"`
	Following  []string        `json:"following"`
	Followers  []string        `json:"followers"`
	Likes      []exportLike    `json:"likes"`
	Blocks     []string        `json:"blocks"`
	Mutes      []string        `json:"mutes"`
	Truncated  []string        `json:"truncated"`
}

type exportProfile struct {
	ID          string            `json:"id"`
	Handle      string            `json:"handle"`
	DisplayName string            `json:"displayName"`
	Bio         string            `json:"bio"`
	WebsiteURL  string            `json:"websiteUrl"`
	AvatarURL   string            `json:"avatarUrl"`
	CreatedAt   time.Time         `json:"createdAt"`
	Attributes  map[string]string `json:"attributes"`
}

type exportMessage struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`
	Text      string     `json:"text,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	EditedAt  *time.Time `json:"editedAt,omitempty"`
	ReplyTo   string     `json:"replyTo,omitempty"`
	RepostOf  string     `json:"repostOf,omitempty"`
}

type exportLike struct {
	MessageID string    `json:"messageId"`
	LikedAt   time.Time `json:"likedAt"`
}

// exportAccount is exportAccount: the viewer's account as a JSON
// document, under the per-user export rate limit.
func (r *Resolver) exportAccount(ctx context.Context) (string, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return "", err
	}
	if err := r.LogIns.ExportAllowed(viewer); err != nil {
		return "", err
	}
	d, err := r.Service.ExportAccount(ctx, viewer)
	if err != nil {
		return "", err
	}
	return exportDocument(d, time.Now())
}

// exportDocument renders d as exportAccount's JSON.
func exportDocument(d *service.AccountData, now time.Time) (string, error) {
	u := d.User
	doc := accountExport{
		Version: ExportVersion, ExportedAt: now.UTC(),
		Profile: exportProfile{ID: globalID(typeUser, u.ID), Handle: u.Handle, DisplayName: u.DisplayName, Bio: u.Bio,
			WebsiteURL: u.WebsiteURL, AvatarURL: u.AvatarURL, CreatedAt: u.CreatedAt.UTC(), Attributes: map[string]string{}},
		Messages: make([]exportMessage, len(d.Messages)), Likes: make([]exportLike, len(d.Likes)),
		Following: handles(d.Following), Followers: handles(d.Followers), Blocks: handles(d.Blocks), Mutes: handles(d.Mutes),
		Truncated: append([]string{}, d.Truncated...),
	}
	for _, a := range u.Attributes {
		doc.Profile.Attributes[a.Name] = a.Value
	}
	for i, m := range d.Messages {
		e := exportMessage{ID: globalID(typeMessage, m.ID), Kind: string(m.Kind), Text: m.Text, CreatedAt: m.CreatedAt.UTC(), EditedAt: m.EditedAt}
		if !m.ReplyToID.IsZero() {
			e.ReplyTo = globalID(typeMessage, m.ReplyToID)
		}
		if !m.RepostOfID.IsZero() {
			e.RepostOf = globalID(typeMessage, m.RepostOfID)
		}
		doc.Messages[i] = e
	}
	for i, l := range d.Likes {
		doc.Likes[i] = exportLike{MessageID: globalID(typeMessage, l.MessageID), LikedAt: l.CreatedAt.UTC()}
	}
	b, err := json.Marshal(doc)
	return string(b), err
}

func handles(users []*store.User) []string {
	out := make([]string, len(users))
	for i, u := range users {
		out[i] = u.Handle
	}
	return out
}

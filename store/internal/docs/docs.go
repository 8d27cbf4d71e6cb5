// Package docs holds the stored shapes of Herald's documents, shared by the
// backends so that a document has one encoding everywhere: BSON with short
// field names. Short names matter at scale because every document repeats
// its field names (seed 001): a user document here is 52 bytes smaller than
// with full names, about 40 % of a typical user.
//
// Field names:
//
//	users:    _id id, h handle, n display name, p password hash, c created,
//	          s last seen, fr followers, fg following, mc messages,
//	          pc pulled messages (hybrid celebrity posts),
//	          at custom attributes: [{k name-store token, v value}]
//	messages: _id id, a author, t text, k kind (0 post, 1 reply),
//	          r replied-to message, ra its author, c created, e edited,
//	          pl pulled (not fanned out)
//	jobs:     _id job id, k kind, l layout, m message, a author (followee),
//	          o owner, c message created, cur cursor
package docs

import (
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
)

// User is a stored user.
type User struct {
	ID        primitive.ObjectID `bson:"_id"`
	Handle    string             `bson:"h"`
	Name      string             `bson:"n"`
	Pass      []byte             `bson:"p"`
	Created   time.Time          `bson:"c"`
	Seen      time.Time          `bson:"s"`
	Followers int64              `bson:"fr"`
	Following int64              `bson:"fg"`
	Messages  int64              `bson:"mc"`
	Pulled    int64              `bson:"pc,omitempty"`
	Attrs     []Attr             `bson:"at,omitempty"`
}

// Attr is a custom attribute as stored: the name's name-store token and the value.
type Attr struct {
	Token int32  `bson:"k"`
	Value string `bson:"v"`
}

// FromUser returns the stored form of u, without its attributes: those are
// stored under tokens, which the backend's name store assigns.
func FromUser(u *store.User) *User {
	return &User{
		ID: primitive.ObjectID(u.ID), Handle: u.Handle, Name: u.DisplayName, Pass: u.PasswordHash,
		Created: u.CreatedAt, Seen: u.LastSeenAt,
		Followers: int64(u.FollowerCount), Following: int64(u.FollowingCount), Messages: int64(u.MessageCount),
		Pulled: int64(u.PulledCount),
	}
}

// Store returns the domain form of d, without its attributes (see FromUser).
func (d *User) Store() *store.User {
	return &store.User{
		ID: store.ID(d.ID), Handle: d.Handle, DisplayName: d.Name, PasswordHash: d.Pass,
		CreatedAt: d.Created.UTC(), LastSeenAt: d.Seen.UTC(),
		FollowerCount: int(d.Followers), FollowingCount: int(d.Following), MessageCount: int(d.Messages),
		PulledCount: int(d.Pulled),
	}
}

// Message kinds as stored.
const (
	kindPost  = 0
	kindReply = 1
)

// Message is a stored message.
type Message struct {
	ID      primitive.ObjectID  `bson:"_id"`
	Author  primitive.ObjectID  `bson:"a"`
	Text    string              `bson:"t"`
	Kind    int32               `bson:"k"`
	ReplyTo *primitive.ObjectID `bson:"r,omitempty"`
	ReplyBy *primitive.ObjectID `bson:"ra,omitempty"`
	Created time.Time           `bson:"c"`
	Edited  *time.Time          `bson:"e,omitempty"`
	Pulled  bool                `bson:"pl,omitempty"`
}

// FromMessage returns the stored form of m.
func FromMessage(m *store.Message) *Message {
	d := &Message{ID: primitive.ObjectID(m.ID), Author: primitive.ObjectID(m.AuthorID), Text: m.Text, Kind: kindPost, Created: m.CreatedAt, Edited: m.EditedAt, Pulled: m.Pulled}
	if m.Kind == store.KindReply {
		r, ra := primitive.ObjectID(m.ReplyToID), primitive.ObjectID(m.ReplyToAuthorID)
		d.Kind, d.ReplyTo, d.ReplyBy = kindReply, &r, &ra
	}
	return d
}

// Store returns the domain form of d.
func (d *Message) Store() *store.Message {
	m := &store.Message{ID: store.ID(d.ID), AuthorID: store.ID(d.Author), Text: d.Text, Kind: store.KindPost, CreatedAt: d.Created.UTC(), Pulled: d.Pulled}
	if d.Kind == kindReply && d.ReplyTo != nil {
		m.Kind, m.ReplyToID = store.KindReply, store.ID(*d.ReplyTo)
		if d.ReplyBy != nil {
			m.ReplyToAuthorID = store.ID(*d.ReplyBy)
		}
	}
	if d.Edited != nil {
		t := d.Edited.UTC()
		m.EditedAt = &t
	}
	return m
}

// Job is a stored fan-out job, keyed by its ID.
type Job struct {
	ID      primitive.ObjectID  `bson:"_id"`
	Kind    int32               `bson:"k"`
	Layout  int32               `bson:"l"`
	Message *primitive.ObjectID `bson:"m,omitempty"`
	Author  primitive.ObjectID  `bson:"a"`
	Owner   *primitive.ObjectID `bson:"o,omitempty"`
	Created time.Time           `bson:"c"`
	Cursor  []byte              `bson:"cur,omitempty"`
}

func optID(id store.ID) *primitive.ObjectID {
	if id.IsZero() {
		return nil
	}
	o := primitive.ObjectID(id)
	return &o
}

func fromOpt(o *primitive.ObjectID) store.ID {
	if o == nil {
		return store.NilID
	}
	return store.ID(*o)
}

// FromJob returns the stored form of j.
func FromJob(j *store.Job) *Job {
	return &Job{
		ID: primitive.ObjectID(j.ID), Kind: int32(j.Kind), Layout: int32(j.Layout),
		Message: optID(j.MessageID), Author: primitive.ObjectID(j.AuthorID), Owner: optID(j.OwnerID),
		Created: j.CreatedAt, Cursor: j.Cursor,
	}
}

// Store returns the domain form of d.
func (d *Job) Store() *store.Job {
	return &store.Job{
		ID: store.ID(d.ID), Kind: store.JobKind(d.Kind), Layout: store.Layout(d.Layout),
		MessageID: fromOpt(d.Message), AuthorID: store.ID(d.Author), OwnerID: fromOpt(d.Owner),
		CreatedAt: d.Created.UTC(), Cursor: d.Cursor,
	}
}

// Marshal encodes a document as BSON.
func Marshal(v any) ([]byte, error) { return bson.Marshal(v) }

// Unmarshal decodes a BSON document.
func Unmarshal(b []byte, v any) error { return bson.Unmarshal(b, v) }

// Package docs holds the stored shapes of Herald's documents, shared by the
// backends so that a document has one encoding everywhere: BSON with short
// field names. Short names matter at scale because every document repeats
// its field names (Field names and name store: docs/design.md#field-names):
// a user document here is 52 bytes smaller than with full names, about 40 %
// of a typical user.
//
// Field names:
//
//	users:    _id id, h handle, n display name, bi bio, w website URL,
//	          au avatar URL, p password hash, c created,
//	          s last seen, fr followers, fg following, mc messages,
//	          pc pulled messages (hybrid celebrity posts),
//	          at custom attributes: [{k name-store token, v value}],
//	          tv token version, rt revoked tokens: [{i token id, e expires}],
//	          pv private account (absent when public),
//	          mf who may message the user (absent: everyone)
//	messages: _id id, a author, t text, k kind (0 post, 1 reply, 2 repost),
//	          r replied-to message, ra its author, c created, e edited,
//	          pl pulled (not fanned out), me mentioned users,
//	          lc like count, rc reply count, tr thread root, tra its author,
//	          ro reposted message, roa its author, rp repost count
//	jobs:     _id job id, k kind, l layout, m message, a author (followee),
//	          o owner, c message created, cur cursor
package docs

import (
	"bytes"
	"encoding/binary"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/x/bsonx/bsoncore"

	"herald/store"
	"herald/store/storage"
)

// User is a stored user.
type User struct {
	ID        primitive.ObjectID `bson:"_id"`
	Handle    string             `bson:"h"`
	Name      string             `bson:"n"`
	Bio       string             `bson:"bi,omitempty"`
	Website   string             `bson:"w,omitempty"`
	Avatar    string             `bson:"au,omitempty"`
	Pass      []byte             `bson:"p"`
	Created   time.Time          `bson:"c"`
	Seen      time.Time          `bson:"s"`
	Followers int64              `bson:"fr"`
	Following int64              `bson:"fg"`
	Messages  int64              `bson:"mc"`
	Pulled    int64              `bson:"pc,omitempty"`
	Attrs     []Attr             `bson:"at,omitempty"`
	TokenVer  int64              `bson:"tv,omitempty"`
	Revoked   []Revoked          `bson:"rt,omitempty"`
	Kept      string             `bson:"kt,omitempty"`
	// Deleted is when the account was deleted: a tombstone kept until the
	// handle is freed.
	Deleted *time.Time `bson:"dl,omitempty"`
	Private bool       `bson:"pv,omitempty"`
	// NeverBlocked (store.User.NeverBlocked): present, true, until the
	// user is first blocked.
	NeverBlocked bool  `bson:"nb,omitempty"`
	MsgFrom      int32 `bson:"mf,omitempty"`
}

// Revoked is a revoked token as stored: its id and when it expires.
type Revoked struct {
	ID      string    `bson:"i"`
	Expires time.Time `bson:"e"`
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
		Bio: u.Bio, Website: u.WebsiteURL, Avatar: u.AvatarURL,
		Created: u.CreatedAt, Seen: u.LastSeenAt,
		Followers: int64(u.FollowerCount), Following: int64(u.FollowingCount), Messages: int64(u.MessageCount),
		Pulled: int64(u.PulledCount), TokenVer: int64(u.TokenVersion), Revoked: FromRevoked(u.RevokedTokens), Kept: u.KeptToken,
		Private: u.Private, NeverBlocked: u.NeverBlocked, MsgFrom: int32(u.MessagesFrom),
	}
}

// FromRevoked returns the stored form of revoked tokens; nil for none.
func FromRevoked(ts []store.RevokedToken) []Revoked {
	if len(ts) == 0 {
		return nil
	}
	out := make([]Revoked, len(ts))
	for i, t := range ts {
		out[i] = Revoked{ID: t.ID, Expires: t.Expires}
	}
	return out
}

// Store returns the domain form of d, without its attributes (see FromUser).
func (d *User) Store() *store.User {
	return &store.User{
		ID: store.ID(d.ID), Handle: d.Handle, DisplayName: d.Name, PasswordHash: d.Pass,
		Bio: d.Bio, WebsiteURL: d.Website, AvatarURL: d.Avatar,
		CreatedAt: d.Created.UTC(), LastSeenAt: d.Seen.UTC(),
		FollowerCount: int(d.Followers), FollowingCount: int(d.Following), MessageCount: int(d.Messages),
		PulledCount: int(d.Pulled), TokenVersion: int(d.TokenVer), RevokedTokens: d.RevokedTokens(),
		KeptToken: d.Kept, DeletedAt: d.DeletedAt(), Private: d.Private, NeverBlocked: d.NeverBlocked,
		MessagesFrom: store.MessagePolicy(d.MsgFrom),
	}
}

// DeletedAt returns when d's account was deleted; zero for a live one.
func (d *User) DeletedAt() time.Time {
	if d.Deleted == nil {
		return time.Time{}
	}
	return d.Deleted.UTC()
}

// RevokedTokens returns the domain form of d's revoked tokens; nil for none.
func (d *User) RevokedTokens() []store.RevokedToken {
	if len(d.Revoked) == 0 {
		return nil
	}
	out := make([]store.RevokedToken, len(d.Revoked))
	for i, t := range d.Revoked {
		out[i] = store.RevokedToken{ID: t.ID, Expires: t.Expires.UTC()}
	}
	return out
}

// Message kinds as stored.
const (
	kindPost   = 0
	kindReply  = 1
	kindRepost = 2
)

// Message is a stored message.
type Message struct {
	ID       primitive.ObjectID   `bson:"_id"`
	Author   primitive.ObjectID   `bson:"a"`
	Text     string               `bson:"t,omitempty"` // none for a repost
	Kind     int32                `bson:"k"`
	ReplyTo  *primitive.ObjectID  `bson:"r,omitempty"`
	ReplyBy  *primitive.ObjectID  `bson:"ra,omitempty"`
	Created  time.Time            `bson:"c"`
	Edited   *time.Time           `bson:"e,omitempty"`
	Pulled   bool                 `bson:"pl,omitempty"`
	Mentions []primitive.ObjectID `bson:"me,omitempty"`
	Likes    int64                `bson:"lc,omitempty"`
	Root     *primitive.ObjectID  `bson:"tr,omitempty"`
	RootBy   *primitive.ObjectID  `bson:"tra,omitempty"`
	Replies  int64                `bson:"rc,omitempty"`
	RepostOf *primitive.ObjectID  `bson:"ro,omitempty"`
	RepostBy *primitive.ObjectID  `bson:"roa,omitempty"`
	Hidden   bool                 `bson:"hh,omitempty"` // a repost not at its author's own home
	Reposts  int64                `bson:"rp,omitempty"`
}

// FromMessage returns the stored form of m.
func FromMessage(m *store.Message) *Message {
	d := &Message{ID: primitive.ObjectID(m.ID), Author: primitive.ObjectID(m.AuthorID), Text: m.Text, Kind: kindPost, Created: m.CreatedAt, Edited: m.EditedAt, Pulled: m.Pulled,
		Mentions: FromIDs(m.Mentions), Likes: int64(m.LikeCount), Root: optID(m.RootID), RootBy: optID(m.RootAuthorID), Replies: int64(m.ReplyCount),
		Reposts: int64(m.RepostCount)}
	switch m.Kind {
	case store.KindReply:
		r, ra := primitive.ObjectID(m.ReplyToID), primitive.ObjectID(m.ReplyToAuthorID)
		d.Kind, d.ReplyTo, d.ReplyBy = kindReply, &r, &ra
	case store.KindRepost:
		ro, roa := primitive.ObjectID(m.RepostOfID), primitive.ObjectID(m.RepostOfAuthorID)
		d.Kind, d.RepostOf, d.RepostBy, d.Hidden = kindRepost, &ro, &roa, m.HomeHidden
	}
	return d
}

// Store returns the domain form of d.
func (d *Message) Store() *store.Message {
	m := new(store.Message)
	d.StoreTo(m)
	return m
}

// StoreTo sets m to the domain form of d, so that a batch read can decode
// its messages into one slice instead of allocating each.
func (d *Message) StoreTo(m *store.Message) {
	*m = store.Message{ID: store.ID(d.ID), AuthorID: store.ID(d.Author), Text: d.Text, Kind: store.KindPost, CreatedAt: d.Created.UTC(), Pulled: d.Pulled,
		Mentions: ToIDs(d.Mentions), LikeCount: int(d.Likes), RootID: fromOpt(d.Root), RootAuthorID: fromOpt(d.RootBy), ReplyCount: int(d.Replies),
		RepostCount: int(d.Reposts)}
	switch {
	case d.Kind == kindReply && d.ReplyTo != nil:
		m.Kind, m.ReplyToID, m.ReplyToAuthorID = store.KindReply, store.ID(*d.ReplyTo), fromOpt(d.ReplyBy)
	case d.Kind == kindRepost && d.RepostOf != nil:
		m.Kind, m.RepostOfID, m.RepostOfAuthorID, m.HomeHidden = store.KindRepost, store.ID(*d.RepostOf), fromOpt(d.RepostBy), d.Hidden
	}
	if d.Edited != nil {
		t := d.Edited.UTC()
		m.EditedAt = &t
	}
}

// FromIDs returns the stored form of ids; nil for none.
func FromIDs(ids []store.ID) []primitive.ObjectID {
	if len(ids) == 0 {
		return nil
	}
	out := make([]primitive.ObjectID, len(ids))
	for i, id := range ids {
		out[i] = primitive.ObjectID(id)
	}
	return out
}

// ToIDs returns the domain form of stored ids; nil for none.
func ToIDs(os []primitive.ObjectID) []store.ID {
	if len(os) == 0 {
		return nil
	}
	out := make([]store.ID, len(os))
	for i, o := range os {
		out[i] = store.ID(o)
	}
	return out
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
	ReplyTo *primitive.ObjectID `bson:"rt,omitempty"` // a JobDeliver's ReplyToAuthorID
	Repost  *primitive.ObjectID `bson:"ro,omitempty"` // a JobDeliver's RepostOfAuthorID
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
func FromJob(j *storage.Job) *Job {
	return &Job{
		ID: primitive.ObjectID(j.ID), Kind: int32(j.Kind), Layout: int32(j.Layout),
		Message: optID(j.MessageID), Author: primitive.ObjectID(j.AuthorID), Owner: optID(j.OwnerID),
		Created: j.CreatedAt, Cursor: j.Cursor, ReplyTo: optID(j.ReplyToAuthorID), Repost: optID(j.RepostOfAuthorID),
	}
}

// Store returns the domain form of d.
func (d *Job) Store() *storage.Job {
	return &storage.Job{
		ID: store.ID(d.ID), Kind: storage.JobKind(d.Kind), Layout: storage.Layout(d.Layout),
		MessageID: fromOpt(d.Message), AuthorID: store.ID(d.Author), OwnerID: fromOpt(d.Owner),
		CreatedAt: d.Created.UTC(), Cursor: d.Cursor, ReplyToAuthorID: fromOpt(d.ReplyTo), RepostOfAuthorID: fromOpt(d.Repost),
	}
}

// Marshal encodes a document as BSON.
func Marshal(v any) ([]byte, error) { return bson.Marshal(v) }

// Unmarshal decodes a BSON document.
func Unmarshal(b []byte, v any) error { return bson.Unmarshal(b, v) }

// UnmarshalMessage decodes a stored message as Unmarshal does, but without
// reflection for a document of the shape Marshal writes (each field of the
// expected BSON type): timeline reads decode dozens of messages each, and
// bson.Unmarshal was most of their cost. Any other document, malformed
// ones included, goes to Unmarshal, so the result (or error) is the same.
func UnmarshalMessage(b []byte, d *Message) error {
	if decodeMessage(b, d) {
		return nil
	}
	// Unmarshal takes an interface, which would move d to the heap on
	// every call; only this slow path pays for a heap copy.
	var slow Message
	err := Unmarshal(b, &slow)
	*d = slow
	return err
}

func decodeMessage(b []byte, d *Message) bool {
	n, rest, ok := bsoncore.ReadLength(b)
	if !ok || int(n) != len(b) || len(rest) == 0 || rest[len(rest)-1] != 0 {
		return false
	}
	rest = rest[:len(rest)-1]
	*d = Message{}
	for len(rest) > 0 {
		var e bsoncore.Element
		if e, rest, ok = bsoncore.ReadElement(rest); !ok {
			return false
		}
		v := e.Value()
		switch string(e.KeyBytes()) {
		case "_id":
			d.ID, ok = v.ObjectIDOK()
		case "a":
			d.Author, ok = v.ObjectIDOK()
		case "t":
			d.Text, ok = decodeString(v)
		case "k":
			d.Kind, ok = v.Int32OK()
		case "r":
			d.ReplyTo, ok = decodeOptID(v)
		case "ra":
			d.ReplyBy, ok = decodeOptID(v)
		case "c":
			d.Created, ok = decodeTime(v)
		case "e":
			var t time.Time
			t, ok = decodeTime(v)
			d.Edited = &t
		case "pl":
			// bson.Unmarshal refuses a boolean byte other than 0 or 1.
			ok = v.Type == bson.TypeBoolean && len(v.Data) == 1 && v.Data[0] <= 1
			d.Pulled = ok && v.Data[0] == 1
		case "hh":
			ok = v.Type == bson.TypeBoolean && len(v.Data) == 1 && v.Data[0] <= 1
			d.Hidden = ok && v.Data[0] == 1
		case "me":
			d.Mentions, ok = decodeIDs(v)
		case "lc":
			d.Likes, ok = v.Int64OK()
		case "tr":
			d.Root, ok = decodeOptID(v)
		case "tra":
			d.RootBy, ok = decodeOptID(v)
		case "rc":
			d.Replies, ok = v.Int64OK()
		case "ro":
			d.RepostOf, ok = decodeOptID(v)
		case "roa":
			d.RepostBy, ok = decodeOptID(v)
		case "rp":
			d.Reposts, ok = v.Int64OK()
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// decodeOptID decodes an ObjectID into a pointer, as bson.Unmarshal does
// for a *primitive.ObjectID field that is present.
func decodeOptID(v bsoncore.Value) (*primitive.ObjectID, bool) {
	id, ok := v.ObjectIDOK()
	return &id, ok
}

// decodeIDs decodes an array of ObjectIDs as bson.Unmarshal does: an empty
// array is an empty slice, not nil, and its keys are not checked.
func decodeIDs(v bsoncore.Value) ([]primitive.ObjectID, bool) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, false
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, false
	}
	out := make([]primitive.ObjectID, len(vals))
	for i, e := range vals {
		if out[i], ok = e.ObjectIDOK(); !ok {
			return nil, false
		}
	}
	return out, true
}

// UnmarshalUser decodes a stored user as Unmarshal does, but without
// reflection for a document of the shape Marshal writes for a user with a
// password and no attributes (each field of the expected BSON type): a
// timeline page decodes its authors. Any other document goes to Unmarshal,
// so the result (or error) is the same.
func UnmarshalUser(b []byte, d *User) error {
	if decodeUser(b, d) {
		return nil
	}
	// As in UnmarshalMessage, only this path pays for a heap copy.
	var slow User
	err := Unmarshal(b, &slow)
	*d = slow
	return err
}

func decodeUser(b []byte, d *User) bool {
	n, rest, ok := bsoncore.ReadLength(b)
	if !ok || int(n) != len(b) || len(rest) == 0 || rest[len(rest)-1] != 0 {
		return false
	}
	rest = rest[:len(rest)-1]
	*d = User{}
	for len(rest) > 0 {
		var e bsoncore.Element
		if e, rest, ok = bsoncore.ReadElement(rest); !ok {
			return false
		}
		v := e.Value()
		switch string(e.KeyBytes()) {
		case "_id":
			d.ID, ok = v.ObjectIDOK()
		case "h":
			d.Handle, ok = decodeString(v)
		case "n":
			d.Name, ok = decodeString(v)
		case "p":
			d.Pass, ok = decodeBinary(v)
		case "c":
			d.Created, ok = decodeTime(v)
		case "s":
			d.Seen, ok = decodeTime(v)
		case "fr":
			d.Followers, ok = v.Int64OK()
		case "fg":
			d.Following, ok = v.Int64OK()
		case "mc":
			d.Messages, ok = v.Int64OK()
		case "pc":
			d.Pulled, ok = v.Int64OK()
		case "tv":
			d.TokenVer, ok = v.Int64OK()
		case "nb":
			d.NeverBlocked, ok = v.BooleanOK()
		default: // attributes, revoked tokens, and anything unknown
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// decodeBinary decodes a non-empty BSON binary of the generic subtype into
// a copy, as bson.Unmarshal decodes it into a []byte; other binaries (and
// the empty one) are left to bson.Unmarshal.
func decodeBinary(v bsoncore.Value) ([]byte, bool) {
	sub, data, ok := v.BinaryOK()
	if !ok || sub != 0 || len(data) == 0 || len(v.Data) != 5+len(data) {
		return nil, false
	}
	return bytes.Clone(data), true
}

// decodeString decodes a BSON string whose length and terminating NUL are
// as bson.Unmarshal requires.
func decodeString(v bsoncore.Value) (string, bool) {
	n := len(v.Data)
	if v.Type != bson.TypeString || n < 5 || int(binary.LittleEndian.Uint32(v.Data)) != n-4 || v.Data[n-1] != 0 {
		return "", false
	}
	return string(v.Data[4 : n-1]), true
}

// decodeTime decodes a BSON datetime as bson.Unmarshal decodes it into a
// time.Time.
func decodeTime(v bsoncore.Value) (time.Time, bool) {
	ms, ok := v.DateTimeOK()
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(ms/1000, ms%1000*1_000_000).UTC(), true
}

package docs

import (
	"encoding/base64"
	"encoding/hex"
	"time"

	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
)

// Conv is a stored conversation: _id ConvDocID of the conversation ID, n a group's name, cr its
// creator, m members, ad admins, sq the last message's seq, t created,
// rd the members' read positions (read receipts) by member ID in hex.
type Conv struct {
	ID      string               `bson:"_id"`
	Name    string               `bson:"n,omitempty"`
	Creator primitive.ObjectID   `bson:"cr,omitempty"`
	Members []primitive.ObjectID `bson:"m"`
	Admins  []primitive.ObjectID `bson:"ad,omitempty"`
	Seq     int64                `bson:"sq"`
	Created time.Time            `bson:"t"`
	Reads   map[string]int64     `bson:"rd,omitempty"`
}

// FromConv returns the stored form of c.
func FromConv(c *store.Conversation) *Conv {
	d := &Conv{
		ID: ConvDocID(c.ID), Name: c.Name, Creator: primitive.ObjectID(c.CreatorID),
		Members: oids(c.Members), Admins: oids(c.Admins), Seq: int64(c.LastSeq), Created: c.CreatedAt,
	}
	for i, m := range c.Members {
		if i < len(c.ReadSeqs) && c.ReadSeqs[i] > 0 {
			if d.Reads == nil {
				d.Reads = map[string]int64{}
			}
			d.Reads[m.String()] = int64(c.ReadSeqs[i])
		}
	}
	return d
}

// Store returns the domain form of d.
func (d *Conv) Store() *store.Conversation {
	id, _ := base64.RawURLEncoding.DecodeString(d.ID)
	c := &store.Conversation{
		ID: store.ConversationID(id), Name: d.Name, CreatorID: store.ID(d.Creator),
		Members: storeIDs(d.Members), Admins: storeIDs(d.Admins), LastSeq: uint64(d.Seq), CreatedAt: d.Created.UTC(),
	}
	c.ReadSeqs = make([]uint64, len(c.Members))
	for i, m := range c.Members {
		c.ReadSeqs[i] = uint64(d.Reads[m.String()])
	}
	return c
}

// ConvDocID is a conversation's _id: its ID's bytes in unpadded base64url
// (32 characters for a direct conversation, 16 for a group). Not binData:
// the in-process engine the tests run on cannot update a document whose
// _id is binData; a string is near as small.
func ConvDocID(c store.ConversationID) string { return base64.RawURLEncoding.EncodeToString([]byte(c)) }

func oids(ids []store.ID) []primitive.ObjectID {
	out := make([]primitive.ObjectID, len(ids))
	for i, id := range ids {
		out[i] = primitive.ObjectID(id)
	}
	return out
}

func storeIDs(ids []primitive.ObjectID) []store.ID {
	out := make([]store.ID, len(ids))
	for i, id := range ids {
		out[i] = store.ID(id)
	}
	return out
}

// ConvMsg is a stored conversation message: _id its ID (its time), c the
// conversation, s its seq, a author, x text, e edited, d deleted, p
// pending (a send not yet finished). As a list entry's copy of the last
// message it has no c.
type ConvMsg struct {
	ID      primitive.ObjectID `bson:"_id"`
	Conv    []byte             `bson:"c,omitempty"`
	Seq     int64              `bson:"s"`
	Author  primitive.ObjectID `bson:"a"`
	Text    string             `bson:"x,omitempty"`
	Edited  *time.Time         `bson:"e,omitempty"`
	Deleted bool               `bson:"d,omitempty"`
	Pending bool               `bson:"p,omitempty"`
}

// FromConvMsg returns the stored form of m.
func FromConvMsg(m *store.ConversationMessage) *ConvMsg {
	return &ConvMsg{
		ID: primitive.ObjectID(m.ID), Conv: []byte(m.ConversationID), Seq: int64(m.Seq), Author: primitive.ObjectID(m.AuthorID),
		Text: m.Text, Edited: m.EditedAt, Deleted: m.Deleted,
	}
}

// Store returns the domain form of d, a message of conv.
func (d *ConvMsg) Store(conv store.ConversationID) *store.ConversationMessage {
	m := &store.ConversationMessage{
		ID: store.ID(d.ID), ConversationID: conv, Seq: uint64(d.Seq), AuthorID: store.ID(d.Author),
		Text: d.Text, CreatedAt: store.ID(d.ID).Time().UTC(), Deleted: d.Deleted,
	}
	if d.Edited != nil {
		t := d.Edited.UTC()
		m.EditedAt = &t
	}
	return m
}

// Snapshot is d as a list entry's copy of the last message: without its
// conversation, which the entry names.
func (d ConvMsg) Snapshot() *ConvMsg {
	d.Conv, d.Pending = nil, false
	return &d
}

// ReadState is a user's read state: v maps each conversation (its ID in
// hex) to {l the last seq the user was told of, r the last one read}.
type ReadState struct {
	V map[string]ReadPos `bson:"v"`
}

// ReadPos is one conversation's entry of a ReadState.
type ReadPos struct {
	Last int64 `bson:"l"`
	Read int64 `bson:"r,omitempty"`
}

// Unread returns the conversations of s with unread messages.
func (s *ReadState) Unread() store.UnreadConversations {
	out := store.UnreadConversations{}
	for k, p := range s.V {
		if p.Last <= p.Read {
			continue
		}
		b, err := hex.DecodeString(k)
		if err != nil {
			continue
		}
		out[store.ConversationID(b)] = store.UnreadState{LastSeq: uint64(p.Last), ReadSeq: uint64(p.Read)}
	}
	return out
}

package store

import (
	"encoding/hex"
	"time"
)

// ConversationID names a conversation. A direct (private) conversation's
// is its two users' IDs, the smaller first (24 bytes), so either user
// finds it without a lookup; a group's is the group's ID (12 bytes). The
// length tells the kind. It holds the raw bytes, so it is comparable and
// a map key; String and ParseConversationID carry it in cursors and
// GraphQL ids.
type ConversationID string

// DirectConversationID returns the conversation of users a and b.
func DirectConversationID(a, b ID) ConversationID {
	if a.Compare(b) > 0 {
		a, b = b, a
	}
	return ConversationID(string(a[:]) + string(b[:]))
}

// GroupConversationID returns the conversation of the group id.
func GroupConversationID(id ID) ConversationID { return ConversationID(string(id[:])) }

// IsGroup reports whether c is a group's conversation.
func (c ConversationID) IsGroup() bool { return len(c) == len(ID{}) }

// Valid reports whether c has the shape of a conversation ID: a group's
// ID, or two distinct user IDs in order.
func (c ConversationID) Valid() bool {
	switch len(c) {
	case len(ID{}):
		return true
	case 2 * len(ID{}):
		a, b := c.Users()
		return a.Compare(b) < 0
	}
	return false
}

// Users returns a direct conversation's two users, the smaller first.
func (c ConversationID) Users() (ID, ID) {
	var a, b ID
	copy(a[:], c)
	copy(b[:], c[len(a):])
	return a, b
}

// Group returns a group conversation's ID.
func (c ConversationID) Group() ID {
	var id ID
	copy(id[:], c)
	return id
}

// Other returns the user of a direct conversation who is not me.
func (c ConversationID) Other(me ID) ID {
	a, b := c.Users()
	if a == me {
		return b
	}
	return a
}

// String returns c in hex: 24 characters for a group, 48 for a direct
// conversation.
func (c ConversationID) String() string { return hex.EncodeToString([]byte(c)) }

// ParseConversationID parses String's form; anything else is
// BAD_USER_INPUT.
func ParseConversationID(s string) (ConversationID, error) {
	b, err := hex.DecodeString(s)
	c := ConversationID(b)
	if err != nil || !c.Valid() {
		return "", Errorf(EINVALID, "invalid conversation id %q", s)
	}
	return c, nil
}

// Conversation is a direct conversation between two users or a group's.
// Members are bounded (the service's group size limit), so they are kept
// with it: sending checks membership and learns whom to tell in one read.
type Conversation struct {
	ID ConversationID
	// Name is a group's name; empty for a direct conversation.
	Name string
	// CreatorID created the group (NilID for a direct conversation).
	CreatorID ID
	// Members in the order they joined; Admins may add and remove
	// members (a group's creator is one). A direct conversation's members
	// are its two users and it has no admins.
	Members []ID
	Admins  []ID
	// LastSeq is the sequence number of its latest message (0: none).
	LastSeq   uint64
	CreatedAt time.Time
	// ReadSeqs are the members' read positions (read receipts), aligned
	// with Members: the seq of the last message each has read.
	ReadSeqs []uint64
}

// IsMember reports whether user is a member of c.
func (c *Conversation) IsMember(user ID) bool { return indexOf(c.Members, user) >= 0 }

// IsAdmin reports whether user is an admin of c.
func (c *Conversation) IsAdmin(user ID) bool { return indexOf(c.Admins, user) >= 0 }

// ReadSeq returns user's read position in c.
func (c *Conversation) ReadSeq(user ID) uint64 {
	if i := indexOf(c.Members, user); i >= 0 && i < len(c.ReadSeqs) {
		return c.ReadSeqs[i]
	}
	return 0
}

func indexOf(ids []ID, id ID) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// ConversationMessage is one message of a conversation. Seq numbers a
// conversation's messages 1, 2, 3... with no gap: a deleted message keeps
// its place (Deleted, no text), so unread counts are differences of
// sequence numbers.
type ConversationMessage struct {
	ID             ID // made at its sending, so it holds the time
	ConversationID ConversationID
	Seq            uint64
	AuthorID       ID
	Text           string
	CreatedAt      time.Time
	EditedAt       *time.Time
	Deleted        bool
}

// ConversationEntry is one conversation of a user's conversation list,
// which is ordered by LastActivity, newest first.
type ConversationEntry struct {
	ConversationID ConversationID
	// LastActivity is the ID of its latest message, or the group's ID
	// until it has one: the list's order and cursor.
	LastActivity ID
	// Last is a copy of its latest message (nil until it has one), kept
	// up to date by edits and deletions.
	Last *ConversationMessage
}

// UnreadState is a user's read state in one conversation: LastSeq is the
// newest message the user was told of, ReadSeq the last one read.
type UnreadState struct {
	LastSeq uint64
	ReadSeq uint64
}

// Unread is how many messages the user has not read.
func (u UnreadState) Unread() int {
	if u.LastSeq > u.ReadSeq {
		return int(u.LastSeq - u.ReadSeq)
	}
	return 0
}

// UnreadConversations is a user's read state in every conversation it
// has unread messages in, read at once.
type UnreadConversations map[ConversationID]UnreadState

// Total is the user's unread messages over every conversation.
func (u UnreadConversations) Total() int {
	n := 0
	for _, s := range u {
		n += s.Unread()
	}
	return n
}

// SeqRange selects up to Limit messages of a conversation, which lists
// newest first (highest Seq first), next to the cursor From (exclusive;
// 0: from the newest). Without Reverse they are the older ones, with
// Reverse the newer ones, nearest to From first, as store.Range.
type SeqRange struct {
	From    uint64
	Limit   int
	Reverse bool
}

// MessagePolicy says who may send a user a direct message.
type MessagePolicy uint8

// Message policies. The zero value is everyone, so that stored users
// without the field keep today's behaviour.
const (
	MessagesFromEveryone MessagePolicy = iota
	MessagesFromFollowed               // the people the user follows
	MessagesFromNobody
)

// MessagePolicies names the policies as the GraphQL enum values.
var MessagePolicies = map[MessagePolicy]string{
	MessagesFromEveryone: "EVERYONE",
	MessagesFromFollowed: "FOLLOWING",
	MessagesFromNobody:   "NOBODY",
}

// ConversationNameMaxLen bounds a group's name, in characters.
const ConversationNameMaxLen = 100

package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"herald/store"
	"herald/store/storage"
)

// DefaultMaxGroupMembers is Options.MaxGroupMembers' default.
const DefaultMaxGroupMembers = 256

// conversationSendGrace is how old a pending send must be before the
// recovery pass finishes it: its sender, if alive, finishes it sooner.
const conversationSendGrace = 30 * time.Second

// ConversationItem is one conversation of a viewer's list: the
// conversation, its list entry (its last message and place) and the
// viewer's unread count in it.
type ConversationItem struct {
	Conversation *store.Conversation
	Entry        store.ConversationEntry
	Unread       int
}

// ConversationPage is a page of a viewer's conversations, most recently
// active first; an item's Entry.LastActivity is its cursor.
type ConversationPage struct {
	Items   []ConversationItem
	HasMore bool
}

// ConversationMessagePage is a page of a conversation's messages, newest
// first; a message's Seq is its cursor.
type ConversationMessagePage struct {
	Messages []*store.ConversationMessage
	HasMore  bool
}

// member returns conv if viewer is a member of it, else NOT_FOUND: a
// conversation one is not in does not exist for one.
func (s *Service) member(ctx context.Context, viewer store.ID, conv store.ConversationID) (*store.Conversation, error) {
	if !conv.Valid() {
		return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
	}
	found, err := s.backend.FindConversations(ctx, []store.ConversationID{conv})
	if err != nil {
		return nil, err
	}
	if found[0] == nil || !found[0].IsMember(viewer) {
		return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
	}
	return found[0], nil
}

// Conversation returns conv, with its members' read positions (read
// receipts); NOT_FOUND unless viewer is a member. A direct conversation
// exists from its first message.
func (s *Service) Conversation(ctx context.Context, viewer store.ID, conv store.ConversationID) (*store.Conversation, error) {
	return s.member(ctx, viewer, conv)
}

// refuseDirect refuses (FORBIDDEN) a direct message from viewer to the
// user to: either blocks the other, or to's MessagesFrom does not let
// viewer in. It also reports NOT_FOUND for a missing or deleted user.
func (s *Service) refuseDirect(ctx context.Context, viewer, to store.ID) error {
	// Viewer comes in the same read: a user never blocked
	// (store.User.NeverBlocked) spares the read of that side's blocks.
	users, err := s.backend.FindUsersByIDs(ctx, []store.ID{to, viewer})
	if err != nil {
		return err
	}
	if users[0] == nil {
		return store.Errorf(store.ENOTFOUND, "user not found")
	}
	if err := s.refuseBlocked(ctx, viewer, to, users[1] != nil && users[1].NeverBlocked, users[0].NeverBlocked); err != nil {
		return err
	}
	switch users[0].MessagesFrom {
	case store.MessagesFromNobody:
		return store.Errorf(store.EFORBIDDEN, "this user accepts no direct messages")
	case store.MessagesFromFollowed:
		follows, err := s.backend.FindFollowing(ctx, to, []store.ID{viewer})
		if err != nil {
			return err
		}
		if !follows[0] {
			return store.Errorf(store.EFORBIDDEN, "this user accepts direct messages only from the people they follow")
		}
	}
	return nil
}

// SendDirectMessage sends text from viewer to the user to, in their
// direct conversation, which the first message creates. A block either
// way, or to's MessagesFrom setting, makes it FORBIDDEN (also in a
// conversation that exists).
func (s *Service) SendDirectMessage(ctx context.Context, viewer, to store.ID, text string) (*store.ConversationMessage, error) {
	if viewer == to {
		return nil, store.Errorf(store.EINVALID, "you cannot message yourself")
	}
	if err := store.ValidateMessageText(text); err != nil {
		return nil, err
	}
	if err := s.refuseDirect(ctx, viewer, to); err != nil {
		return nil, err
	}
	return s.appendMessage(ctx, viewer, store.DirectConversationID(viewer, to), text)
}

// SendConversationMessage sends text from viewer to conv, a group's or a
// direct conversation (under SendDirectMessage's rules); NOT_FOUND
// unless viewer is a member.
func (s *Service) SendConversationMessage(ctx context.Context, viewer store.ID, conv store.ConversationID, text string) (*store.ConversationMessage, error) {
	if !conv.Valid() {
		return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
	}
	if !conv.IsGroup() {
		a, b := conv.Users()
		if viewer != a && viewer != b {
			return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
		}
		return s.SendDirectMessage(ctx, viewer, conv.Other(viewer), text)
	}
	if err := store.ValidateMessageText(text); err != nil {
		return nil, err
	}
	return s.appendMessage(ctx, viewer, conv, text)
}

func (s *Service) appendMessage(ctx context.Context, viewer store.ID, conv store.ConversationID, text string) (*store.ConversationMessage, error) {
	now := s.clock()
	m := &store.ConversationMessage{ID: store.NewID(now), ConversationID: conv, AuthorID: viewer, Text: text, CreatedAt: now}
	c, err := s.backend.AppendConversationMessage(ctx, m)
	if err != nil {
		return nil, err
	}
	s.publishConversation(ctx, c.Members, store.Event{Type: store.EventConversationMessage, MessageID: m.ID, AuthorID: m.AuthorID}, conv, m.Seq)
	return m, nil
}

// publishConversation publishes ev, of conversation conv at seq, to each
// of members.
func (s *Service) publishConversation(ctx context.Context, members []store.ID, ev store.Event, conv store.ConversationID, seq uint64) {
	ev.Conversation = &store.ConversationRef{ID: conv, Seq: seq}
	evs := make([]store.Event, len(members))
	for i, u := range members {
		evs[i] = ev
		evs[i].UserID = u
	}
	s.events.Publish(ctx, evs...)
}

// CreateGroup creates a group conversation named name, of viewer (its
// creator and first admin) and members, at most Options.MaxGroupMembers
// in all. Every member must be a user (NOT_FOUND).
func (s *Service) CreateGroup(ctx context.Context, viewer store.ID, name string, members []store.ID) (*store.Conversation, error) {
	name, err := store.NormalizeConversationName(name)
	if err != nil {
		return nil, err
	}
	all := []store.ID{viewer}
	for _, u := range members {
		if !slices.Contains(all, u) {
			all = append(all, u)
		}
	}
	if len(all) > s.opts.MaxGroupMembers {
		return nil, store.Errorf(store.EINVALID, "a group has at most %d members", s.opts.MaxGroupMembers)
	}
	if err := s.refuseAdded(ctx, viewer, all[1:]); err != nil {
		return nil, err
	}
	now := s.clock()
	c := &store.Conversation{ID: store.GroupConversationID(store.NewID(now)), Name: name, CreatorID: viewer,
		Members: all, Admins: []store.ID{viewer}, CreatedAt: now, ReadSeqs: make([]uint64, len(all))}
	if err := s.backend.CreateConversation(ctx, c); err != nil {
		return nil, err
	}
	// Each member is told that they joined (not of every other member:
	// that would be members² events); the conversation names the rest.
	evs := make([]store.Event, len(all))
	ref := &store.ConversationRef{ID: c.ID}
	for i, u := range all {
		evs[i] = store.Event{Type: store.EventConversationMemberAdded, UserID: u, Subject: u, Conversation: ref}
	}
	s.events.Publish(ctx, evs...)
	return c, nil
}

// refuseAdded applies the direct message's rules to each user viewer
// puts in a group (a group is a way to message them): NOT_FOUND unless
// every one is a live user, FORBIDDEN if a block stands either way or a
// user's MessagesFrom does not let viewer in; else a spammer could reach
// through groups the users who refuse their direct messages. The refusal
// names the users refused (at most three). At most four batched reads,
// whatever the number of users: the users (and viewer), their blocks of
// viewer (none if nobody ever blocked viewer), viewer's of those someone
// has blocked, and whether those who take messages only from the people
// they follow follow viewer.
func (s *Service) refuseAdded(ctx context.Context, viewer store.ID, ids []store.ID) error {
	if len(ids) == 0 {
		return nil
	}
	// Viewer comes last in the same read: one nobody has blocked needs
	// no read of who of them blocks it.
	users, err := s.backend.FindUsersByIDs(ctx, append(slices.Clip(ids), viewer))
	if err != nil {
		return err
	}
	me := users[len(ids)]
	users = users[:len(ids)]
	refused := make([]bool, len(users))
	// followedOnly take messages only from the people they follow; maybe
	// are those someone has blocked, the only ones viewer can block.
	var followedOnly, maybe []store.ID
	for i, u := range users {
		if u == nil {
			return store.Errorf(store.ENOTFOUND, "user not found")
		}
		switch u.MessagesFrom {
		case store.MessagesFromNobody:
			refused[i] = true
		case store.MessagesFromFollowed:
			followedOnly = append(followedOnly, u.ID)
		}
		if !u.NeverBlocked {
			maybe = append(maybe, u.ID)
		}
	}
	blockers := make([]store.RelationKind, len(ids))
	if me == nil || !me.NeverBlocked {
		if blockers, err = s.backend.FindBlockers(ctx, viewer, ids); err != nil {
			return err
		}
	}
	blocks := map[store.ID]bool{}
	if len(maybe) > 0 {
		b, err := s.backend.FindBlocked(ctx, viewer, store.RelationBlock, maybe)
		if err != nil {
			return err
		}
		for i, id := range maybe {
			blocks[id] = b[i]
		}
	}
	follows := map[store.ID]bool{}
	if len(followedOnly) > 0 {
		// FindFollowers(viewer, us): whether each of us follows viewer.
		f, err := s.backend.FindFollowers(ctx, viewer, followedOnly)
		if err != nil {
			return err
		}
		for i, id := range followedOnly {
			follows[id] = f[i]
		}
	}
	var handles []string
	for i, u := range users {
		if u.MessagesFrom == store.MessagesFromFollowed && !follows[u.ID] {
			refused[i] = true
		}
		if refused[i] || blockers[i]&store.RelationBlock != 0 || blocks[u.ID] {
			handles = append(handles, "@"+u.Handle)
		}
	}
	switch {
	case len(handles) == 0:
		return nil
	case len(handles) > 3:
		handles = append(handles[:3], fmt.Sprintf("%d more", len(handles)-3))
	}
	return store.Errorf(store.EFORBIDDEN, "cannot be added, by their settings or a block: %s", strings.Join(handles, ", "))
}

// group returns group conversation conv for a change by viewer: NOT_FOUND
// unless viewer is a member, BAD_USER_INPUT for a direct conversation,
// and FORBIDDEN unless viewer is an admin when admin is true.
func (s *Service) group(ctx context.Context, viewer store.ID, conv store.ConversationID, admin bool) (*store.Conversation, error) {
	c, err := s.member(ctx, viewer, conv)
	if err != nil {
		return nil, err
	}
	if !conv.IsGroup() {
		return nil, store.Errorf(store.EINVALID, "a direct conversation has no members to change")
	}
	if admin && !c.IsAdmin(viewer) {
		return nil, store.Errorf(store.EFORBIDDEN, "only the group's admins change its members")
	}
	return c, nil
}

// AddConversationMembers adds users to group conv (viewer must be one of
// its admins), within Options.MaxGroupMembers, and returns it.
func (s *Service) AddConversationMembers(ctx context.Context, viewer store.ID, conv store.ConversationID, users []store.ID) (*store.Conversation, error) {
	before, err := s.group(ctx, viewer, conv, true)
	if err != nil {
		return nil, err
	}
	// Members already in are not added again, nor checked.
	if err := s.refuseAdded(ctx, viewer, slices.DeleteFunc(slices.Clone(users), before.IsMember)); err != nil {
		return nil, err
	}
	c, err := s.backend.ChangeConversationMembers(ctx, conv, storage.MemberChange{Add: users, MaxMembers: s.opts.MaxGroupMembers, At: s.clock()})
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		s.publishConversation(ctx, c.Members, store.Event{Type: store.EventConversationMemberAdded, Subject: u}, conv, 0)
	}
	return c, nil
}

// RemoveConversationMember removes member from group conv (viewer must
// be one of its admins, or member itself: LeaveConversation), and
// returns it. The removed member is told, and has access no more. An
// admin may remove another admin; if the last admin goes, the backend
// makes the longest-standing member left the admin in the same update,
// so the MEMBER_REMOVED event's conversation, read after, shows it.
func (s *Service) RemoveConversationMember(ctx context.Context, viewer store.ID, conv store.ConversationID, member store.ID) (*store.Conversation, error) {
	before, err := s.group(ctx, viewer, conv, viewer != member)
	if err != nil {
		return nil, err
	}
	if !before.IsMember(member) {
		return nil, store.Errorf(store.ENOTFOUND, "no such member")
	}
	c, err := s.backend.ChangeConversationMembers(ctx, conv, storage.MemberChange{Remove: member, At: s.clock()})
	if err != nil {
		return nil, err
	}
	s.publishConversation(ctx, append(slices.Clone(c.Members), member), store.Event{Type: store.EventConversationMemberRemoved, Subject: member}, conv, 0)
	return c, nil
}

// LeaveConversation removes viewer from group conv.
func (s *Service) LeaveConversation(ctx context.Context, viewer store.ID, conv store.ConversationID) error {
	_, err := s.RemoveConversationMember(ctx, viewer, conv, viewer)
	return err
}

// MarkConversationRead moves viewer's read position in conv up to upTo
// (never back; past the last message it stops there), and returns
// viewer's unread conversations after.
func (s *Service) MarkConversationRead(ctx context.Context, viewer store.ID, conv store.ConversationID, upTo uint64) (store.UnreadConversations, error) {
	c, err := s.member(ctx, viewer, conv)
	if err != nil {
		return nil, err
	}
	upTo = min(upTo, c.LastSeq)
	u, err := s.backend.MarkConversationRead(ctx, viewer, conv, upTo)
	if err != nil {
		return nil, err
	}
	if upTo > c.ReadSeq(viewer) {
		s.publishConversation(ctx, c.Members, store.Event{Type: store.EventConversationRead, Subject: viewer}, conv, upTo)
	}
	return u, nil
}

// UnreadConversations returns viewer's unread count in each conversation
// with unread messages (Total is their sum): one read of one record.
func (s *Service) UnreadConversations(ctx context.Context, viewer store.ID) (store.UnreadConversations, error) {
	return s.backend.ReadUnreadConversations(ctx, viewer)
}

// conversationMessage returns message seq of conv for a change by
// viewer: NOT_FOUND if missing or deleted, FORBIDDEN unless viewer wrote
// it.
func (s *Service) conversationMessage(ctx context.Context, viewer store.ID, conv store.ConversationID, seq uint64) (*store.Conversation, error) {
	c, err := s.member(ctx, viewer, conv)
	if err != nil {
		return nil, err
	}
	ms, err := s.backend.ListConversationMessages(ctx, conv, store.SeqRange{From: seq + 1, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 || ms[0].Seq != seq || ms[0].Deleted {
		return nil, store.Errorf(store.ENOTFOUND, "message not found")
	}
	if ms[0].AuthorID != viewer {
		return nil, store.Errorf(store.EFORBIDDEN, "you can only change your own messages")
	}
	return c, nil
}

// EditConversationMessage sets the text of viewer's message seq of conv.
// Every member sees the edit, in the history and in their lists.
func (s *Service) EditConversationMessage(ctx context.Context, viewer store.ID, conv store.ConversationID, seq uint64, text string) (*store.ConversationMessage, error) {
	if err := store.ValidateMessageText(text); err != nil {
		return nil, err
	}
	c, err := s.conversationMessage(ctx, viewer, conv, seq)
	if err != nil {
		return nil, err
	}
	m, err := s.backend.UpdateConversationMessage(ctx, conv, seq, storage.ConversationMessageUpdate{Text: &text, EditedAt: s.clock()})
	if err != nil {
		return nil, err
	}
	s.publishConversation(ctx, c.Members, store.Event{Type: store.EventConversationMessageEdited, MessageID: m.ID, AuthorID: m.AuthorID}, conv, seq)
	return m, nil
}

// DeleteConversationMessage deletes viewer's message seq of conv: its
// text goes, its place stays (Deleted), so seqs and counts stay as they
// are.
func (s *Service) DeleteConversationMessage(ctx context.Context, viewer store.ID, conv store.ConversationID, seq uint64) (*store.ConversationMessage, error) {
	c, err := s.conversationMessage(ctx, viewer, conv, seq)
	if err != nil {
		return nil, err
	}
	m, err := s.backend.UpdateConversationMessage(ctx, conv, seq, storage.ConversationMessageUpdate{Delete: true})
	if err != nil {
		return nil, err
	}
	s.publishConversation(ctx, c.Members, store.Event{Type: store.EventConversationMessageDeleted, MessageID: m.ID, AuthorID: m.AuthorID}, conv, seq)
	return m, nil
}

// ConversationMessages returns a page of conv's messages, newest first,
// within r (paged both ways by seq); NOT_FOUND unless viewer is a member.
// Deleted messages are in it, as tombstones.
func (s *Service) ConversationMessages(ctx context.Context, viewer store.ID, conv store.ConversationID, r store.SeqRange) (ConversationMessagePage, error) {
	c, err := s.member(ctx, viewer, conv)
	if err != nil {
		return ConversationMessagePage{}, err
	}
	return s.ConversationMessagesIn(ctx, viewer, c, r)
}

// ConversationMessagesIn is ConversationMessages of c, a conversation the
// caller read (through this service) in the same request: its membership
// is checked on c, with no second read of it. NOT_FOUND unless viewer is
// one of c's members, as c has them.
func (s *Service) ConversationMessagesIn(ctx context.Context, viewer store.ID, c *store.Conversation, r store.SeqRange) (ConversationMessagePage, error) {
	if c == nil || !c.IsMember(viewer) {
		return ConversationMessagePage{}, store.Errorf(store.ENOTFOUND, "conversation not found")
	}
	conv := c.ID
	more := r
	more.Limit++
	ms, err := s.backend.ListConversationMessages(ctx, conv, more)
	if err != nil {
		return ConversationMessagePage{}, err
	}
	ms, has := trimPage(ms, store.Range{Limit: r.Limit, Reverse: r.Reverse})
	return ConversationMessagePage{Messages: ms, HasMore: has}, nil
}

// Conversations returns a page of viewer's conversations, most recently
// active first, within r (its From an entry's LastActivity), each with
// its last message and viewer's unread count: three reads (the list, its
// conversations, the read state), whatever the page's size.
func (s *Service) Conversations(ctx context.Context, viewer store.ID, r store.Range) (ConversationPage, error) {
	// An entry whose membership ended (a removal cut short) is skipped,
	// and the page read on past it.
	var convs map[store.ConversationID]*store.Conversation
	items, more, err := readPage(r, func(r store.Range) ([]store.ConversationEntry, error) {
		return readOn(r, func(r store.Range) ([]store.ConversationEntry, error) {
			return s.backend.ListConversations(ctx, viewer, r)
		}, func(es []store.ConversationEntry) ([]store.ConversationEntry, error) {
			ids := make([]store.ConversationID, len(es))
			for i, e := range es {
				ids[i] = e.ConversationID
			}
			found, err := s.backend.FindConversations(ctx, ids)
			if err != nil {
				return nil, err
			}
			if convs == nil {
				convs = make(map[store.ConversationID]*store.Conversation, len(es))
			}
			kept := es[:0:0]
			for i, e := range es {
				if found[i] != nil && found[i].IsMember(viewer) {
					convs[e.ConversationID] = found[i]
					kept = append(kept, e)
				}
			}
			return kept, nil
		}, func(e store.ConversationEntry) store.ID { return e.LastActivity })
	})
	if err != nil {
		return ConversationPage{}, err
	}
	unread, err := s.backend.ReadUnreadConversations(ctx, viewer)
	if err != nil {
		return ConversationPage{}, err
	}
	page := ConversationPage{Items: make([]ConversationItem, len(items)), HasMore: more}
	for i, e := range items {
		page.Items[i] = ConversationItem{Conversation: convs[e.ConversationID], Entry: e, Unread: unread[e.ConversationID].Unread()}
	}
	return page, nil
}

// recoverConversationSends finishes the sends their senders left
// unfinished (a crashed process) and tells the members of each.
func (s *Service) recoverConversationSends(ctx context.Context) error {
	done, err := s.backend.RecoverConversationSends(ctx, s.clock().Add(-conversationSendGrace))
	if err != nil || len(done) == 0 {
		return err
	}
	ids := make([]store.ConversationID, len(done))
	for i, m := range done {
		ids[i] = m.ConversationID
	}
	convs, err := s.backend.FindConversations(ctx, ids)
	if err != nil {
		return err
	}
	for i, m := range done {
		if convs[i] != nil {
			s.publishConversation(ctx, convs[i].Members, store.Event{Type: store.EventConversationMessage, MessageID: m.ID, AuthorID: m.AuthorID}, m.ConversationID, m.Seq)
		}
	}
	s.log.InfoContext(ctx, "unfinished conversation sends recovered", "messages", len(done))
	return nil
}

// SetMessagesFrom sets who may send viewer a direct message, and returns
// viewer.
func (s *Service) SetMessagesFrom(ctx context.Context, viewer store.ID, p store.MessagePolicy) (*store.User, error) {
	if p > store.MessagesFromNobody {
		return nil, store.Errorf(store.EINVALID, "unknown message policy")
	}
	return s.backend.UpdateUser(ctx, viewer, storage.UserUpdate{MessagesFrom: &p})
}

package graph

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"herald/graph/model"
	"herald/store"
	"herald/store/pubsub"
	"herald/store/service"
)

// A conversation's global id carries its conversation ID (24 or 48 hex
// digits); a conversation message's carries the conversation's and its
// seq ("<hex>:<seq>"), which is what finds it.
const (
	typeConversation        = "Conversation"
	typeConversationMessage = "ConversationMessage"
)

func conversationGlobalID(c store.ConversationID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typeConversation + ":" + c.String()))
}

func conversationMessageGlobalID(c store.ConversationID, seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typeConversationMessage + ":" + c.String() + ":" + strconv.FormatUint(seq, 10)))
}

// isConversationNode reports whether the global id s names a conversation
// or a conversation message, which nodes resolves apart.
func isConversationNode(s string) bool {
	typ, _, _ := splitGlobalID(s)
	return typ == typeConversation || typ == typeConversationMessage
}

func parseConversationID(s string) (store.ConversationID, error) {
	typ, rest, ok := splitGlobalID(s)
	if !ok || typ != typeConversation {
		return "", store.Errorf(store.EINVALID, "id is not a Conversation id")
	}
	c, err := store.ParseConversationID(rest)
	if err != nil || c.String() != rest {
		return "", store.Errorf(store.EINVALID, "malformed id")
	}
	return c, nil
}

func parseConversationMessageID(s string) (store.ConversationID, uint64, error) {
	bad := store.Errorf(store.EINVALID, "id is not a ConversationMessage id")
	typ, rest, ok := splitGlobalID(s)
	if !ok || typ != typeConversationMessage {
		return "", 0, bad
	}
	hexID, seqText, _ := strings.Cut(rest, ":")
	c, err := store.ParseConversationID(hexID)
	if err != nil || c.String() != hexID {
		return "", 0, bad
	}
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil || seq == 0 || strconv.FormatUint(seq, 10) != seqText {
		return "", 0, bad
	}
	return c, seq, nil
}

// parseUserIDs parses a list of user global ids.
func parseUserIDs(ss []string) ([]store.ID, error) {
	ids := make([]store.ID, len(ss))
	for i, s := range ss {
		id, err := parseUserID(s)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// seqCursor is a conversation message's cursor: its seq.
func seqCursor(seq uint64) string {
	var raw [9]byte
	raw[0] = byte(cursorConvMessages)
	binary.BigEndian.PutUint64(raw[1:], seq)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// seqPaging is paging for a conversation's messages, whose cursors are
// seqs rather than IDs.
func seqPaging(first *int, after *string, last *int, before *string) (store.SeqRange, store.Range, error) {
	forward := last == nil && before == nil
	if !forward && (first != nil || after != nil) {
		return store.SeqRange{}, store.Range{}, store.Errorf(store.EINVALID, "a page goes forward (first, after) or backward (last, before), not both")
	}
	arg, size, cursor := "first", first, after
	if !forward {
		arg, size, cursor = "last", last, before
	}
	limit, err := store.PageSize(arg, size)
	if err != nil {
		return store.SeqRange{}, store.Range{}, err
	}
	r := store.SeqRange{Limit: limit, Reverse: !forward}
	if cursor != nil {
		p, err := decodeCursor(cursorConvMessages, 8, *cursor)
		if err != nil {
			return store.SeqRange{}, store.Range{}, err
		}
		if r.From = binary.BigEndian.Uint64(p); r.From == 0 {
			return store.SeqRange{}, store.Range{}, errInvalidCursor()
		}
	}
	return r, store.Range{Limit: limit, Reverse: !forward}, nil
}

// conversations returns a page of viewer's conversations, most recently
// active first: three reads whatever the page's size (Service.Conversations),
// the members then loading in one batch.
func (r *Resolver) conversations(ctx context.Context, first *int, after *string, last *int, before *string) (*model.ConversationConnection, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	rg, err := paging(cursorConversations, first, after, last, before)
	if err != nil {
		return nil, err
	}
	page, err := r.Service.Conversations(ctx, viewer, rg)
	if err != nil {
		return nil, err
	}
	conn := &model.ConversationConnection{Edges: make([]*model.ConversationEdge, len(page.Items))}
	cursors := make([]string, len(page.Items))
	for i, it := range page.Items {
		cursors[i] = encodeIDCursor(cursorConversations, it.Entry.LastActivity)
		conn.Edges[i] = &model.ConversationEdge{Cursor: cursors[i], Node: &model.Conversation{
			Conversation: it.Conversation, Last: it.Entry.Last, LastKnown: true, Unread: &it.Unread}}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// conversation returns the conversation of the global id; NOT_FOUND
// unless the viewer is a member.
func (r *Resolver) conversation(ctx context.Context, id string) (*model.Conversation, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	conv, err := parseConversationID(id)
	if err != nil {
		return nil, err
	}
	c, err := r.Service.Conversation(ctx, viewer, conv)
	if err != nil {
		return nil, err
	}
	return &model.Conversation{Conversation: c}, nil
}

// conversationNode resolves a conversation or conversation message id for
// Query.node(s): the viewer's only, nil for the rest and when nobody is
// signed in.
func (r *Resolver) conversationNode(ctx context.Context, id string) (model.Node, error) {
	viewer, ok := ViewerFromContext(ctx)
	typ, _, _ := splitGlobalID(id)
	var n model.Node
	var err error
	if typ == typeConversation {
		var conv store.ConversationID
		if conv, err = parseConversationID(id); err != nil {
			return nil, err
		}
		if !ok {
			return nil, nil
		}
		var c *store.Conversation
		if c, err = r.Service.Conversation(ctx, viewer, conv); err == nil {
			n = &model.Conversation{Conversation: c}
		}
	} else {
		conv, seq, perr := parseConversationMessageID(id)
		if perr != nil {
			return nil, perr
		}
		if !ok {
			return nil, nil
		}
		var m *store.ConversationMessage
		if m, err = r.conversationMessage(ctx, viewer, conv, seq); err == nil && m != nil {
			n = m
		}
	}
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil, nil
	}
	return n, err
}

// conversationMessage reads message seq of conv for viewer: NOT_FOUND
// unless a member, nil when there is no such message.
func (r *Resolver) conversationMessage(ctx context.Context, viewer store.ID, conv store.ConversationID, seq uint64) (*store.ConversationMessage, error) {
	page, err := r.Service.ConversationMessages(ctx, viewer, conv, store.SeqRange{From: seq + 1, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Messages) == 0 || page.Messages[0].Seq != seq {
		return nil, nil
	}
	return page.Messages[0], nil
}

// conversationMessages returns a page of c's messages, newest first; their
// authors load in one batch. c was read for the viewer in this request
// (conversation, the list, a mutation's result), so its membership is
// checked on it rather than by reading it again.
func (r *Resolver) conversationMessages(ctx context.Context, c *model.Conversation, first *int, after *string, last *int, before *string) (*model.ConversationMessageConnection, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	sr, rg, err := seqPaging(first, after, last, before)
	if err != nil {
		return nil, err
	}
	page, err := r.Service.ConversationMessagesIn(ctx, viewer, c.Conversation, sr)
	if err != nil {
		return nil, err
	}
	conn := &model.ConversationMessageConnection{Edges: make([]*model.ConversationMessageEdge, len(page.Messages))}
	cursors := make([]string, len(page.Messages))
	for i, m := range page.Messages {
		cursors[i] = seqCursor(m.Seq)
		conn.Edges[i] = &model.ConversationMessageEdge{Cursor: cursors[i], Node: m}
	}
	conn.PageInfo = pageInfo(cursors, rg, page.HasMore)
	return conn, nil
}

// lastMessage is c's newest message: the list read it with c, else it is
// read now.
func (r *Resolver) lastMessage(ctx context.Context, c *model.Conversation) (*store.ConversationMessage, error) {
	if c.LastKnown || c.LastSeq == 0 {
		return c.Last, nil
	}
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	return r.conversationMessage(ctx, viewer, c.ID, c.LastSeq)
}

// unreadCount is the viewer's unread count in c: the list read it with c,
// else it is read now.
func (r *Resolver) unreadCount(ctx context.Context, c *model.Conversation) (int, error) {
	if c.Unread != nil {
		return *c.Unread, nil
	}
	viewer, err := requireViewer(ctx)
	if err != nil {
		return 0, err
	}
	u, err := r.Service.UnreadConversations(ctx, viewer)
	if err != nil {
		return 0, err
	}
	return u[c.ID].Unread(), nil
}

func readPositions(c *model.Conversation) []*model.ReadPosition {
	out := make([]*model.ReadPosition, len(c.Members))
	for i, u := range c.Members {
		out[i] = &model.ReadPosition{MemberID: u, Seq: int(c.ReadSeq(u))}
	}
	return out
}

// peer is a direct conversation's other user, for the viewer.
func peer(ctx context.Context, c *model.Conversation) (*store.User, error) {
	viewer, ok := ViewerFromContext(ctx)
	if c.ID.IsGroup() || !ok {
		return nil, nil
	}
	return optionalUser(ctx, c.ID.Other(viewer))
}

func (r *Resolver) conversationsUnreadCount(ctx context.Context) (int, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return 0, err
	}
	u, err := r.Service.UnreadConversations(ctx, viewer)
	return u.Total(), err
}

func (r *Resolver) sendDirectMessage(ctx context.Context, to, text string) (*store.ConversationMessage, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	user, err := parseUserID(to)
	if err != nil {
		return nil, err
	}
	return r.Service.SendDirectMessage(ctx, viewer, user, text)
}

func (r *Resolver) sendGroupMessage(ctx context.Context, conversationID, text string) (*store.ConversationMessage, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	conv, err := parseConversationID(conversationID)
	if err != nil {
		return nil, err
	}
	return r.Service.SendConversationMessage(ctx, viewer, conv, text)
}

func (r *Resolver) createGroup(ctx context.Context, name string, memberIDs []string) (*model.Conversation, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	members, err := parseUserIDs(memberIDs)
	if err != nil {
		return nil, err
	}
	c, err := r.Service.CreateGroup(ctx, viewer, name, members)
	if err != nil {
		return nil, err
	}
	return &model.Conversation{Conversation: c, LastKnown: true}, nil
}

// changeMembers adds users to the group of conversationID (add), or
// removes one.
func (r *Resolver) changeMembers(ctx context.Context, conversationID string, userIDs []string, add bool) (*model.Conversation, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	conv, err := parseConversationID(conversationID)
	if err != nil {
		return nil, err
	}
	users, err := parseUserIDs(userIDs)
	if err != nil {
		return nil, err
	}
	if len(users) == 0 {
		return nil, store.Errorf(store.EINVALID, "name at least one user to add")
	}
	var c *store.Conversation
	if add {
		c, err = r.Service.AddConversationMembers(ctx, viewer, conv, users)
	} else {
		c, err = r.Service.RemoveConversationMember(ctx, viewer, conv, users[0])
	}
	if err != nil {
		return nil, err
	}
	return &model.Conversation{Conversation: c}, nil
}

func (r *Resolver) leaveConversation(ctx context.Context, conversationID string) (string, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return "", err
	}
	conv, err := parseConversationID(conversationID)
	if err != nil {
		return "", err
	}
	return conversationID, r.Service.LeaveConversation(ctx, viewer, conv)
}

// markConversationRead moves the viewer's read position in the
// conversation of id up to the message upTo (nil: the newest), and returns
// the conversation as it is after.
func (r *Resolver) markConversationRead(ctx context.Context, id string, upTo *string) (*model.Conversation, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	conv, err := parseConversationID(id)
	if err != nil {
		return nil, err
	}
	seq := uint64(math.MaxUint64) // the service stops at the last message
	if upTo != nil {
		of, s, err := parseConversationMessageID(*upTo)
		if err != nil {
			return nil, err
		}
		if of != conv {
			return nil, store.Errorf(store.ENOTFOUND, "no such message in this conversation")
		}
		seq = s
	}
	u, err := r.Service.MarkConversationRead(ctx, viewer, conv, seq)
	if err != nil {
		return nil, err
	}
	c, err := r.Service.Conversation(ctx, viewer, conv)
	if err != nil {
		return nil, err
	}
	unread := u[conv].Unread()
	return &model.Conversation{Conversation: c, Unread: &unread}, nil
}

func (r *Resolver) editConversationMessage(ctx context.Context, id, text string) (*store.ConversationMessage, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	conv, seq, err := parseConversationMessageID(id)
	if err != nil {
		return nil, err
	}
	return r.Service.EditConversationMessage(ctx, viewer, conv, seq, text)
}

func (r *Resolver) deleteConversationMessage(ctx context.Context, id string) (string, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return "", err
	}
	conv, seq, err := parseConversationMessageID(id)
	if err != nil {
		return "", err
	}
	if _, err := r.Service.DeleteConversationMessage(ctx, viewer, conv, seq); err != nil {
		return "", err
	}
	return id, nil
}

func (r *Resolver) setMessagesFrom(ctx context.Context, p store.MessagePolicy) (*store.User, error) {
	viewer, err := requireViewer(ctx)
	if err != nil {
		return nil, err
	}
	u, err := r.Service.SetMessagesFrom(ctx, viewer, p)
	if err != nil {
		return nil, err
	}
	refreshUser(ctx, u)
	return u, nil
}

// conversationEventTypes maps the store's conversation events to the
// subscription's types.
var conversationEventTypes = map[store.EventType]model.ConversationEventType{
	store.EventConversationMessage:        model.ConversationEventTypeMessage,
	store.EventConversationMessageEdited:  model.ConversationEventTypeEdited,
	store.EventConversationMessageDeleted: model.ConversationEventTypeDeleted,
	store.EventConversationRead:           model.ConversationEventTypeRead,
	store.EventConversationMemberAdded:    model.ConversationEventTypeMemberAdded,
	store.EventConversationMemberRemoved:  model.ConversationEventTypeMemberRemoved,
}

// conversationEvents subscribes to viewer's events and forwards those of
// its conversations, as inboxEvents forwards the inbox's (the same
// machinery, resumption and ending rules).
func (r *Resolver) conversationEvents(ctx context.Context, viewer store.ID, after *string) (<-chan *model.ConversationEvent, error) {
	pos, err := decodeEventCursor(after)
	if err != nil {
		return nil, err
	}
	out := make(chan *model.ConversationEvent)
	deliver := func(ev store.Event) bool {
		ce, err := r.conversationEvent(ctx, viewer, ev)
		if err != nil {
			if ctx.Err() == nil {
				r.logger().ErrorContext(ctx, "graphql: a conversation event; event skipped", "user", viewer.String(), "err", err)
			}
			return true
		}
		if ce == nil {
			return true
		}
		select {
		case out <- ce:
			return true
		case <-ctx.Done():
			return false
		}
	}
	opts := pubsub.SubscribeOptions{After: pos, Filter: isConversationEvent}
	if err := r.Service.SubscribeWith(ctx, viewer, opts, deliver, func() { close(out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// isConversationEvent keeps the events conversationEvents delivers.
func isConversationEvent(ev store.Event) bool {
	return ev.Type.Conversational() && ev.Conversation != nil
}

// conversationEvent reads what ev's type carries, as it is now, as the
// viewer may see it: an event of a conversation the viewer is no longer a
// member of is skipped (nil), but the viewer's own removal, so that a
// removed member gets its MEMBER_REMOVED and nothing after.
func (r *Resolver) conversationEvent(ctx context.Context, viewer store.ID, ev store.Event) (*model.ConversationEvent, error) {
	ref := ev.Conversation
	ce := &model.ConversationEvent{Type: conversationEventTypes[ev.Type], ConvID: ref.ID, Cursor: encodeEventCursor(ev.Position)}
	switch ev.Type {
	case store.EventConversationMessage, store.EventConversationMessageEdited:
		// The message's read checks the membership.
		m, err := r.conversationMessage(ctx, viewer, ref.ID, ref.Seq)
		if store.ErrorCode(err) == store.ENOTFOUND || err == nil && m == nil {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		if ev.Type == store.EventConversationMessage {
			ce.Edge = &model.ConversationMessageEdge{Cursor: seqCursor(m.Seq), Node: m}
		} else {
			ce.Message = m
		}
	default:
		c, err := r.Service.Conversation(ctx, viewer, ref.ID)
		switch {
		case store.ErrorCode(err) == store.ENOTFOUND && ev.Type == store.EventConversationMemberRemoved && ev.Subject == viewer:
			c = nil
		case store.ErrorCode(err) == store.ENOTFOUND:
			return nil, nil
		case err != nil:
			return nil, err
		}
		switch ev.Type {
		case store.EventConversationMessageDeleted:
			id := conversationMessageGlobalID(ref.ID, ref.Seq)
			ce.DeletedMessageID = &id
		case store.EventConversationRead:
			seq := int(ref.Seq)
			ce.MemberID, ce.ReadSeq = ev.Subject, &seq
		default: // MEMBER_ADDED, MEMBER_REMOVED
			ce.MemberID = ev.Subject
			if c != nil {
				ce.Conversation = &model.Conversation{Conversation: c}
			}
		}
	}
	u, err := r.Service.UnreadConversations(ctx, viewer)
	if err != nil {
		return nil, err
	}
	ce.UnreadCount = u.Total()
	return ce, nil
}

// membersCost is what Conversation.members (and readPositions) cost per
// child: a group's largest size by default, the bound of the list.
const membersCost = service.DefaultMaxGroupMembers

package mongostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// Conversations (docs/design.md#conversations; collections in schema.go).
// A send is several writes without a transaction, ordered so that a crash
// between any two loses nothing acknowledged and leaves counts exact once
// RecoverConversationSends has run:
//
//  1. read the conversation (membership, its last seq);
//  2. insert the message at the next seq, marked pending (p): the unique
//     index (c, s) makes the insert the claim of the seq, so seqs have no
//     gap; a duplicate means another sender took it, and the next is tried;
//  3. move the conversation in the list of every member step 1 read,
//     unless a newer message is there already (a filter on ls: late or
//     repeated writes are no-ops);
//  4. raise those members' known last seq, the author's read seq too
//     ($max);
//  5. raise the conversation's sq and the author's read receipt ($max),
//     reading the members as they are after: any member step 1 read who
//     is gone now was removed while the send ran, and its entry and read
//     state, which steps 3 and 4 may have written after the removal took
//     them away, are taken away again;
//  6. clear the pending mark.
//
// Steps 3 to 6 are idempotent, so recovery repeats them for every message
// still pending. Step 5 after 3 and 4 is what keeps a removed member
// clean without a transaction: a removal's update of the conversation is
// either before step 5's (which then sees it and cleans up after steps 3
// and 4) or after it (and then after steps 3 and 4, so the removal's own
// deletions, which follow its update, clean up).

// convFilter finds a conversation by its shard key.
func convFilter(c store.ConversationID) bson.D { return bson.D{{Key: "_id", Value: docs.ConvDocID(c)}} }

func (s *Store) findConv(ctx context.Context, c store.ConversationID) (*docs.Conv, error) {
	var d docs.Conv
	err := s.convs.FindOne(ctx, convFilter(c)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("find conversation", err)
	}
	return &d, nil
}

// CreateConversation implements storage.Backend: the members' list
// entries first, then the conversation, so a crash in between leaves
// entries that name no conversation (which readers skip), never a group
// missing from a member's list.
func (s *Store) CreateConversation(ctx context.Context, c *store.Conversation) error {
	if err := s.placeEntries(ctx, c.ID, c.Members, c.ID.Group(), nil); err != nil {
		return err
	}
	_, err := s.convs.InsertOne(ctx, docs.FromConv(c))
	if isDuplicate(err) {
		return store.Errorf(store.ECONFLICT, "conversation exists")
	}
	return wrap("create conversation", err)
}

// placeEntries puts conv in each user's list, in one unordered bulk
// write. With msg (a message) the entry takes it as its last message
// unless it holds a later one already (filter ls < its seq, so late and
// repeated writes are no-ops: the upsert then collides with the unique
// (u, c) and is ignored), and moves to last if that is later ($max: the
// list's order never goes back, though a message's ID and its seq may be
// in different orders across senders). Without msg (a group created, a
// member added) the entry sits at last unless it is later already.
func (s *Store) placeEntries(ctx context.Context, conv store.ConversationID, users []store.ID, last store.ID, msg *docs.ConvMsg) error {
	if len(users) == 0 {
		return nil
	}
	cond := bson.E{Key: "lt", Value: bson.D{{Key: "$lt", Value: oid(last)}}}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "lt", Value: oid(last)}}}}
	if msg != nil {
		cond = bson.E{Key: "ls", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: msg.Seq}}}}}
		update = bson.D{
			{Key: "$max", Value: bson.D{{Key: "lt", Value: oid(last)}}},
			{Key: "$set", Value: bson.D{{Key: "ls", Value: msg.Seq}, {Key: "lm", Value: msg.Snapshot()}}},
		}
	}
	models := make([]mongo.WriteModel, len(users))
	for i, u := range users {
		models[i] = mongo.NewUpdateOneModel().SetUpsert(true).
			SetFilter(bson.D{{Key: "u", Value: oid(u)}, {Key: "c", Value: []byte(conv)}, cond}).SetUpdate(update)
	}
	return wrap("place conversation entries", upsertAll(ctx, s.userConvs, models))
}

// upsertAll runs models, upserts, as one unordered bulk write. Two upserts
// of one new document may race: one inserts, the other fails on the
// unique index without applying its update. So the write is run once
// more after duplicates; then each document exists, and a duplicate left
// means the filter found a newer state, which the update must not touch.
func upsertAll(ctx context.Context, coll interface {
	BulkWrite(context.Context, []mongo.WriteModel, ...*options.BulkWriteOptions) (*mongo.BulkWriteResult, error)
}, models []mongo.WriteModel) error {
	_, err := coll.BulkWrite(ctx, models, unordered)
	if err != nil && onlyDuplicates(err) {
		_, err = coll.BulkWrite(ctx, models, unordered)
	}
	if err != nil && !onlyDuplicates(err) {
		return err
	}
	return nil
}

// FindConversations implements storage.Backend: one $in read by _id.
func (s *Store) FindConversations(ctx context.Context, ids []store.ConversationID) ([]*store.Conversation, error) {
	out := make([]*store.Conversation, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	in := make(bson.A, len(ids))
	for i, id := range ids {
		in[i] = docs.ConvDocID(id)
	}
	cur, err := s.convs.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}})
	if err != nil {
		return nil, wrap("find conversations", err)
	}
	var ds []docs.Conv
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("find conversations", err)
	}
	byID := make(map[store.ConversationID]*store.Conversation, len(ds))
	for i := range ds {
		c := ds[i].Store()
		byID[c.ID] = c
	}
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out, nil
}

// AppendConversationMessage implements storage.Backend (steps above).
func (s *Store) AppendConversationMessage(ctx context.Context, m *store.ConversationMessage) (*store.Conversation, error) {
	c := m.ConversationID
	d, err := s.findConv(ctx, c)
	if err != nil {
		return nil, err
	}
	if d == nil && !c.IsGroup() {
		a, b := c.Users()
		d = &docs.Conv{ID: docs.ConvDocID(c), Members: []primitive.ObjectID{oid(a), oid(b)}, Created: m.CreatedAt}
		if _, err := s.convs.InsertOne(ctx, d); isDuplicate(err) {
			// Its first message raced ours: read the one stored.
			if d, err = s.findConv(ctx, c); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, wrap("create conversation", err)
		}
	}
	if d == nil || !containsOID(d.Members, oid(m.AuthorID)) {
		return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
	}
	md := docs.FromConvMsg(m)
	md.Pending = true
	for md.Seq = d.Seq + 1; ; md.Seq++ {
		if md.Seq > d.Seq+maxSeqClaims {
			return nil, fmt.Errorf("mongostore: no free seq in conversation %s after %d tries", c, maxSeqClaims)
		}
		_, err := s.dms.InsertOne(ctx, md)
		if err == nil {
			break
		}
		if !isDuplicate(err) {
			return nil, wrap("insert conversation message", err)
		}
		// Another sender has this seq, unless it is this message, stored
		// by an earlier attempt whose reply was lost.
		var got docs.ConvMsg
		if err := s.dms.FindOne(ctx, bson.D{{Key: "c", Value: []byte(c)}, {Key: "s", Value: md.Seq}}).Decode(&got); err == nil && got.ID == md.ID {
			break
		}
	}
	m.Seq = uint64(md.Seq)
	return s.finishSend(ctx, md, storeIDsOf(d.Members))
}

func storeIDsOf(ids []primitive.ObjectID) []store.ID {
	out := make([]store.ID, len(ids))
	for i, id := range ids {
		out[i] = store.ID(id)
	}
	return out
}

// sendPoint runs the test hook, if any, at point of a send: 1 after the
// message's insert, 2 after the members' lists and read states, 3 after
// the conversation's update.
func (s *Store) sendPoint(point int) {
	if h := s.testHookSend.Load(); h != nil {
		(*h)(point)
	}
}

// maxSeqClaims bounds the seqs a send tries past the last one it read:
// each taken one is another sender's message, stored since.
const maxSeqClaims = 10000

func containsOID(ids []primitive.ObjectID, id primitive.ObjectID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// raiseReadStates raises, by $max, each of users' last seq told in conv
// to seq, and its read seq too where read says so, in one bulk write of
// upserts: a repeat changes nothing, and no seq goes back.
func (s *Store) raiseReadStates(ctx context.Context, conv store.ConversationID, users []store.ID, seq int64, read func(store.ID) bool) error {
	field := "v." + conv.String()
	models := make([]mongo.WriteModel, len(users))
	for i, u := range users {
		up := bson.D{{Key: field + ".l", Value: seq}}
		if read(u) {
			up = append(up, bson.E{Key: field + ".r", Value: seq})
		}
		models[i] = mongo.NewUpdateOneModel().SetUpsert(true).SetFilter(bson.D{{Key: "_id", Value: oid(u)}}).
			SetUpdate(bson.D{{Key: "$max", Value: up}})
	}
	return wrap("raise read states", upsertAll(ctx, s.dmReads, models))
}

// finishSend runs steps 3 to 6 of a send of md to members (the members
// step 1 read), and returns the conversation after.
func (s *Store) finishSend(ctx context.Context, md *docs.ConvMsg, members []store.ID) (*store.Conversation, error) {
	c := store.ConversationID(md.Conv)
	author := store.ID(md.Author)
	s.sendPoint(1)
	if err := s.placeEntries(ctx, c, members, store.ID(md.ID), md); err != nil {
		return nil, err
	}
	if err := s.raiseReadStates(ctx, c, members, md.Seq, func(u store.ID) bool { return u == author }); err != nil {
		return nil, err
	}
	s.sendPoint(2)
	var d docs.Conv
	err := s.convs.FindOneAndUpdate(ctx, convFilter(c),
		bson.D{{Key: "$max", Value: bson.D{{Key: "sq", Value: md.Seq}, {Key: "rd." + author.String(), Value: md.Seq}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if err != nil {
		return nil, missing(err, "conversation not found", "raise conversation seq")
	}
	s.sendPoint(3)
	var gone bson.A
	for _, u := range members {
		if !containsOID(d.Members, oid(u)) {
			gone = append(gone, oid(u))
		}
	}
	if len(gone) > 0 {
		if err := s.dropMembersState(ctx, c, gone, author); err != nil {
			return nil, err
		}
	}
	if _, err := s.dms.UpdateOne(ctx, bson.D{{Key: "c", Value: md.Conv}, {Key: "s", Value: md.Seq}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "p", Value: ""}}}}); err != nil {
		return nil, wrap("finish send", err)
	}
	return d.Store(), nil
}

// dropMembersState takes conv out of the lists and read states of users,
// members removed while a send of author's ran, and the author's read
// receipt if it is one of them (the send raised it), unless a member
// again.
func (s *Store) dropMembersState(ctx context.Context, conv store.ConversationID, users bson.A, author store.ID) error {
	if _, err := s.userConvs.DeleteMany(ctx, bson.D{{Key: "u", Value: bson.D{{Key: "$in", Value: users}}}, {Key: "c", Value: []byte(conv)}}); err != nil {
		return wrap("remove conversation entries", err)
	}
	if _, err := s.dmReads.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: users}}}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "v." + conv.String(), Value: ""}}}}); err != nil {
		return wrap("remove read states", err)
	}
	if containsA(users, oid(author)) {
		if _, err := s.convs.UpdateOne(ctx, append(convFilter(conv), bson.E{Key: "m", Value: bson.D{{Key: "$ne", Value: oid(author)}}}),
			bson.D{{Key: "$unset", Value: bson.D{{Key: "rd." + author.String(), Value: ""}}}}); err != nil {
			return wrap("remove read receipt", err)
		}
	}
	return nil
}

// RecoverConversationSends implements storage.Backend: the pending
// messages, through the partial index on p, each finished as its sender
// would have.
func (s *Store) RecoverConversationSends(ctx context.Context, olderThan time.Time) ([]*store.ConversationMessage, error) {
	cur, err := s.dms.Find(ctx, bson.D{{Key: "p", Value: true}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: idAt(olderThan)}}}})
	if err != nil {
		return nil, wrap("find pending sends", err)
	}
	var pending []docs.ConvMsg
	if err := cur.All(ctx, &pending); err != nil {
		return nil, wrap("find pending sends", err)
	}
	out := make([]*store.ConversationMessage, 0, len(pending))
	for i := range pending {
		// The members now: a removal since the send took its members
		// away already.
		d, err := s.findConv(ctx, store.ConversationID(pending[i].Conv))
		if err != nil {
			return out, err
		} else if d == nil {
			return out, store.Errorf(store.ENOTFOUND, "conversation not found")
		}
		if _, err := s.finishSend(ctx, &pending[i], storeIDsOf(d.Members)); err != nil {
			return out, err
		}
		out = append(out, pending[i].Store(store.ConversationID(pending[i].Conv)))
	}
	return out, nil
}

// ListConversationMessages implements storage.Backend: one range of the
// index (c, s), on the conversation's shard.
func (s *Store) ListConversationMessages(ctx context.Context, conv store.ConversationID, r store.SeqRange) ([]*store.ConversationMessage, error) {
	f := bson.D{{Key: "c", Value: []byte(conv)}}
	dir := -1
	if r.Reverse {
		dir = 1
	}
	if r.From > 0 {
		op := "$lt"
		if r.Reverse {
			op = "$gt"
		}
		f = append(f, bson.E{Key: "s", Value: bson.D{{Key: op, Value: int64(r.From)}}})
	}
	cur, err := s.dms.Find(ctx, f, options.Find().SetSort(bson.D{{Key: "c", Value: 1}, {Key: "s", Value: dir}}).SetLimit(int64(r.Limit)))
	if err != nil {
		return nil, wrap("list conversation messages", err)
	}
	var ds []docs.ConvMsg
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("list conversation messages", err)
	}
	out := make([]*store.ConversationMessage, len(ds))
	for i := range ds {
		out[i] = ds[i].Store(conv)
	}
	return out, nil
}

// UpdateConversationMessage implements storage.Backend: the message by
// its shard key, then the members' copies where it is their last
// message. Repeating a deletion repeats the second step, so a crash
// between the two is completed by deleting again.
func (s *Store) UpdateConversationMessage(ctx context.Context, conv store.ConversationID, seq uint64, upd storage.ConversationMessageUpdate) (*store.ConversationMessage, error) {
	f := bson.D{{Key: "c", Value: []byte(conv)}, {Key: "s", Value: int64(seq)}}
	var change bson.D
	if upd.Delete {
		change = bson.D{{Key: "$set", Value: bson.D{{Key: "d", Value: true}}}, {Key: "$unset", Value: bson.D{{Key: "x", Value: ""}, {Key: "e", Value: ""}}}}
	} else {
		f = append(f, bson.E{Key: "d", Value: bson.D{{Key: "$exists", Value: false}}})
		set := bson.D{{Key: "e", Value: upd.EditedAt}}
		if upd.Text != nil {
			set = append(set, bson.E{Key: "x", Value: *upd.Text})
		}
		change = bson.D{{Key: "$set", Value: set}}
	}
	var md docs.ConvMsg
	err := s.dms.FindOneAndUpdate(ctx, f, change, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&md)
	if err != nil {
		return nil, missing(err, "message not found", "update conversation message")
	}
	d, err := s.findConv(ctx, conv)
	if err != nil {
		return nil, err
	}
	if d != nil {
		if _, err := s.userConvs.UpdateMany(ctx,
			bson.D{{Key: "u", Value: bson.D{{Key: "$in", Value: d.Members}}}, {Key: "c", Value: []byte(conv)}, {Key: "ls", Value: md.Seq}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "lm", Value: md.Snapshot()}}}}); err != nil {
			return nil, wrap("update last messages", err)
		}
	}
	return md.Store(conv), nil
}

// ChangeConversationMembers implements storage.Backend. Adding is one
// update whose filter keeps the size within the limit, then the added
// members' list entries; removing is the update, then the removed
// member's entry and read state. Each step repeats harmlessly, and a
// repeat of the change redoes the steps after the first.
func (s *Store) ChangeConversationMembers(ctx context.Context, conv store.ConversationID, ch storage.MemberChange) (*store.Conversation, error) {
	var d docs.Conv
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	if len(ch.Add) > 0 {
		cur, err := s.findConv(ctx, conv)
		if err != nil {
			return nil, err
		} else if cur == nil {
			return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
		}
		var added bson.A
		var joined []store.ID // added, as IDs
		for _, u := range ch.Add {
			if !containsOID(cur.Members, oid(u)) && !containsA(added, oid(u)) {
				added = append(added, oid(u))
				joined = append(joined, u)
			}
		}
		f := convFilter(conv)
		if n := ch.MaxMembers - len(added); n < 0 {
			return nil, store.Errorf(store.EINVALID, "a conversation has at most %d members", ch.MaxMembers)
		} else if len(added) > 0 {
			// At most n members now: the n+1-th array element is missing.
			f = append(f, bson.E{Key: "m." + strconv.Itoa(n), Value: bson.D{{Key: "$exists", Value: false}}})
		}
		d = *cur
		if len(added) > 0 {
			err = s.convs.FindOneAndUpdate(ctx, f, bson.D{{Key: "$addToSet", Value: bson.D{{Key: "m", Value: bson.D{{Key: "$each", Value: added}}}}}}, after).Decode(&d)
			if errors.Is(err, mongo.ErrNoDocuments) {
				return nil, store.Errorf(store.EINVALID, "a conversation has at most %d members", ch.MaxMembers)
			} else if err != nil {
				return nil, wrap("add members", err)
			}
		}
		var members []store.ID
		for _, u := range ch.Add {
			if containsOID(d.Members, oid(u)) {
				members = append(members, u)
			}
		}
		if err := s.placeEntries(ctx, conv, members, store.NewID(ch.At), nil); err != nil {
			return nil, err
		}
		// What came before the join counts as read by those this call
		// added (not by members already in: that would mark their unread
		// read), so their unread counts start at the join. A crash before
		// it leaves the history unread for them, nothing worse.
		if len(joined) > 0 {
			if err := s.raiseReadStates(ctx, conv, joined, d.Seq, func(store.ID) bool { return true }); err != nil {
				return nil, err
			}
		}
	}
	if !ch.Remove.IsZero() {
		r := oid(ch.Remove)
		removed, err := s.removeMember(ctx, conv, ch.Remove)
		if err != nil {
			return nil, err
		}
		d = *removed
		if _, err := s.userConvs.DeleteOne(ctx, bson.D{{Key: "u", Value: r}, {Key: "c", Value: []byte(conv)}}); err != nil {
			return nil, wrap("remove conversation entry", err)
		}
		if _, err := s.dmReads.UpdateOne(ctx, bson.D{{Key: "_id", Value: r}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "v." + conv.String(), Value: ""}}}}); err != nil {
			return nil, wrap("remove read state", err)
		}
	}
	return d.Store(), nil
}

// maxRemoveTries bounds removeMember's guarded updates, each undone
// only by another change of the conversation in between.
const maxRemoveTries = 100

// removeMember takes user out of conv's members, admins and read
// receipts in one update of the conversation, and returns it after. If
// no admin would be left, the same update makes the longest-standing
// remaining member (the first of m, which keeps the order of joining)
// the only admin, so a group is never left without one. Without a
// transaction the choice is a guarded update: the first update applies
// only while another admin stays; else the conversation is read, and the
// promotion's filter pins what it was chosen from (no admin but user, the
// members up to the new admin), so a change in between makes it read and
// try again.
func (s *Store) removeMember(ctx context.Context, conv store.ConversationID, user store.ID) (*docs.Conv, error) {
	r := oid(user)
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	unset := bson.E{Key: "$unset", Value: bson.D{{Key: "rd." + user.String(), Value: ""}}}
	for range maxRemoveTries {
		var d docs.Conv
		// Another admin stays: one update.
		f := append(convFilter(conv), bson.E{Key: "ad", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$ne", Value: r}}}}})
		err := s.convs.FindOneAndUpdate(ctx, f, bson.D{{Key: "$pull", Value: bson.D{{Key: "m", Value: r}, {Key: "ad", Value: r}}}, unset}, after).Decode(&d)
		if err == nil {
			return &d, nil
		} else if !errors.Is(err, mongo.ErrNoDocuments) {
			return nil, wrap("remove member", err)
		}
		cur, err := s.findConv(ctx, conv)
		if err != nil {
			return nil, err
		} else if cur == nil {
			return nil, store.Errorf(store.ENOTFOUND, "conversation not found")
		}
		// No admin but user: the first other member becomes the admin.
		f = append(convFilter(conv), bson.E{Key: "ad", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$ne", Value: r}}}}}}})
		admins := bson.A{}
		for i, m := range cur.Members {
			f = append(f, bson.E{Key: "m." + strconv.Itoa(i), Value: m})
			if m != r {
				admins = append(admins, m)
				break
			}
		}
		if len(admins) == 0 {
			// No one stays: no one was added since either.
			f = append(f, bson.E{Key: "m." + strconv.Itoa(len(cur.Members)), Value: bson.D{{Key: "$exists", Value: false}}})
		}
		err = s.convs.FindOneAndUpdate(ctx, f, bson.D{
			{Key: "$pull", Value: bson.D{{Key: "m", Value: r}}},
			{Key: "$set", Value: bson.D{{Key: "ad", Value: admins}}}, unset,
		}, after).Decode(&d)
		if err == nil {
			return &d, nil
		} else if !errors.Is(err, mongo.ErrNoDocuments) {
			return nil, wrap("remove member", err)
		}
	}
	return nil, fmt.Errorf("mongostore: removing a member of conversation %s: changed under it %d times", conv, maxRemoveTries)
}

func containsA(a bson.A, id primitive.ObjectID) bool {
	for _, x := range a {
		if x == id {
			return true
		}
	}
	return false
}

// ListConversations implements storage.Backend: one range of the index
// (u, lt), on the user's shard.
func (s *Store) ListConversations(ctx context.Context, user store.ID, r store.Range) ([]store.ConversationEntry, error) {
	f := bson.D{{Key: "u", Value: oid(user)}}
	dir := -1
	if r.Reverse {
		dir = 1
	}
	if !r.From.IsZero() {
		op := "$lt"
		if r.Reverse {
			op = "$gt"
		}
		f = append(f, bson.E{Key: "lt", Value: bson.D{{Key: op, Value: oid(r.From)}}})
	}
	cur, err := s.userConvs.Find(ctx, f, options.Find().SetSort(bson.D{{Key: "u", Value: 1}, {Key: "lt", Value: dir}}).SetLimit(int64(r.Limit)))
	if err != nil {
		return nil, wrap("list conversations", err)
	}
	var ds []struct {
		Conv []byte             `bson:"c"`
		Last primitive.ObjectID `bson:"lt"`
		Msg  *docs.ConvMsg      `bson:"lm"`
	}
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("list conversations", err)
	}
	out := make([]store.ConversationEntry, len(ds))
	for i, d := range ds {
		out[i] = store.ConversationEntry{ConversationID: store.ConversationID(d.Conv), LastActivity: store.ID(d.Last)}
		if d.Msg != nil {
			out[i].Last = d.Msg.Store(out[i].ConversationID)
		}
	}
	return out, nil
}

// MarkConversationRead implements storage.Backend: the read receipt,
// then the read state, both $max.
func (s *Store) MarkConversationRead(ctx context.Context, user store.ID, conv store.ConversationID, seq uint64) (store.UnreadConversations, error) {
	if _, err := s.convs.UpdateOne(ctx, append(convFilter(conv), bson.E{Key: "m", Value: oid(user)}),
		bson.D{{Key: "$max", Value: bson.D{{Key: "rd." + user.String(), Value: int64(seq)}}}}); err != nil {
		return nil, wrap("mark conversation read", err)
	}
	field := "v." + conv.String()
	var st docs.ReadState
	err := s.dmReads.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: oid(user)}, {Key: field, Value: bson.D{{Key: "$exists", Value: true}}}},
		bson.D{{Key: "$max", Value: bson.D{{Key: field + ".r", Value: int64(seq)}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return s.ReadUnreadConversations(ctx, user)
	} else if err != nil {
		return nil, wrap("mark conversation read", err)
	}
	return st.Unread(), nil
}

// ReadUnreadConversations implements storage.Backend: one document by
// _id.
func (s *Store) ReadUnreadConversations(ctx context.Context, user store.ID) (store.UnreadConversations, error) {
	var st docs.ReadState
	err := s.dmReads.FindOne(ctx, bson.D{{Key: "_id", Value: oid(user)}}).Decode(&st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.UnreadConversations{}, nil
	} else if err != nil {
		return nil, wrap("read unread conversations", err)
	}
	return st.Unread(), nil
}

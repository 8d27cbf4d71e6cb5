package service

import (
	"context"

	"herald/store"
	"herald/store/storage"
)

// Caps of an account export: an account past one gets its newest items (in
// ID order for the follow lists) up to it, and the section is named in
// AccountData.Truncated. They keep an export within a response's size
// limit (about 1.5 MB of messages at most) and a few hundred reads.
const (
	ExportMaxMessages = 2000
	ExportMaxItems    = 5000
)

// exportPage is how many items each read of an export takes.
const exportPage = 100

// AccountData is everything an account holds, for its export: the user,
// its messages and reposts newest first, the users it follows and who
// follow it, its likes of live messages newest first, and the users it
// blocks and mutes. Users deleted since are left out.
type AccountData struct {
	User                 *store.User
	Messages             []*store.Message
	Following, Followers []*store.User
	Likes                []store.Like
	Blocks, Mutes        []*store.User
	// Truncated names the sections cut at their cap: "messages",
	// "following", "followers", "likes", "blocks", "mutes".
	Truncated []string
}

// ExportAccount reads everything user's account holds, page by page
// through the same reads as the API's lists, up to the caps.
func (s *Service) ExportAccount(ctx context.Context, user store.ID) (*AccountData, error) {
	u, err := s.backend.FindUserByID(ctx, user)
	if err != nil {
		return nil, err
	}
	d := &AccountData{User: u}
	cut := func(name string, more bool) {
		if more {
			d.Truncated = append(d.Truncated, name)
		}
	}
	var more bool
	d.Messages, more, err = collect(ExportMaxMessages, func(r store.Range) ([]*store.Message, error) {
		return s.backend.FindMessages(ctx, storage.MessageFilter{AuthorID: user, Range: r})
	}, func(m *store.Message) store.ID { return m.ID })
	if err != nil {
		return nil, err
	}
	cut("messages", more)
	for _, side := range []struct {
		name string
		list func(context.Context, store.ID, store.Range) ([]store.ID, error)
		to   *[]*store.User
	}{{"following", s.backend.ListFollowing, &d.Following}, {"followers", s.backend.ListFollowers, &d.Followers}} {
		ids, more, err := collect(ExportMaxItems, func(r store.Range) ([]store.ID, error) { return side.list(ctx, user, r) }, func(id store.ID) store.ID { return id })
		if err != nil {
			return nil, err
		}
		cut(side.name, more)
		if *side.to, err = s.liveUsers(ctx, ids); err != nil {
			return nil, err
		}
	}
	d.Likes, more, err = collect(ExportMaxItems, func(r store.Range) ([]store.Like, error) {
		liked, err := s.liveLikes(ctx, user, user, r)
		out := make([]store.Like, len(liked))
		for i, l := range liked {
			out[i] = l.like
		}
		return out, err
	}, func(l store.Like) store.ID { return l.ID })
	if err != nil {
		return nil, err
	}
	cut("likes", more)
	for _, rel := range []struct {
		name string
		kind store.RelationKind
		to   *[]*store.User
	}{{"blocks", store.RelationBlock, &d.Blocks}, {"mutes", store.RelationMute, &d.Mutes}} {
		rels, more, err := collect(ExportMaxItems, func(r store.Range) ([]store.Relation, error) {
			return s.backend.ListBlocked(ctx, user, rel.kind, r)
		}, func(x store.Relation) store.ID { return x.ID })
		if err != nil {
			return nil, err
		}
		cut(rel.name, more)
		ids := make([]store.ID, len(rels))
		for i, x := range rels {
			ids[i] = x.TargetID
		}
		if *rel.to, err = s.liveUsers(ctx, ids); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// collect reads a list from its start, a page at a time, up to limit items,
// and reports whether more lie beyond them. A short page ends the list.
func collect[T any](limit int, read func(store.Range) ([]T, error), id func(T) store.ID) ([]T, bool, error) {
	var out []T
	r := store.Forward(store.NilID, exportPage)
	for len(out) <= limit {
		page, err := read(r)
		if err != nil {
			return nil, false, err
		}
		out = append(out, page...)
		if len(page) < r.Limit {
			break
		}
		r.From = id(page[len(page)-1])
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// liveUsers loads ids in pages, leaving out the users deleted since.
func (s *Service) liveUsers(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	out := make([]*store.User, 0, len(ids))
	for start := 0; start < len(ids); start += exportPage {
		users, err := s.backend.FindUsersByIDs(ctx, ids[start:min(start+exportPage, len(ids))])
		if err != nil {
			return nil, err
		}
		for _, u := range users {
			if u != nil {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

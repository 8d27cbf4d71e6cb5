package service

import (
	"context"
	"slices"

	"herald/store"
)

// The visibility rule: viewer V may see author A's messages (and A's likes
// and follow lists) iff V is A, or A does not block V and A is public or V
// follows A. Nobody signed in (V NilID) sees public accounts only. Every
// direct read of messages applies it, in one batch per page: one
// FindBlockers for the page's distinct authors, and one FindFollowing for
// those of them that are private (none when all are public).

// SeesMessagesOf reports, aligned with authors, whether viewer (NilID:
// nobody signed in) may see each author's messages; false for a nil
// author.
func (s *Service) SeesMessagesOf(ctx context.Context, viewer store.ID, authors []*store.User) ([]bool, error) {
	return s.seesMessagesOf(ctx, viewer, false, authors)
}

// seesMessagesOf is SeesMessagesOf, told whether viewer has never been
// blocked (store.User.NeverBlocked), which spares the read of who blocks
// viewer: on MongoDB a query of every shard.
func (s *Service) seesMessagesOf(ctx context.Context, viewer store.ID, neverBlocked bool, authors []*store.User) ([]bool, error) {
	out := make([]bool, len(authors))
	var others, private []store.ID
	asked := make(map[store.ID]bool, len(authors))
	for i, a := range authors {
		switch {
		case a == nil:
		case a.ID == viewer:
			out[i] = true
		case viewer.IsZero():
			out[i] = !a.Private
		case !asked[a.ID]:
			asked[a.ID] = true
			others = append(others, a.ID)
			if a.Private {
				private = append(private, a.ID)
			}
		}
	}
	if len(others) == 0 {
		return out, nil
	}
	blocks := make(map[store.ID]bool, len(others))
	if !neverBlocked {
		// FindBlockers(author, owners) tells the kinds each owner has
		// toward author: here, which of the authors block the viewer.
		kinds, err := s.backend.FindBlockers(ctx, viewer, others)
		if err != nil {
			return nil, err
		}
		for i, id := range others {
			blocks[id] = kinds[i]&store.RelationBlock != 0
		}
	}
	followed := make(map[store.ID]bool, len(private))
	if len(private) > 0 {
		f, err := s.backend.FindFollowing(ctx, viewer, private)
		if err != nil {
			return nil, err
		}
		for i, id := range private {
			followed[id] = f[i]
		}
	}
	for i, a := range authors {
		if a != nil && !viewer.IsZero() && a.ID != viewer {
			out[i] = !blocks[a.ID] && (!a.Private || followed[a.ID])
		}
	}
	return out, nil
}

// visibleMessages reports, aligned with msgs, whether viewer may see each
// (false for a nil one): its authors loaded in one batch, then the rule.
// It returns the authors it loaded (viewer's own messages need none), and
// the users of also, loaded in the same batch, for the caller to show
// without loading them again. Viewer is loaded in that batch too: one
// nobody has ever blocked needs no read of its blockers.
func (s *Service) visibleMessages(ctx context.Context, viewer store.ID, msgs []*store.Message, also ...store.ID) ([]bool, []*store.User, error) {
	out := make([]bool, len(msgs))
	var ids []store.ID
	at := make(map[store.ID]int, len(msgs))
	for i, m := range msgs {
		switch {
		case m == nil:
		case m.AuthorID == viewer && !viewer.IsZero():
			out[i] = true
		default:
			if _, ok := at[m.AuthorID]; !ok {
				at[m.AuthorID] = len(ids)
				ids = append(ids, m.AuthorID)
			}
		}
	}
	if len(ids) == 0 {
		return out, nil, nil
	}
	n := len(ids)
	if !viewer.IsZero() {
		also = append(slices.Clip(also), viewer)
	}
	for _, id := range also {
		if _, ok := at[id]; !ok {
			at[id] = len(ids)
			ids = append(ids, id)
		}
	}
	authors, err := s.backend.FindUsersByIDs(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	neverBlocked := false
	if i, ok := at[viewer]; ok && authors[i] != nil {
		neverBlocked = authors[i].NeverBlocked
	}
	sees, err := s.seesMessagesOf(ctx, viewer, neverBlocked, authors[:n])
	if err != nil {
		return nil, nil, err
	}
	for i, m := range msgs {
		if m != nil && !out[i] {
			out[i] = sees[at[m.AuthorID]]
		}
	}
	return out, slices.DeleteFunc(authors, func(u *store.User) bool { return u == nil }), nil
}

// shownAuthor returns the author of a message viewer acts on (likes,
// reposts, replies to) if viewer may see its messages, else NOT_FOUND, as
// if the message were absent. Viewer's own message needs no read: it
// returns nil.
func (s *Service) shownAuthor(ctx context.Context, viewer, author store.ID) (*store.User, error) {
	if author == viewer {
		return nil, nil
	}
	u, err := s.backend.FindUserByID(ctx, author)
	if err != nil {
		return nil, err
	}
	sees, err := s.SeesMessagesOf(ctx, viewer, []*store.User{u})
	if err != nil {
		return nil, err
	}
	if !sees[0] {
		return nil, store.Errorf(store.ENOTFOUND, "message not found")
	}
	return u, nil
}

// readVisible reads the page r selects with read, leaving out the items
// keep refuses and reading on past them, so that the page stays full; it
// returns the page in its list's order and whether more follow. A read
// after the first asks for at least a full page more, so a long run of
// hidden items costs few reads.
func readVisible[T any](r store.Range, id func(T) store.ID, read func(store.Range) ([]T, error), keep func([]T) ([]bool, error)) ([]T, bool, error) {
	want := r.Limit + 1
	var out []T
	next := r
	for len(out) < want {
		next.Limit = max(want-len(out), r.Limit)
		items, err := read(next)
		if err != nil {
			return nil, false, err
		}
		if len(items) == 0 {
			break
		}
		kept, err := keep(items)
		if err != nil {
			return nil, false, err
		}
		for i, it := range items {
			if kept[i] {
				out = append(out, it)
			}
		}
		if len(items) < next.Limit {
			break
		}
		next.From = id(items[len(items)-1])
	}
	out, more := trimPage(out, r)
	return out, more, nil
}

// hideOriginals sets to nil, in msgs (a home timeline page's), each repost
// whose original owner may not see: a repost shows as its original, which
// may be a private account's (reposted before it turned private) or that
// of a user who blocks owner. The page skips it as it skips a deleted
// message. It reads nothing for a page without reposts of others'
// messages; otherwise the originals' authors, and in the same call the
// other users a page shows (its authors, those it mentions and those its
// replies answer), which it returns for the page to show: a page holding
// reposts costs one FindBlockers more, and no second read of users.
func (s *Service) hideOriginals(ctx context.Context, owner store.ID, msgs, originals []*store.Message) ([]*store.User, error) {
	var at []int
	var check []*store.Message
	for i, o := range originals {
		if o != nil && msgs[i] != nil && o.AuthorID != owner {
			at = append(at, i)
			check = append(check, o)
		}
	}
	if len(check) == 0 {
		return nil, nil
	}
	authors := make([]store.ID, 0, len(msgs))
	for _, ms := range [][]*store.Message{msgs, originals} {
		for _, m := range ms {
			if m != nil {
				authors = append(append(authors, m.AuthorID), m.Mentions...)
				if !m.ReplyToAuthorID.IsZero() {
					authors = append(authors, m.ReplyToAuthorID)
				}
			}
		}
	}
	shown, users, err := s.visibleMessages(ctx, owner, check, authors...)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		if !shown[k] {
			msgs[i] = nil
		}
	}
	return users, nil
}

package service

import (
	"context"
	"slices"

	"herald/store"
	"herald/store/storage"
)

// ownPage reads the owner's own messages within r for their timeline, under
// the home timeline's rule (docs/design.md#reposts-at-home): one's own
// repost of one's own message, or of a user one follows, is not at home.
// Outside fan-out on read the owner's followees are not at hand, so the
// rule learns only what the page needs: the authors of the originals of
// the owner's reposts it holds, checked with one FindFollowing; a page that
// then loses a repost is read again with those users shown, so it stays
// full. A page without reposts of others costs the one read.
func (tr *timelineRead) ownPage(ctx context.Context, r store.Range) ([]store.InboxItem, error) {
	b := tr.s.backend
	var checked, shown []store.ID
	for {
		es, err := b.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{tr.owner}, Range: r, Home: storage.NewHomeRule(tr.owner, shown)})
		if err != nil {
			return nil, err
		}
		var unknown []store.ID
		for _, e := range es {
			if x := e.RepostOfAuthorID; !x.IsZero() && x != tr.owner && !slices.Contains(checked, x) && !slices.Contains(unknown, x) {
				unknown = append(unknown, x)
			}
		}
		if len(unknown) == 0 {
			return outboxItems(es), nil
		}
		follows, err := b.FindFollowing(ctx, tr.owner, unknown)
		if err != nil {
			return nil, err
		}
		checked = append(checked, unknown...)
		n := len(shown)
		for i, x := range unknown {
			if follows[i] {
				shown = append(shown, x)
			}
		}
		if len(shown) == n {
			return outboxItems(es), nil // nothing on the page is left out
		}
	}
}

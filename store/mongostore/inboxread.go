package mongostore

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

// ReadInbox implements storage.Backend: the entries, each layout in one
// query (more only for a bucket page that retractions left short), then
// the owner's counts. In that order, because a delivery counts an entry
// before it writes it: a page never shows an entry its counts lack, as it
// could if the two were read at once. A removal (an unfollow, a
// retraction) counts before it removes, so the entries of the owner's last
// count step, if it removes, are left out of the page: its counts have
// dropped them already, and its writes may still be under way. A page
// that loses entries so is read again, a little longer.
func (s *Store) ReadInbox(ctx context.Context, f storage.InboxFilter) ([]store.InboxItem, store.InboxCounts, error) {
	want := f.Limit
	for attempt := 1; ; attempt++ {
		var items []store.InboxItem
		var err error
		if f.Limit > 0 {
			switch f.Layout {
			case storage.LayoutEntries:
				items, err = s.readEntries(ctx, f)
			case storage.LayoutBuckets:
				items, err = s.readBuckets(ctx, f)
			}
		}
		if err != nil {
			return nil, store.InboxCounts{}, err
		}
		d, _, err := s.findInboxHead(ctx, f.Owner)
		if err != nil {
			return nil, store.InboxCounts{}, err
		}
		full := len(items) == f.Limit
		if !d.LastAdded && d.LastLayout == int32(f.Layout) && len(d.LastEntries) > 0 {
			items = slices.DeleteFunc(items, func(it store.InboxItem) bool {
				return slices.ContainsFunc(d.LastEntries, func(p planItem) bool { return p.Message == oid(it.MessageID) })
			})
		}
		if len(items) >= want || !full || attempt == 3 {
			return items[:min(len(items), want)], d.counts(f.Layout), nil
		}
		f.Limit = want + len(d.LastEntries)
	}
}

// readEntries is one range read of the (o, m) index.
func (s *Store) readEntries(ctx context.Context, f storage.InboxFilter) ([]store.InboxItem, error) {
	cond, sort := idRange("m", f.Range, true)
	filter := append(bson.D{{Key: "o", Value: oid(f.Owner)}}, cond...)
	cur, err := s.entries.Find(ctx, filter, options.Find().SetSort(sort).SetLimit(int64(f.Limit)))
	if err != nil {
		return nil, wrap("read inbox", err)
	}
	var rows []entryRow
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("read inbox", err)
	}
	items := make([]store.InboxItem, len(rows))
	for i, r := range rows {
		items[i] = r.Entry.item()
	}
	return items, nil
}

// readBuckets reads the entries within f.Range, nearest to f.From first:
// the buckets on the range's side of the cursor, nearest first, as many as
// the page needs if they are full (2 for 50 entries), more if retractions
// left gaps or a bucket is short. Read newest first, the first bucket below
// the cursor covers it (see collBuckets); read oldest first (a Reverse
// range), the covering bucket has a key not above the cursor and may hold
// entries above it, so it is read first, on its own.
func (s *Store) readBuckets(ctx context.Context, f storage.InboxFilter) ([]store.InboxItem, error) {
	owner, from := oid(f.Owner), oid(f.From)
	dir := -1 // the order of reading: -1 newest first, 1 oldest first
	if f.Reverse {
		dir = 1
	}
	items := make([]store.InboxItem, 0, f.Limit)
	// take appends the entries of bs on the range's side of the cursor, in
	// reading order, and reports whether the page is full.
	take := func(bs []bucketDoc) bool {
		for _, b := range bs {
			es := b.Entries
			slices.SortFunc(es, func(x, y entryDoc) int { return dir * cmpID(x.Message, y.Message) })
			for _, e := range es {
				if !f.From.IsZero() && dir*cmpID(e.Message, from) <= 0 {
					continue
				}
				items = append(items, e.item())
				if len(items) == f.Limit {
					return true
				}
			}
		}
		return false
	}
	read := func(filter, sort bson.D, limit int64) ([]bucketDoc, error) {
		cur, err := s.buckets.Find(ctx, filter, options.Find().SetSort(sort).SetLimit(limit))
		var bs []bucketDoc
		if err == nil {
			err = cur.All(ctx, &bs)
		}
		return bs, wrap("read inbox", err)
	}
	if f.Reverse && !f.From.IsZero() {
		covering, err := read(bson.D{{Key: "o", Value: owner}, {Key: "k", Value: bson.D{{Key: "$lte", Value: from}}}}, bson.D{{Key: "k", Value: -1}}, 1)
		if err != nil {
			return nil, err
		}
		if take(covering) {
			return items, nil
		}
	}
	// One bucket more than full buckets of the page less one entry would
	// take (the first is partly beyond the cursor, or the newest, not
	// full): a page of 50 and the one more the Service asks for read 2,
	// and a third only in the loop below, if those two are short.
	batch := int64((f.Limit-1)/bucketSize + 2)
	next := f.Range
	for {
		cond, sort := idRange("k", next, true)
		bs, err := read(append(bson.D{{Key: "o", Value: owner}}, cond...), sort, batch)
		if err != nil {
			return nil, err
		}
		if take(bs) || len(bs) < int(batch) {
			return items, nil
		}
		next.From = store.ID(bs[len(bs)-1].Key)
		batch *= 2
	}
}

package seed

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// progressName names the progress record of a load.
const progressName = "seed"

// DefaultBatchRecords is the number of records in one batch.
const DefaultBatchRecords = 50_000

// LoadOptions are what a load adds to the network.
type LoadOptions struct {
	// PasswordHash is every user's password hash.
	PasswordHash []byte
	// LastSeen is every user's last-seen time; a recent one keeps them
	// all active, so fan-out delivers to them.
	LastSeen time.Time
	// BatchRecords is the number of records in a batch (default
	// DefaultBatchRecords).
	BatchRecords int
	// Progress, if set, is called after each batch is loaded, with the
	// number of records it held (or skipped, when resuming).
	Progress func(records int)
}

// Records returns the number of records a load writes: users, edges,
// messages, likes, reposts and, for a stored layout, inbox items.
func (n *Network) Records() int {
	r := n.cfg.Users + n.Edges() + n.cfg.Messages + n.Likes() + n.Reposts()
	if n.cfg.Strategy.Layout().Stores() {
		for i := range n.cfg.Users {
			r += n.InboxSize(i)
		}
	}
	return r
}

// progress is the value of the progress record.
type progress struct {
	Network string `json:"network"`
	Batches int    `json:"batches"` // loaded, in plan order
}

// key identifies a network by what decides its records.
func (n *Network) key() string {
	c := n.cfg
	return fmt.Sprintf("seed=%d users=%d avg-follows=%d messages=%d pinned=%v layout=%d pull-above=%d avg-likes=%g avg-reposts=%g",
		c.Seed, c.Users, c.AvgFollows, c.Messages, c.Pinned, c.Strategy.Layout(), n.pullAbove(), max(c.AvgLikes, 0), max(c.AvgReposts, 0))
}

func (n *Network) pullAbove() int {
	if n.cfg.Strategy == service.StrategyHybrid {
		return n.cfg.CelebrityThreshold
	}
	return -1
}

// batch is one planned batch: its size and how to build it.
type batch struct {
	records int
	build   func() *storage.Bulk
}

// plan cuts the load into batches of about size records, in the order the
// contract asks: users, then edges, messages, likes, reposts (messages
// naming messages loaded before them) and inboxes.
func (n *Network) plan(opts LoadOptions, size int) []batch {
	var plan []batch
	for lo := 0; lo < n.cfg.Users; lo += size {
		hi := min(lo+size, n.cfg.Users)
		plan = append(plan, batch{hi - lo, func() *storage.Bulk {
			b := &storage.Bulk{Users: make([]*store.User, 0, hi-lo)}
			for i := lo; i < hi; i++ {
				b.Users = append(b.Users, n.user(i, opts.PasswordHash, opts.LastSeen))
			}
			return b
		}})
	}
	// Edges, grouped by follower.
	groups(n.cfg.Users, size, func(i int) int { return len(n.following[i]) }, func(lo, hi, records int) {
		plan = append(plan, batch{records, func() *storage.Bulk {
			b := &storage.Bulk{Edges: make([]storage.Edge, 0, records)}
			at := n.followTime()
			for u := lo; u < hi; u++ {
				id := n.UserID(u)
				for _, v := range n.following[u] {
					b.Edges = append(b.Edges, storage.Edge{Follower: id, Followee: n.UserID(int(v)), At: at})
				}
			}
			return b
		}})
	})
	for lo := 0; lo < n.cfg.Messages; lo += size {
		hi := min(lo+size, n.cfg.Messages)
		plan = append(plan, batch{hi - lo, func() *storage.Bulk {
			b := &storage.Bulk{Messages: make([]*store.Message, 0, hi-lo)}
			for k := lo; k < hi; k++ {
				b.Messages = append(b.Messages, n.message(k))
			}
			return b
		}})
	}
	// Likes, grouped by message.
	groups(n.cfg.Messages, size, n.likeCount, func(lo, hi, records int) {
		plan = append(plan, batch{records, func() *storage.Bulk {
			b := &storage.Bulk{Likes: make([]store.Like, 0, records)}
			for k := lo; k < hi; k++ {
				b.Likes = append(b.Likes, n.MessageLikes(k)...)
			}
			return b
		}})
	})
	// Reposts, grouped by original.
	groups(n.cfg.Messages, size, n.repostCount, func(lo, hi, records int) {
		plan = append(plan, batch{records, func() *storage.Bulk {
			b := &storage.Bulk{Messages: make([]*store.Message, 0, records)}
			for j := n.repostStart[lo]; j < n.repostStart[hi]; j++ {
				b.Messages = append(b.Messages, n.Repost(j))
			}
			return b
		}})
	})
	layout := n.cfg.Strategy.Layout()
	if layout.Stores() {
		groups(n.cfg.Users, size, n.InboxSize, func(lo, hi, records int) {
			plan = append(plan, batch{records, func() *storage.Bulk {
				b := &storage.Bulk{Layout: layout, Inboxes: make([]storage.BulkInbox, 0, hi-lo)}
				for u := lo; u < hi; u++ {
					b.Inboxes = append(b.Inboxes, n.inbox(u))
				}
				return b
			}})
		})
	}
	return plan
}

// groups cuts items (users or messages) into runs of about size records,
// where item i has count(i), and calls add for each run [lo, hi) with
// records.
func groups(items, size int, count func(i int) int, add func(lo, hi, records int)) {
	lo, records := 0, 0
	for i := range items {
		records += count(i)
		if records >= size {
			add(lo, i+1, records)
			lo, records = i+1, 0
		}
	}
	if lo < items && records > 0 {
		add(lo, items, records)
	}
}

// Load writes the network into l, batch by batch, each batch with the
// progress record that says it is loaded. If l holds the progress of an
// earlier load of the same network, the batches it loaded are skipped; a
// progress record of a different network is an error, since the two
// would mix. It returns the number of batches it loaded (not skipped).
func Load(ctx context.Context, l storage.BulkLoader, n *Network, opts LoadOptions) (int, error) {
	size := opts.BatchRecords
	if size <= 0 {
		size = DefaultBatchRecords
	}
	key := n.key()
	var done progress
	v, err := l.BulkProgress(ctx, progressName)
	if err != nil {
		return 0, fmt.Errorf("seed: read progress: %w", err)
	}
	if v != nil {
		if err := json.Unmarshal(v, &done); err != nil {
			return 0, fmt.Errorf("seed: read progress: %w", err)
		}
		if done.Network != key {
			return 0, fmt.Errorf("seed: the store holds another seeded network (%s); seed into an empty store, or with the same flags", done.Network)
		}
	}
	plan := n.plan(opts, size)
	for _, b := range plan[:min(done.Batches, len(plan))] {
		if opts.Progress != nil {
			opts.Progress(b.records)
		}
	}
	// Build the next batch while the store writes this one.
	type built struct {
		i int
		b *storage.Bulk
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan built, 1)
	go func() {
		defer close(next)
		for i := done.Batches; i < len(plan); i++ {
			select {
			case next <- built{i, plan[i].build()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	loaded := 0
	for nb := range next {
		val, err := json.Marshal(progress{Network: key, Batches: nb.i + 1})
		if err != nil {
			return loaded, err
		}
		nb.b.Progress = &storage.BulkProgress{Name: progressName, Value: val}
		if err := l.LoadBulk(ctx, nb.b); err != nil {
			return loaded, fmt.Errorf("seed: batch %d of %d: %w", nb.i+1, len(plan), err)
		}
		loaded++
		if opts.Progress != nil {
			opts.Progress(plan[nb.i].records)
		}
	}
	return loaded, ctx.Err()
}

package embedded

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

func setJob(b *pebble.Batch, j *storage.Job) error {
	if j.ID.IsZero() {
		return fmt.Errorf("store job: kind %d has no ID", j.Kind)
	}
	v, err := docs.Marshal(docs.FromJob(j))
	if err != nil {
		return fmt.Errorf("encode job: %w", err)
	}
	return b.Set(key(pJob, j.ID), v, nil)
}

func decodeJob(v []byte) (*storage.Job, error) {
	var d docs.Job
	if err := docs.Unmarshal(v, &d); err != nil {
		return nil, fmt.Errorf("decode job: %w", err)
	}
	return d.Store(), nil
}

// findJob returns the stored job named by j, NOT_FOUND if there is none (or
// another kind of job has its ID).
func (s *Store) findJob(j *storage.Job) (*storage.Job, error) {
	stored, err := findDoc(s, key(pJob, j.ID), decodeJob, "job not found")
	if err != nil {
		return nil, err
	}
	if stored.Kind != j.Kind {
		return nil, store.Errorf(store.ENOTFOUND, "job not found")
	}
	return stored, nil
}

// checkJob returns the stored job of a chunk if the chunk should apply:
// NOT_FOUND if the job is gone, nil if the job has moved past the chunk.
func (s *Store) checkJob(j *storage.Job) (*storage.Job, error) {
	stored, err := s.findJob(j)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(stored.Cursor, j.Cursor) {
		return nil, nil
	}
	return stored, nil
}

// advanceJob records a job's progress in b, or removes the job when done.
func advanceJob(b *pebble.Batch, j *storage.Job, cursor []byte, done bool) error {
	if done {
		return b.Delete(key(pJob, j.ID), nil)
	}
	next := *j
	next.Cursor = cursor
	return setJob(b, &next)
}

// PendingJobs implements storage.Backend. Jobs are keyed by ID, so key order
// is the order the contract asks for.
func (s *Store) PendingJobs(_ context.Context) ([]*storage.Job, error) {
	p := []byte{pJob}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var out []*storage.Job
	for ok := it.First(); ok; ok = it.Next() {
		j, err := decodeJob(it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	// The jobs with a chunk stored (one a fan-out lane at most) go first,
	// so that they end before any backfill or rebuild looks at their
	// message.
	begun := func(j *storage.Job) int {
		if len(j.Cursor) > 0 {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(x, y *storage.Job) int { return begun(x) - begun(y) })
	return out, it.Error()
}

// JobBacklog implements storage.Backend: the job records in key order, up
// to limit of them. Jobs are keyed by ID, which for every kind but
// JobRetract and JobRebuild (named by an older message or user) grows with
// the time they were stored, so the oldest are among the first read.
func (s *Store) JobBacklog(_ context.Context, limit int) (storage.JobBacklog, error) {
	p := []byte{pJob}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return storage.JobBacklog{}, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	s.backlogMu.Lock()
	defer s.backlogMu.Unlock()
	now := time.Now()
	seen := make(map[store.ID]time.Time)
	var b storage.JobBacklog
	for ok := it.First(); ok && b.Jobs < limit; ok = it.Next() {
		j, err := decodeJob(it.Value())
		if err != nil {
			return storage.JobBacklog{}, err
		}
		b.Jobs++
		at := j.CreatedAt
		if j.Kind == storage.JobRetract {
			at = now
			if t, ok := s.retractSeen[j.ID]; ok {
				at = t
			}
			seen[j.ID] = at
		}
		if !at.IsZero() && (b.Oldest.IsZero() || at.Before(b.Oldest)) {
			b.Oldest = at
		}
	}
	// Only the retractions still pending are remembered.
	s.retractSeen = seen
	return b, it.Error()
}

// StoreJob implements storage.Backend.
func (s *Store) StoreJob(_ context.Context, j *storage.Job) error {
	if j.Kind != storage.JobFollow && j.Kind != storage.JobUnfollow && j.Kind != storage.JobHideReposts {
		return fmt.Errorf("store job: kind %d is stored with its change, not by StoreJob", j.Kind)
	}
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	if err := setJob(b, j); err != nil {
		return err
	}
	return s.commit(b)
}

// FinishJob implements storage.Backend.
func (s *Store) FinishJob(_ context.Context, j *storage.Job) error {
	s.inboxMu.Lock()
	defer s.inboxMu.Unlock()
	stored, err := s.findJob(j)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(key(pJob, stored.ID), nil)
	var heads []ownerHead
	if stored.Kind == storage.JobRebuild {
		h, _ := s.headOf(stored.OwnerID)
		h.rebuilding = false
		_ = b.Set(key(pHead, stored.OwnerID), s.stamp(h), nil)
		heads = append(heads, ownerHead{stored.OwnerID, h})
	}
	if err := s.commit(b); err != nil {
		return err
	}
	s.setHeads(heads)
	return nil
}

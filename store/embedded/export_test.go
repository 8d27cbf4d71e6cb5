package embedded

import "fmt"

// Dump returns every key and value in the database, for tests that compare
// whole states.
func (s *Store) Dump() (map[string]string, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make(map[string]string)
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	return out, it.Error()
}

// CheckDisk runs the disk check now, as the store does every
// DiskCheckEvery.
func (s *Store) CheckDisk() { s.disk.check() }

// Checkpoint writes the heads the journal counts, as the store does every
// second, so that a test knows no checkpoint is pending.
func (s *Store) Checkpoint() error { return s.checkpoint() }

// BallastName is the disk reserve's file name.
const BallastName = ballastName

// ForgetSearch deletes every search key and the mark that they are all
// there, leaving the store as one from before search.
func (s *Store) ForgetSearch() error {
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{pSearch}, prefixEnd([]byte{pSearch}), nil)
	_ = b.Delete([]byte{pSearchReady}, nil)
	return s.commit(b)
}

// ForgetNotifActors deletes every X key of the notifications and the mark
// that they are all there, leaving the store as one from before them.
func (s *Store) ForgetNotifActors() error {
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{pNotifByActor}, prefixEnd([]byte{pNotifByActor}), nil)
	_ = b.Delete([]byte{pNotifByActorReady}, nil)
	return s.commit(b)
}

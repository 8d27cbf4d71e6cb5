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

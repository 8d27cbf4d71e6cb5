package embedded

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Stats are cumulative counters of the Pebble database, for measuring what
// an operation costs the engine itself (store/strategies_bench_test.go):
// subtract two of them taken around it, while nothing else writes.
type Stats struct {
	// KeysWritten counts the keys set or deleted (a range deletion counts
	// one) since the database was opened: Pebble gives every key of a
	// committed batch its own sequence number.
	KeysWritten uint64
	// WALBytes is the bytes of batches written to the write-ahead log, keys,
	// values and batch headers: what every write costs before compaction.
	WALBytes uint64
	// BlockReads counts the sstable blocks (data, index, filter) that reads
	// asked of the block cache, hits and misses; BlockMisses those read
	// from a file. Reads served by the memtable count none.
	BlockReads, BlockMisses int64
	// Busy is true while a flush or a compaction runs, competing with
	// what is measured.
	Busy bool

	probe uint64 // WAL bytes of the probe that read KeysWritten
}

// Stats returns the database's counters. Pebble exposes no count of keys
// written, so Stats reads the next sequence number from a probe batch that
// holds only a log record: it consumes no sequence number and writes no
// key, only a few WAL bytes, which Sub takes off again.
func (s *Store) Stats() (Stats, error) {
	m := s.db.Metrics()
	st := Stats{
		WALBytes:    m.WAL.BytesIn,
		BlockReads:  m.BlockCache.Hits + m.BlockCache.Misses,
		BlockMisses: m.BlockCache.Misses,
		Busy:        m.Flush.NumInProgress > 0 || m.Compact.NumInProgress > 0,
	}
	if err := s.disk.writable(); err != nil {
		return Stats{}, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.LogData(nil, nil)
	if err := b.Commit(pebble.NoSync); err != nil {
		return Stats{}, fmt.Errorf("embedded stats: %w", err)
	}
	st.KeysWritten, st.probe = uint64(b.SeqNum()), uint64(len(b.Repr()))
	return st, nil
}

// Sub returns the change from earlier to st (Busy is st's).
func (st Stats) Sub(earlier Stats) Stats {
	return Stats{
		KeysWritten: st.KeysWritten - earlier.KeysWritten,
		WALBytes:    st.WALBytes - earlier.WALBytes - earlier.probe,
		BlockReads:  st.BlockReads - earlier.BlockReads,
		BlockMisses: st.BlockMisses - earlier.BlockMisses,
		Busy:        st.Busy,
		probe:       st.probe,
	}
}

// LiveData scans the whole database and returns its keys and their bytes
// (key and value), by key prefix: what is stored, whatever the files'
// compression and garbage.
func (s *Store) LiveData() (map[byte]Usage, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make(map[byte]Usage)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		u := out[k[0]]
		u.Keys++
		u.Bytes += int64(len(k) + len(it.Value()))
		out[k[0]] = u
	}
	return out, it.Error()
}

// Usage is what one key prefix holds.
type Usage struct {
	Keys, Bytes int64
}

// Flush writes the memtable to an sstable, so that the reads measured after
// it go through files and the block cache, as they do once data is older
// than the memtable.
func (s *Store) Flush() error {
	return s.db.Flush()
}

package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// RawAppendRate measures the engine's own limit for the work of fan-out on
// write, as a reference that fan-out's delivery rate can be reported
// against on the same machine: n inbox entries, one key per entry (the
// layout strategies write and bucket use here) for n distinct owners,
// committed in synced batches of batch, into a fresh database in dir (which
// must not exist or be empty) opened with the store's options. It skips
// what a delivery adds on top (reading followers, counts, delivery
// records, the job's cursor) and returns entries per second.
func RawAppendRate(dir string, n, batch int) (float64, error) {
	if n <= 0 || batch <= 0 {
		return 0, errors.New("raw append rate: entries and batch size must be positive")
	}
	cache := pebble.NewCache(256 << 20)
	defer cache.Unref()
	// Pebble's informational messages would interleave with the output of
	// whoever measures; errors are returned.
	quiet := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, MemTableSize: memTableSize, Logger: pebbleLogger{quiet, exitOnFatal(slog.Default(), dir)}})
	if err != nil {
		return 0, fmt.Errorf("raw append rate: open %s: %w", dir, err)
	}
	now := time.Now()
	author, msg := store.NewID(now), store.NewID(now)
	value := encodeEntry(author, now, now)
	var owner store.ID
	start := time.Now()
	for done := 0; done < n; {
		b := db.NewBatch()
		for range min(batch, n-done) {
			// Owners in increasing order, as a delivery visits followers.
			owner = nextID(owner)
			if err := b.Set(key(pInbox, owner, msg), value, nil); err != nil {
				b.Close()
				_ = db.Close()
				return 0, err
			}
			done++
		}
		if err := b.Commit(pebble.Sync); err != nil {
			b.Close()
			_ = db.Close()
			return 0, fmt.Errorf("raw append rate: commit: %w", err)
		}
		b.Close()
	}
	elapsed := time.Since(start)
	if err := db.Close(); err != nil {
		return 0, err
	}
	return float64(n) / elapsed.Seconds(), nil
}

// nextID returns the ID after id, counting in its bytes.
func nextID(id store.ID) store.ID {
	for i := len(id) - 1; i >= 0; i-- {
		id[i]++
		if id[i] != 0 {
			break
		}
	}
	return id
}

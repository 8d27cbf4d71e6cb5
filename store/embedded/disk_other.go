//go:build !linux

package embedded

import "github.com/cockroachdb/pebble/v2/vfs"

// allocate gives f n bytes of allocated blocks by writing zeros.
func allocate(f vfs.File, n int64) error { return writeZeros(f, n) }

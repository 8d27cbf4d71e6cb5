package embedded

import (
	"errors"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// allocate gives f n bytes of allocated blocks: fallocate, which needs no
// writing, or zeros where the filesystem does not support it.
func allocate(f vfs.File, n int64) error {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		err := syscall.Fallocate(int(fd), 0, 0, n)
		if err == nil || !(errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)) {
			return err
		}
	}
	return writeZeros(f, n)
}

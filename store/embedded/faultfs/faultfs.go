// Package faultfs is a filesystem for tests of the embedded store: the real
// one (or any vfs.FS) seen as a disk with a set amount of free space, which
// writes use up and removals give back; a write beyond it fails with ENOSPC,
// as on a full disk. Syncs can also be made to block, as on a stalled disk.
package faultfs

import (
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a vfs.FS with a free-space budget. It is safe for concurrent use.
type FS struct {
	vfs.FS

	mu    sync.Mutex
	free  int64
	stall chan struct{} // while not nil, Sync waits for it to close
	syncs int           // Syncs waiting on stall
}

// New returns inner seen as a disk with free bytes free.
func New(inner vfs.FS, free int64) *FS { return &FS{FS: inner, free: free} }

// SetFree sets the free space, as another process filling or freeing the
// disk would.
func (fs *FS) SetFree(n int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.free = n
}

// Free returns the free space.
func (fs *FS) Free() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.free
}

// StallSyncs makes every Sync wait until the returned release is called.
func (fs *FS) StallSyncs() (release func()) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ch := make(chan struct{})
	fs.stall = ch
	return sync.OnceFunc(func() {
		fs.mu.Lock()
		fs.stall = nil
		fs.mu.Unlock()
		close(ch)
	})
}

// StalledSyncs returns how many Syncs are waiting on a stall.
func (fs *FS) StalledSyncs() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.syncs
}

// take uses up to n bytes of the free space and returns how many it got.
func (fs *FS) take(n int) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	got := int(min(int64(n), max(fs.free, 0)))
	fs.free -= int64(got)
	return got
}

func (fs *FS) give(n int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.free += n
}

func (fs *FS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: fs, name: name}, nil
}

// Create implements vfs.FS.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	fs.credit(name)
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, name, err)
}

// OpenReadWrite implements vfs.FS.
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.wrap(f, name, err)
}

// ReuseForWrite implements vfs.FS.
func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, newname, err)
}

// Remove implements vfs.FS: the file's size is free again.
func (fs *FS) Remove(name string) error {
	fi, statErr := fs.FS.Stat(name)
	if err := fs.FS.Remove(name); err != nil {
		return err
	}
	if statErr == nil && !fi.IsDir() {
		fs.give(fi.Size())
	}
	return nil
}

// credit gives back the size of a file that Create is about to replace.
func (fs *FS) credit(name string) {
	if fi, err := fs.FS.Stat(name); err == nil && !fi.IsDir() {
		fs.give(fi.Size())
	}
}

// GetDiskUsage implements vfs.FS: the free space is the budget.
func (fs *FS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	free := uint64(max(fs.Free(), 0))
	const total = 1 << 40
	return vfs.DiskUsage{AvailBytes: free, TotalBytes: total, UsedBytes: total - free}, nil
}

type file struct {
	vfs.File
	fs   *FS
	name string
}

func (f *file) enospc(op string) error {
	return &os.PathError{Op: op, Path: f.name, Err: syscall.ENOSPC}
}

// Write writes what fits in the free space; the rest fails with ENOSPC.
func (f *file) Write(p []byte) (int, error) {
	got := f.fs.take(len(p))
	n, err := f.File.Write(p[:got])
	if err == nil && got < len(p) {
		err = f.enospc("write")
	}
	return n, err
}

// WriteAt is Write at an offset.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	got := f.fs.take(len(p))
	n, err := f.File.WriteAt(p[:got], off)
	if err == nil && got < len(p) {
		err = f.enospc("write")
	}
	return n, err
}

// Preallocate reserves nothing: writes are what count.
func (f *file) Preallocate(offset, length int64) error { return nil }

// Fd hides the descriptor, so that nothing writes around the budget
// (fallocate, sync_file_range).
func (f *file) Fd() uintptr { return vfs.InvalidFd }

func (f *file) Sync() error {
	f.waitStall()
	return f.File.Sync()
}

func (f *file) SyncData() error {
	f.waitStall()
	return f.File.SyncData()
}

func (f *file) SyncTo(length int64) (bool, error) {
	f.waitStall()
	return f.File.SyncTo(length)
}

func (f *file) waitStall() {
	f.fs.mu.Lock()
	ch := f.fs.stall
	if ch != nil {
		f.fs.syncs++
	}
	f.fs.mu.Unlock()
	if ch == nil {
		return
	}
	<-ch
	f.fs.mu.Lock()
	f.fs.syncs--
	f.fs.mu.Unlock()
}

var (
	_ vfs.FS    = (*FS)(nil)
	_ vfs.File  = (*file)(nil)
	_ io.Closer = (*file)(nil)
)

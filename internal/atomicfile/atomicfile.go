// Package atomicfile replaces a small state file so that a crash or power
// loss leaves either the old content or the new one, never a mix or an empty
// file: the data goes to a temporary file in the same directory, which is
// fsynced, closed and renamed over the target; then the directory itself is
// fsynced, so that the rename is durable too.
//
// The failover store (the domain in force) and the lastmile DNS cache
// persist through it.
//
// Failure mode: an error at any step removes the temporary file and leaves
// the old file in place; the error is returned. An error from the final
// directory fsync means the new content is in place but might not survive a
// power loss.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces the file at path with data, atomically and durably. The
// file is created with mode 0600 (os.CreateTemp's), readable by its owner
// only. Concurrent Writes to one path must be serialised by the caller; the
// last rename wins.
func Write(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	return syncDir(dir)
}

// Remove removes the file at path, durably (the directory is fsynced). A
// file that does not exist is not an error.
func Remove(path string) error {
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

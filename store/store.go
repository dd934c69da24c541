// Package store is Foundry's local content store: immutable blobs addressed by their
// SHA-256 digest under one root directory (normally .foundry/blobs), laid out as
// <root>/sha256/<hex>. Directory trees (step outputs) are stored as their file blobs plus
// one canonical manifest blob in package digest's Dir format; the tree's digest is the
// manifest's digest.
//
// Guarantees:
//   - A blob is never visible half-written: Put writes a temporary file in the same
//     directory, fsyncs it, renames it to its digest and fsyncs the directory. A crash
//     leaves at most a temporary file (named .tmp-*), which Sweep removes.
//   - A blob's bytes always hash to its name: PutExpected refuses bytes that do not match
//     the digest the caller expected, and Get and Materialize verify as they read.
//   - Materialize never writes outside its destination, whatever the manifest says.
//
// This package must never modify a blob in place, follow a symlink while materializing,
// or know what a blob means beyond tree manifests (action results live in engine/cache).
package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// ErrNotFound is returned (wrapped) when a blob is not in the store.
var ErrNotFound = errors.New("blob not in store")

// ErrDigestMismatch is returned (wrapped) when bytes do not hash to the expected digest.
var ErrDigestMismatch = errors.New("digest mismatch")

// tempPrefix marks files that are being written. They are never valid blob names (a blob
// is named by 64 hex digits), so a reader can never mistake one for a blob.
const tempPrefix = ".tmp-"

// blobMode is the mode of every stored blob: nobody writes a blob after its rename.
const blobMode = 0o444

// Store is a content store rooted at one directory. It is safe for concurrent use by
// goroutines and processes: writes of the same blob race harmlessly (identical bytes).
type Store struct {
	root string
	dir  string // root/sha256
	// tmp (root/tmp) holds blobs being written, on the same file system as dir so that a
	// rename publishes them. Apart from the blobs, so that sweeping up after a crashed
	// writer lists a handful of files, not the whole store.
	tmp string
}

// Open opens (creating if needed) the content store rooted at root.
func Open(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("store: resolve %s: %w", root, err)
	}
	s := &Store{root: abs, dir: filepath.Join(abs, digest.Algorithm), tmp: filepath.Join(abs, "tmp")}
	_, statErr := os.Stat(s.tmp)
	for _, d := range []string{s.dir, s.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("store: create %s: %w", d, err)
		}
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A store made before tmp existed kept its temporary files among the blobs: clear
		// those a crashed writer left, once, if no writer can still own them.
		if _, err := sweep(s.dir, time.Hour); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Root returns the store's root directory.
func (s *Store) Root() string { return s.root }

// Path returns where the blob d is (or would be) stored. It does not check that d is
// well formed or present; use Has or Stat for that.
func (s *Store) Path(d digest.Digest) string {
	return filepath.Join(s.dir, d.Hex())
}

func (s *Store) path(d digest.Digest) (string, error) {
	if err := d.Validate(); err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	return s.Path(d), nil
}

// Put stores everything read from r and returns its digest and size.
func (s *Store) Put(r io.Reader) (digest.Digest, int64, error) {
	d, n, err := s.put(r, "")
	if err != nil {
		return "", 0, err
	}
	if err := s.syncDir(); err != nil {
		return "", 0, err
	}
	return d, n, nil
}

// PutExpected stores everything read from r if it hashes to want, and returns its size.
// Otherwise nothing becomes visible and the error wraps ErrDigestMismatch. If want is
// already stored, r is not read at all.
func (s *Store) PutExpected(r io.Reader, want digest.Digest) (int64, error) {
	if err := want.Validate(); err != nil {
		return 0, fmt.Errorf("store: put: expected %w", err)
	}
	if n, err := s.Stat(want); err == nil {
		s.touch(want)
		return n, nil
	}
	_, n, err := s.put(r, want)
	if err != nil {
		return 0, err
	}
	if err := s.syncDir(); err != nil {
		return 0, err
	}
	return n, nil
}

// PutBytes stores b and returns its digest.
func (s *Store) PutBytes(b []byte) (digest.Digest, error) {
	d, _, err := s.Put(bytes.NewReader(b))
	return d, err
}

// put writes r to a temporary file, fsyncs it and renames it to its digest. It does not
// fsync the directory, so a caller storing many blobs can do that once.
func (s *Store) put(r io.Reader, want digest.Digest) (digest.Digest, int64, error) {
	tmp, err := os.CreateTemp(s.tmp, tempPrefix+"*")
	if err != nil {
		return "", 0, fmt.Errorf("store: put: %w", err)
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	d, n, err := digest.FromReader(io.TeeReader(r, tmp))
	if err != nil {
		return "", 0, fmt.Errorf("store: put: write %s: %w", tmpName, err)
	}
	if want != "" && d != want {
		return "", 0, fmt.Errorf("store: put: got %s (%d bytes), expected %s: %w", d, n, want, ErrDigestMismatch)
	}
	final := s.Path(d)
	if fi, err := os.Lstat(final); err == nil && fi.Mode().IsRegular() {
		s.touch(d)
		return d, n, nil // already stored; the deferred cleanup drops the copy
	}
	if err := tmp.Chmod(blobMode); err != nil {
		return "", 0, fmt.Errorf("store: put %s: %w", d, err)
	}
	if err := tmp.Sync(); err != nil {
		return "", 0, fmt.Errorf("store: put %s: fsync: %w", d, err)
	}
	if err := tmp.Close(); err != nil {
		return "", 0, fmt.Errorf("store: put %s: close: %w", d, err)
	}
	if err := os.Rename(tmpName, final); err != nil {
		return "", 0, fmt.Errorf("store: put %s: rename: %w", d, err)
	}
	committed = true
	return d, n, nil
}

// touch marks a blob as just stored, so that a GC with MinAge running in another process
// spares a blob that a writer is about to reference. Best effort: a failure only makes
// the blob look older.
func (s *Store) touch(d digest.Digest) {
	now := time.Now()
	os.Chtimes(s.Path(d), now, now)
}

// syncDir makes the renames into the blob directory durable.
func (s *Store) syncDir() error {
	f, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("store: sync %s: %w", s.dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", s.dir, err)
	}
	return nil
}

// Open opens the blob d for reading. The caller must close it. The bytes are not verified;
// use Get or Verify when they must be.
func (s *Store) Open(d digest.Digest) (*os.File, error) {
	p, err := s.path(d)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", d, err)
	}
	return f, nil
}

// Get reads the whole blob d and verifies that it hashes to d.
func (s *Store) Get(d digest.Digest) ([]byte, error) {
	f, err := s.Open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", d, err)
	}
	if got := digest.FromBytes(b); got != d {
		return nil, fmt.Errorf("store: blob %s is corrupt: its bytes hash to %s: %w", d, got, ErrDigestMismatch)
	}
	return b, nil
}

// Has reports whether the blob d is stored. It costs one lstat and reads nothing.
func (s *Store) Has(d digest.Digest) (bool, error) {
	_, err := s.Stat(d)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Stat returns the size of the blob d, or an error wrapping ErrNotFound.
func (s *Store) Stat(d digest.Digest) (int64, error) {
	p, err := s.path(d)
	if err != nil {
		return 0, err
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("store: %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("store: stat %s: %w", d, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("store: %s is not a regular file (%s)", p, fi.Mode().Type())
	}
	return fi.Size(), nil
}

// Verify re-hashes the blob d and reports an error wrapping ErrDigestMismatch if its bytes
// do not match its name.
func (s *Store) Verify(d digest.Digest) error {
	f, err := s.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	got, _, err := digest.FromReader(f)
	if err != nil {
		return fmt.Errorf("store: verify %s: %w", d, err)
	}
	if got != d {
		return fmt.Errorf("store: blob %s is corrupt: its bytes hash to %s: %w", d, got, ErrDigestMismatch)
	}
	return nil
}

// Delete removes the blob d; deleting an absent blob is not an error. Only GC should call
// it: a blob referenced by a live cache entry must stay.
func (s *Store) Delete(d digest.Digest) error {
	p, err := s.path(d)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: delete %s: %w", d, err)
	}
	return nil
}

// Walk calls fn for every stored blob with its size and modification time, in directory
// order. Temporary files are skipped.
func (s *Store) Walk(fn func(d digest.Digest, size int64, modTime time.Time) error) error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("store: list %s: %w", s.dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			continue
		}
		d, err := digest.Parse(digest.Algorithm + ":" + name)
		if err != nil {
			continue // not ours; never delete what we cannot name
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("store: stat %s: %w", name, err)
		}
		if err := fn(d, fi.Size(), fi.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

// Sweep removes temporary files left by writers that crashed, and returns how many it
// removed. Only files untouched for olderThan are removed: pass 0 when no other process
// can be writing to the store (at the start of an apply that holds the project lock), or
// a generous age (an hour) otherwise. A writer whose temporary file is swept fails its
// Put with an error; it never produces a wrong blob.
func (s *Store) Sweep(olderThan time.Duration) (int, error) {
	return sweep(s.tmp, olderThan)
}

// sweep removes the temporary files in dir untouched for olderThan.
func sweep(dir string, olderThan time.Duration) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("store: sweep %s: %w", dir, err)
	}
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return removed, fmt.Errorf("store: sweep %s: %w", e.Name(), err)
		}
		if olderThan > 0 && fi.ModTime().After(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("store: sweep %s: %w", e.Name(), err)
		}
		removed++
	}
	return removed, nil
}

// ContextReader returns a reader that fails once ctx is done, so that long copies (blobs,
// layers, pulls) stop on cancellation.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

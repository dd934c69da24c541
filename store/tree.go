package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/foundry-build/foundry/digest"
)

// PutDir stores the directory tree at hostDir: every regular file as a blob, then the
// tree's manifest (package digest's Dir format, canonical JSON) as a blob. It returns the
// manifest's digest, which is the tree's digest, and the manifest. File blobs are durable
// before the manifest is written, so a stored manifest never names a blob that a crash lost.
// A file that changes while it is stored makes PutDir fail rather than store a tree that
// never existed.
func (s *Store) PutDir(hostDir string) (digest.Digest, *digest.Manifest, error) {
	m, md, err := digest.Dir(hostDir)
	if err != nil {
		return "", nil, fmt.Errorf("store: put dir: %w", err)
	}
	for _, e := range m.Entries {
		if e.Type != digest.TypeFile {
			continue
		}
		if ok, _ := s.Has(e.Digest); ok {
			s.touch(e.Digest)
			continue
		}
		if err := s.putHostFile(filepath.Join(hostDir, filepath.FromSlash(e.Path)), e.Digest); err != nil {
			return "", nil, fmt.Errorf("store: put dir %s: %s: %w", hostDir, e.Path, err)
		}
	}
	if err := s.syncDir(); err != nil {
		return "", nil, err
	}
	raw, err := digest.Canonical(m)
	if err != nil {
		return "", nil, fmt.Errorf("store: put dir %s: manifest: %w", hostDir, err)
	}
	if _, err := s.PutExpected(bytes.NewReader(raw), md); err != nil {
		return "", nil, fmt.Errorf("store: put dir %s: manifest: %w", hostDir, err)
	}
	return md, m, nil
}

func (s *Store) putHostFile(p string, want digest.Digest) error {
	// O_NOFOLLOW: digest.Dir saw a regular file here; refuse a symlink swapped in since.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = s.put(f, want)
	return err
}

// ReadManifest reads the tree manifest md from the store, checks that it is a well-formed
// canonical manifest whose digest is md, and checks that it is safe to materialize: every
// path is clean and relative, and every entry's parent is a directory entry of the same
// manifest (so no entry can sit under a symlink, which could point anywhere).
func (s *Store) ReadManifest(md digest.Digest) (*digest.Manifest, error) {
	b, err := s.Get(md)
	if err != nil {
		return nil, err
	}
	m, d, err := parseManifest(b)
	if err != nil {
		return nil, fmt.Errorf("store: tree %s: %w", md, err)
	}
	// Only the canonical form is a tree: then materializing md gives a tree whose
	// digest.Dir is md again.
	if d != md {
		return nil, fmt.Errorf("store: tree %s: manifest is not in canonical form (it describes %s)", md, d)
	}
	return m, nil
}

// ParseManifest decodes and checks a tree manifest (see ReadManifest). It refuses unknown
// fields, malformed entries, duplicate paths, path traversal and entries under symlinks.
func ParseManifest(b []byte) (*digest.Manifest, error) {
	m, _, err := parseManifest(b)
	return m, err
}

func parseManifest(b []byte) (*digest.Manifest, digest.Digest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m digest.Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, "", fmt.Errorf("manifest: %w", err)
	}
	if dec.More() {
		return nil, "", fmt.Errorf("manifest: trailing data")
	}
	// Digest validates every entry: clean relative paths without "..", known types,
	// normalized modes, no duplicates.
	d, err := m.Digest()
	if err != nil {
		return nil, "", err
	}
	dirs := map[string]bool{".": true}
	for _, e := range m.Entries {
		if e.Type == digest.TypeDir {
			dirs[e.Path] = true
		}
	}
	for _, e := range m.Entries {
		// validate() already refused "..", but check again here: this is the line
		// between a hostile manifest and the host's filesystem.
		if !filepath.IsLocal(filepath.FromSlash(e.Path)) {
			return nil, "", fmt.Errorf("manifest: entry %q escapes the tree", e.Path)
		}
		if parent := path.Dir(e.Path); !dirs[parent] {
			return nil, "", fmt.Errorf("manifest: entry %q: its parent %q is not a directory of the tree", e.Path, parent)
		}
	}
	return &m, d, nil
}

// TreeFiles returns the digests of the file blobs that the tree manifest md lists, in
// manifest order, possibly repeated. It is the cheap read for presence checks (the action
// cache calls it on every lookup): it decodes the manifest but neither re-hashes it nor
// checks that it is safe to materialize; Materialize and ReadManifest do both. An error
// wraps ErrNotFound if md is absent.
func (s *Store) TreeFiles(md digest.Digest) ([]digest.Digest, error) {
	f, err := s.Open(md)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var m struct {
		Entries []struct {
			Type   string        `json:"type"`
			Digest digest.Digest `json:"digest"`
		} `json:"entries"`
	}
	if err := json.NewDecoder(f).Decode(&m); err != nil {
		return nil, fmt.Errorf("store: tree %s: manifest: %w", md, err)
	}
	out := make([]digest.Digest, 0, len(m.Entries))
	for _, e := range m.Entries {
		if e.Type != digest.TypeFile {
			continue
		}
		if err := e.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("store: tree %s: manifest: %w", md, err)
		}
		out = append(out, e.Digest)
	}
	return out, nil
}

// Materialize recreates the tree md at dest, which must not exist yet. The tree is built
// in a temporary sibling directory and renamed to dest when complete, so dest is either
// absent or whole.
//
// Files are copied from the store, never hard-linked: a hard link shares the blob's inode,
// so anything that could write or chmod the materialized file (a process running as root
// ignores 0444) would corrupt the store for every later consumer, and one inode cannot be
// executable in one tree and not in another. The copy is verified against the manifest
// digest as it is made. Files get mode 0444 (0555 if executable), directories 0755, so
// the tree hashes back to md and is not writable by accident; mounts are read-only anyway.
// Symlinks are recreated with their recorded targets, which are never followed here.
func (s *Store) Materialize(md digest.Digest, dest string) (err error) {
	m, err := s.ReadManifest(md)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("store: materialize %s: %s already exists", md, dest)
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("store: materialize %s: %w", md, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("store: materialize %s: %w", md, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("store: materialize %s: %w", md, err)
	}
	// Entries are sorted by path, so a directory comes before everything in it.
	for _, e := range m.Entries {
		p := filepath.Join(tmp, filepath.FromSlash(e.Path))
		switch e.Type {
		case digest.TypeDir:
			err = os.Mkdir(p, 0o755)
		case digest.TypeSymlink:
			err = os.Symlink(e.Target, p)
		case digest.TypeFile:
			err = s.copyOut(e, p)
		}
		if err != nil {
			return fmt.Errorf("store: materialize %s: %s: %w", md, e.Path, err)
		}
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("store: materialize %s: %w", md, err)
	}
	return nil
}

func (s *Store) copyOut(e digest.Entry, p string) error {
	src, err := s.Open(e.Digest)
	if err != nil {
		return err
	}
	defer src.Close()
	mode := os.FileMode(0o444)
	if e.Mode == digest.ModeExecutable {
		mode = 0o555
	}
	// O_EXCL|O_NOFOLLOW: never write through anything that is already there.
	dst, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	got, n, err := digest.FromReader(io.TeeReader(src, dst))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got != e.Digest || n != e.Size {
		return fmt.Errorf("blob %s in the store is corrupt (hashes to %s, %d bytes; manifest says %d): %w", e.Digest, got, n, e.Size, ErrDigestMismatch)
	}
	return nil
}

// IsTree reports whether the blob d is a valid tree manifest.
func (s *Store) IsTree(d digest.Digest) (bool, error) {
	f, err := s.Open(d)
	if err != nil {
		return false, err
	}
	var head [len(manifestHead)]byte
	n, _ := io.ReadFull(f, head[:])
	f.Close()
	if string(head[:n]) != manifestHead {
		return false, nil
	}
	if _, err := s.ReadManifest(d); err != nil {
		if errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrNotFound) {
			return false, err
		}
		return false, nil
	}
	return true, nil
}

// manifestHead is how every canonical manifest starts (JCS sorts keys; "entries" is the
// only one).
const manifestHead = `{"entries":[`

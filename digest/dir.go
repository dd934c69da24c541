package digest

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"unicode/utf8"
)

// Entry types in a Manifest.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
)

// Normalized modes, as git records them: only "is it executable" survives for
// files, so a digest does not change with umask, owner or group bits.
const (
	ModeFile       uint32 = 0o644
	ModeExecutable uint32 = 0o755
	ModeDir        uint32 = 0o755
	ModeSymlink    uint32 = 0o777 // fixed; a symlink is identified by its Target
)

// Entry is one file, directory or symbolic link in a Manifest.
//
// Path is slash-separated and relative to the tree's root (the root itself has
// no entry). Size and Digest are set for files only, Target for symlinks only.
// Nothing else about the file (times, owner, inode, xattrs) is part of its
// identity.
type Entry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size,omitempty"`
	Digest Digest `json:"digest,omitempty"`
	Target string `json:"target,omitempty"`
}

// Manifest describes a directory tree. Its digest, the digest of its
// canonical JSON with entries sorted by Path, is the tree's digest.
type Manifest struct {
	Entries []Entry `json:"entries"`
}

// Dir hashes the directory tree at root and returns its manifest (entries
// sorted by Path) and the manifest's digest.
//
// Symbolic links are never followed, root included: root must itself be a
// directory, and a symlink inside the tree is recorded by its target. Sockets,
// devices, FIFOs and other special files are errors naming the path. Names
// and symlink targets that are not valid UTF-8 are errors too, since JSON
// cannot carry them without losing the difference between them.
func Dir(root string) (*Manifest, Digest, error) { return DirCached(root, nil) }

// DirCached is Dir, taking the digests of files unchanged since c (nil for none) last saw
// them from c. root should be absolute for c to remember its files.
func DirCached(root string, c *StatCache) (*Manifest, Digest, error) {
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, "", fmt.Errorf("digest: dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, "", fmt.Errorf("digest: dir %s: not a directory (%s)", root, fi.Mode().Type())
	}
	m := &Manifest{Entries: []Entry{}}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !utf8.ValidString(rel) {
			return fmt.Errorf("%s: path is not valid UTF-8", quoteShort(p))
		}
		e, err := entryFor(p, rel, d, c)
		if err != nil {
			return err
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("digest: dir %s: %w", root, err)
	}
	slices.SortFunc(m.Entries, func(a, b Entry) int { return cmp.Compare(a.Path, b.Path) })
	dg, err := m.digest()
	if err != nil {
		return nil, "", fmt.Errorf("digest: dir %s: %w", root, err)
	}
	return m, dg, nil
}

// entryFor builds the manifest entry for the file at p (rel is its manifest
// path). d comes from WalkDir, which uses lstat, so links are not followed.
func entryFor(p, rel string, d fs.DirEntry, c *StatCache) (Entry, error) {
	switch t := d.Type(); {
	case t.IsDir():
		return Entry{Path: rel, Type: TypeDir, Mode: ModeDir}, nil
	case t&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return Entry{}, err
		}
		if !utf8.ValidString(target) {
			return Entry{}, fmt.Errorf("%s: symlink target is not valid UTF-8", p)
		}
		return Entry{Path: rel, Type: TypeSymlink, Mode: ModeSymlink, Target: target}, nil
	case t.IsRegular():
		return fileEntry(p, rel, d, c)
	default:
		return Entry{}, fmt.Errorf("%s: cannot hash %s; only regular files, directories and symlinks", p, describeType(t))
	}
}

func fileEntry(p, rel string, d fs.DirEntry, c *StatCache) (Entry, error) {
	lst, err := d.Info()
	if err != nil {
		return Entry{}, err
	}
	mode := ModeFile
	if lst.Mode().Perm()&0o100 != 0 { // git looks at the owner's execute bit
		mode = ModeExecutable
	}
	// An unchanged file is not even opened: its digest is the one its lstat data had.
	if dg, ok := c.Lookup(p, lst); ok {
		return Entry{Path: rel, Type: TypeFile, Mode: mode, Size: lst.Size(), Digest: dg}, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	// os.Open follows symlinks; make sure we opened the file we lstat'ed and
	// not something swapped in since.
	st, err := f.Stat()
	if err != nil {
		return Entry{}, err
	}
	if !os.SameFile(lst, st) {
		return Entry{}, fmt.Errorf("%s: changed while hashing", p)
	}
	dg, n, err := hashAndRemember(f, p, st, c)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", p, err)
	}
	return Entry{Path: rel, Type: TypeFile, Mode: mode, Size: n, Digest: dg}, nil
}

func describeType(t fs.FileMode) string {
	switch {
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	default:
		return fmt.Sprintf("an irregular file (%s)", t)
	}
}

// Digest returns the digest of m's canonical JSON. Entries are sorted by Path
// first (m itself is not modified), so the digest does not depend on their
// order. It returns an error if an entry is malformed: a path that is empty,
// absolute, unclean or repeated, an unknown type, a mode that is not the
// normalized one, or fields set that do not belong to the entry's type.
func (m *Manifest) Digest() (Digest, error) {
	d, err := m.digest()
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	return d, nil
}

func (m *Manifest) digest() (Digest, error) {
	entries := slices.Clone(m.Entries)
	if entries == nil {
		entries = []Entry{} // an empty tree is {"entries":[]}, never null
	}
	slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(a.Path, b.Path) })
	for i, e := range entries {
		if err := e.validate(); err != nil {
			return "", fmt.Errorf("manifest: %w", err)
		}
		if i > 0 && entries[i-1].Path == e.Path {
			return "", fmt.Errorf("manifest: duplicate path %s", quoteShort(e.Path))
		}
	}
	b, err := canonicalManifest(entries)
	if err != nil {
		return "", fmt.Errorf("manifest: %w", err)
	}
	return FromBytes(b), nil
}

// canonicalManifest writes a manifest of sorted, valid entries as the canonical JSON
// Canonical(Manifest{entries}) gives, directly: a 15k-file toolchain tree is hashed on
// every plan, and the generic path took half of that. Members are in RFC 8785 order
// (digest, mode, path, size, target, type); the omitempty ones are left out when empty.
func canonicalManifest(entries []Entry) ([]byte, error) {
	e := NewEncoder(64 + 160*len(entries))
	e.Open('{')
	e.Key("entries")
	e.Open('[')
	for _, en := range entries {
		e.Open('{')
		e.OmitEmptyString("digest", string(en.Digest))
		e.Key("mode")
		e.Int(int64(en.Mode))
		e.Key("path")
		e.String(en.Path)
		e.OmitEmptyInt("size", en.Size)
		e.OmitEmptyString("target", en.Target)
		e.Key("type")
		e.String(en.Type)
		e.Close('}')
	}
	e.Close(']')
	e.Close('}')
	return e.Bytes()
}

func (e Entry) validate() error {
	p := e.Path
	if !utf8.ValidString(p) || !utf8.ValidString(e.Target) {
		return fmt.Errorf("entry %s: path and target must be valid UTF-8", quoteShort(p))
	}
	if p == "" || p == "." || path.IsAbs(p) || path.Clean(p) != p || p == ".." || len(p) > 2 && p[:3] == "../" {
		return fmt.Errorf("entry %s: path must be clean, relative and inside the tree", quoteShort(p))
	}
	bad := func(why string) error { return fmt.Errorf("entry %s (%s): %s", quoteShort(p), e.Type, why) }
	switch e.Type {
	case TypeFile:
		if e.Mode != ModeFile && e.Mode != ModeExecutable {
			return bad(fmt.Sprintf("mode %#o, want %#o or %#o", e.Mode, ModeFile, ModeExecutable))
		}
		if err := e.Digest.Validate(); err != nil {
			return bad(err.Error())
		}
		if e.Size < 0 || e.Target != "" {
			return bad("negative size or a symlink target")
		}
	case TypeDir:
		if e.Mode != ModeDir {
			return bad(fmt.Sprintf("mode %#o, want %#o", e.Mode, ModeDir))
		}
		if e.Size != 0 || e.Digest != "" || e.Target != "" {
			return bad("size, digest or target set")
		}
	case TypeSymlink:
		if e.Mode != ModeSymlink {
			return bad(fmt.Sprintf("mode %#o, want %#o", e.Mode, ModeSymlink))
		}
		if e.Target == "" {
			return bad("empty target")
		}
		if e.Size != 0 || e.Digest != "" {
			return bad("size or digest set")
		}
	default:
		return bad("unknown type, want file, dir or symlink")
	}
	return nil
}

package digest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// spec describes a tree to create on disk: slash path -> node. Parent
// directories are implied; a node of kind "dir" is an explicit (possibly
// empty) directory.
type spec map[string]node

type node struct {
	kind    string // TypeFile, TypeDir or TypeSymlink
	content string
	exec    bool
	target  string
}

func (s spec) clone() spec { return maps.Clone(s) }

// create builds s under a new temporary directory, creating entries in an
// order shuffled by rng and with permission bits that normalization must
// erase (group/other bits vary, only the owner execute bit is kept).
func (s spec) create(t *testing.T, rng *rand.Rand) string {
	t.Helper()
	root := t.TempDir()
	paths := slices.Collect(maps.Keys(s))
	rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	for _, p := range paths {
		n := s[p]
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700+os.FileMode(rng.IntN(0o100))); err != nil {
			t.Fatal(err)
		}
		switch n.kind {
		case TypeDir:
			if err := os.MkdirAll(full, 0o700); err != nil {
				t.Fatal(err)
			}
		case TypeSymlink:
			if err := os.Symlink(n.target, full); err != nil {
				t.Fatal(err)
			}
		case TypeFile:
			perm := os.FileMode(0o600 | rng.IntN(0o100)) // random group/other bits
			if n.exec {
				perm |= 0o100
			}
			if err := os.WriteFile(full, []byte(n.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(full, perm); err != nil { // not subject to umask
				t.Fatal(err)
			}
		}
	}
	return root
}

func mustDir(t *testing.T, root string) (*Manifest, Digest) {
	t.Helper()
	m, d, err := Dir(root)
	if err != nil {
		t.Fatalf("Dir(%s): %v", root, err)
	}
	return m, d
}

var names = []string{"a", "b", "a.b", "a-b", "é", "with space", "Z", "0", "ab"}

func randomSpec(rng *rand.Rand) spec {
	s := spec{}
	n := 1 + rng.IntN(12)
	for len(s) < n {
		depth := rng.IntN(3)
		parts := make([]string, depth+1)
		for i := range parts {
			parts[i] = names[rng.IntN(len(names))]
		}
		p := strings.Join(parts, "/")
		if conflicts(s, p) {
			continue
		}
		switch r := rng.IntN(10); {
		case r < 6:
			content := make([]byte, rng.IntN(40))
			for i := range content {
				content[i] = byte(rng.IntN(256))
			}
			s[p] = node{kind: TypeFile, content: string(content), exec: rng.IntN(2) == 0}
		case r < 8:
			s[p] = node{kind: TypeSymlink, target: "../" + names[rng.IntN(len(names))]}
		default:
			s[p] = node{kind: TypeDir}
		}
	}
	return s
}

// conflicts reports whether adding p to s would put a path under a
// non-directory or a non-directory over existing paths.
func conflicts(s spec, p string) bool {
	for q, n := range s {
		if q == p || strings.HasPrefix(q, p+"/") ||
			(n.kind != TypeDir && strings.HasPrefix(p, q+"/")) {
			return true
		}
	}
	return false
}

// mutations returns named single changes to s, each of which must change
// the tree's digest.
func mutations(s spec, rng *rand.Rand) map[string]spec {
	out := map[string]spec{}
	paths := slices.Sorted(maps.Keys(s))
	for _, p := range paths {
		n := s[p]
		add := func(name string, f func(m spec)) {
			m := s.clone()
			f(m)
			out[name+" "+p] = m
		}
		switch n.kind {
		case TypeFile:
			if len(n.content) > 0 {
				add("flip byte of", func(m spec) {
					b := []byte(n.content)
					i := rng.IntN(len(b))
					b[i] ^= byte(1 + rng.IntN(255))
					m[p] = node{kind: TypeFile, content: string(b), exec: n.exec}
				})
			}
			add("append byte to", func(m spec) {
				m[p] = node{kind: TypeFile, content: n.content + "\x00", exec: n.exec}
			})
			add("toggle exec bit of", func(m spec) {
				m[p] = node{kind: TypeFile, content: n.content, exec: !n.exec}
			})
			add("replace with symlink", func(m spec) {
				m[p] = node{kind: TypeSymlink, target: fmt.Sprintf("x%x", n.content)}
			})
		case TypeSymlink:
			add("retarget", func(m spec) {
				m[p] = node{kind: TypeSymlink, target: n.target + "x"}
			})
		}
		if !hasChildren(s, p) {
			add("rename", func(m spec) {
				delete(m, p)
				m[path.Join(path.Dir(p), "renamed-"+path.Base(p))] = n
			})
			add("remove", func(m spec) { delete(m, p) })
			if n.kind != TypeDir {
				add("replace with empty dir", func(m spec) { m[p] = node{kind: TypeDir} })
			}
		}
	}
	m := s.clone()
	m["new-empty-dir"] = node{kind: TypeDir}
	out["add empty dir"] = m
	m = s.clone()
	m["new-empty-file"] = node{kind: TypeFile}
	out["add empty file"] = m
	return out
}

func hasChildren(s spec, p string) bool {
	for q := range s {
		if strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	return false
}

func TestDirStableAndSensitive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	iters := 15
	if testing.Short() {
		iters = 3
	}
	for iter := 0; iter < iters; iter++ {
		s := randomSpec(rng)
		m1, d1 := mustDir(t, s.create(t, rng))
		// A second copy, created in a different order with different
		// group/other permission bits, has the same manifest and digest.
		m2, d2 := mustDir(t, s.create(t, rng))
		if d1 != d2 {
			t.Fatalf("iter %d: same tree, different digests %s %s\n%+v\n%+v", iter, d1, d2, m1, m2)
		}
		if d, err := m1.Digest(); err != nil || d != d1 {
			t.Fatalf("iter %d: Manifest.Digest = %s, %v; Dir returned %s", iter, d, err, d1)
		}
		if !slices.IsSortedFunc(m1.Entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }) {
			t.Fatalf("iter %d: entries not sorted: %+v", iter, m1.Entries)
		}
		for name, mut := range mutations(s, rng) {
			_, dm := mustDir(t, mut.create(t, rng))
			if dm == d1 {
				t.Errorf("iter %d: %s did not change the digest %s", iter, name, d1)
			}
		}
	}
}

func TestDirManifestFormat(t *testing.T) {
	root := spec{
		"a":   {kind: TypeFile, content: "abc"},
		"d/x": {kind: TypeFile, exec: true},
		"l":   {kind: TypeSymlink, target: "a"},
		"e":   {kind: TypeDir},
	}.create(t, rand.New(rand.NewPCG(3, 4)))
	m, d := mustDir(t, root)
	// The canonical manifest is part of Foundry's cache key format: a change
	// here invalidates every cached directory digest.
	want := `{"entries":[` +
		`{"digest":"` + abcSHA + `","mode":420,"path":"a","size":3,"type":"file"},` +
		`{"mode":493,"path":"d","type":"dir"},` +
		`{"digest":"` + emptySHA + `","mode":493,"path":"d/x","type":"file"},` +
		`{"mode":493,"path":"e","type":"dir"},` +
		`{"mode":511,"path":"l","target":"a","type":"symlink"}]}`
	got, err := Canonical(m)
	if err != nil || string(got) != want {
		t.Fatalf("canonical manifest:\n got %s (%v)\nwant %s", got, err, want)
	}
	if d != FromBytes([]byte(want)) {
		t.Errorf("Dir digest %s is not the digest of the canonical manifest", d)
	}
}

func TestDirEmpty(t *testing.T) {
	m, d := mustDir(t, t.TempDir())
	if len(m.Entries) != 0 || d != FromBytes([]byte(`{"entries":[]}`)) {
		t.Errorf("empty dir: %+v %s", m, d)
	}
	var nilManifest Manifest
	if d2, err := nilManifest.Digest(); err != nil || d2 != d {
		t.Errorf("nil entries digest %s, %v; want %s", d2, err, d)
	}
}

func TestDirDoesNotFollowSymlinks(t *testing.T) {
	outside := spec{"secret": {kind: TypeFile, content: "s"}}.create(t, rand.New(rand.NewPCG(5, 6)))
	root := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	m, _ := mustDir(t, root)
	want := []Entry{{Path: "link", Type: TypeSymlink, Mode: ModeSymlink, Target: outside}}
	if !slices.Equal(m.Entries, want) {
		t.Errorf("entries = %+v, want %+v", m.Entries, want)
	}
	// The root itself is not followed either.
	if _, _, err := Dir(filepath.Join(root, "link")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Dir(symlink) = %v, want not-a-directory error", err)
	}
	if _, _, err := Dir(filepath.Join(root, "missing")); err == nil {
		t.Error("Dir(missing) succeeded")
	}
}

func TestDirRejectsNonUTF8Names(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "bad\xff"), nil, 0o644); err != nil {
		t.Skipf("filesystem refuses non-UTF-8 names: %v", err)
	}
	if _, _, err := Dir(root); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("Dir = %v, want UTF-8 error", err)
	}
	root = t.TempDir()
	if err := os.Symlink("tgt\xff", filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Dir(root); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("Dir = %v, want UTF-8 error for symlink target", err)
	}
}

func TestDirUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can read any file")
	}
	root := t.TempDir()
	p := filepath.Join(root, "locked")
	if err := os.WriteFile(p, []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Dir(root); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Dir = %v, want error naming %s", err, p)
	}
}

func TestManifestDigest(t *testing.T) {
	file := func(p string) Entry {
		return Entry{Path: p, Type: TypeFile, Mode: ModeFile, Size: 1, Digest: FromBytes([]byte(p))}
	}
	m := Manifest{Entries: []Entry{file("b"), file("a"), {Path: "c", Type: TypeDir, Mode: ModeDir}}}
	d1, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Entries[0].Path != "b" {
		t.Error("Digest reordered the caller's entries")
	}
	slices.Reverse(m.Entries)
	if d2, err := m.Digest(); err != nil || d2 != d1 {
		t.Errorf("entry order changed the digest: %s vs %s (%v)", d2, d1, err)
	}

	bad := map[string]Entry{
		"empty path":       {Path: "", Type: TypeDir, Mode: ModeDir},
		"dot":              {Path: ".", Type: TypeDir, Mode: ModeDir},
		"absolute":         {Path: "/a", Type: TypeDir, Mode: ModeDir},
		"dotdot":           {Path: "../a", Type: TypeDir, Mode: ModeDir},
		"unclean":          {Path: "a//b", Type: TypeDir, Mode: ModeDir},
		"trailing slash":   {Path: "a/", Type: TypeDir, Mode: ModeDir},
		"unknown type":     {Path: "a", Type: "fifo", Mode: ModeDir},
		"file bad mode":    {Path: "a", Type: TypeFile, Mode: 0o600, Digest: emptySHA},
		"file no digest":   {Path: "a", Type: TypeFile, Mode: ModeFile},
		"dir with size":    {Path: "a", Type: TypeDir, Mode: ModeDir, Size: 1},
		"symlink no tgt":   {Path: "a", Type: TypeSymlink, Mode: ModeSymlink},
		"symlink bad mode": {Path: "a", Type: TypeSymlink, Mode: 0o755, Target: "x"},
		"invalid utf8":     {Path: "a\xff", Type: TypeDir, Mode: ModeDir},
	}
	for name, e := range bad {
		if _, err := (&Manifest{Entries: []Entry{e}}).Digest(); err == nil {
			t.Errorf("%s: Digest accepted %+v", name, e)
		}
	}
	if _, err := (&Manifest{Entries: []Entry{file("a"), file("a")}}).Digest(); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate paths: %v", err)
	}
}

func ExampleDir() {
	root, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(root)
	_ = os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello\n"), 0o644)
	m, d, err := Dir(root)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(m.Entries), m.Entries[0].Path, m.Entries[0].Mode == ModeFile, d.Validate() == nil)
	// Output: 1 hello.txt true true
}

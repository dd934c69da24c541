package store

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
)

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
}

// sampleTree builds a tree with nested directories, an executable, an empty file, an
// empty directory and relative and absolute symlinks.
func sampleTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	writeFile(t, filepath.Join(dir, "bin", "tool"), "#!/bin/sh\necho hi\n", 0o755)
	writeFile(t, filepath.Join(dir, "share", "doc", "README"), "read me", 0o644)
	writeFile(t, filepath.Join(dir, "share", "doc", "copy"), "read me", 0o600) // same blob
	writeFile(t, filepath.Join(dir, "empty"), "", 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "var", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../bin/tool", filepath.Join(dir, "share", "tool-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "abs-link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestTreeRoundTrip(t *testing.T) {
	s := newStore(t)
	src := sampleTree(t)
	md, m, err := s.PutDir(src)
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := digest.Dir(src)
	if err != nil || md != want {
		t.Fatalf("PutDir digest %s, digest.Dir %s (%v)", md, want, err)
	}
	if len(m.Entries) != 11 {
		t.Fatalf("manifest has %d entries: %+v", len(m.Entries), m.Entries)
	}
	if ok, err := s.IsTree(md); !ok || err != nil {
		t.Fatalf("IsTree(manifest) = %v, %v", ok, err)
	}
	fileBlob := digest.FromBytes([]byte("read me"))
	if ok, _ := s.IsTree(fileBlob); ok {
		t.Fatal("a file blob is reported as a tree")
	}

	dest := filepath.Join(t.TempDir(), "in", "tree")
	if err := s.Materialize(md, dest); err != nil {
		t.Fatal(err)
	}
	_, got, err := digest.Dir(dest)
	if err != nil || got != md {
		t.Fatalf("materialized tree hashes to %s, want %s (%v)", got, md, err)
	}
	if target, err := os.Readlink(filepath.Join(dest, "share", "tool-link")); err != nil || target != "../bin/tool" {
		t.Fatalf("relative symlink = %q, %v", target, err)
	}
	if target, err := os.Readlink(filepath.Join(dest, "abs-link")); err != nil || target != "/etc/hostname" {
		t.Fatalf("absolute symlink = %q, %v", target, err)
	}
	for p, mode := range map[string]os.FileMode{"bin/tool": 0o555, "share/doc/README": 0o444, "empty": 0o444} {
		fi, err := os.Lstat(filepath.Join(dest, p))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", p, fi.Mode().Perm(), mode, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "bin", "tool")); string(b) != "#!/bin/sh\necho hi\n" {
		t.Fatalf("tool = %q", b)
	}
	// Copies, not hard links: the materialized file is not the blob.
	blob, _ := os.Stat(s.Path(fileBlob))
	mat, _ := os.Stat(filepath.Join(dest, "share", "doc", "README"))
	if os.SameFile(blob, mat) {
		t.Fatal("materialized file is a hard link to the store")
	}
	// No temporary directory is left beside dest, and dest is refused a second time.
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dest), ".*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if err := s.Materialize(md, dest); err == nil {
		t.Fatal("Materialize overwrote an existing destination")
	}
	// An empty tree round-trips too.
	emptyDir := t.TempDir()
	ed, _, err := s.PutDir(emptyDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Materialize(ed, filepath.Join(t.TempDir(), "e")); err != nil {
		t.Fatal(err)
	}
}

func TestMaterializeDetectsCorruptBlob(t *testing.T) {
	s := newStore(t)
	md, _, err := s.PutDir(sampleTree(t))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Path(digest.FromBytes([]byte("read me")))
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("READ ME"), 0o644)
	dest := filepath.Join(t.TempDir(), "tree")
	if err := s.Materialize(md, dest); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err = %v, want ErrDigestMismatch", err)
	}
	if _, err := os.Lstat(dest); !os.IsNotExist(err) {
		t.Fatal("a half-materialized tree is visible at dest")
	}
}

// putManifest stores a hand-written (possibly hostile) manifest as a blob, as an attacker
// with write access to the cache or a registry could.
func putManifest(t *testing.T, s *Store, raw string) digest.Digest {
	t.Helper()
	d, err := s.PutBytes([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestMaterializeRefusesHostileManifests(t *testing.T) {
	s := newStore(t)
	payload, _ := s.PutBytes([]byte("pwned"))
	file := func(p string) string {
		b, _ := json.Marshal(digest.Entry{Path: p, Type: digest.TypeFile, Mode: digest.ModeFile, Size: 5, Digest: payload})
		return string(b)
	}
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"dotdot":          `{"entries":[` + file("../pwned") + `]}`,
		"dotdot inside":   `{"entries":[{"mode":493,"path":"a","type":"dir"},` + file("a/../../pwned") + `]}`,
		"absolute":        `{"entries":[` + file("/tmp/pwned") + `]}`,
		"through symlink": `{"entries":[{"mode":511,"path":"link","target":"` + outside + `","type":"symlink"},` + file("link/pwned") + `]}`,
		"missing parent":  `{"entries":[` + file("nodir/pwned") + `]}`,
		"file as parent":  `{"entries":[` + file("f") + `,` + file("f/pwned") + `]}`,
		"duplicate":       `{"entries":[` + file("x") + `,` + file("x") + `]}`,
		"bad mode":        `{"entries":[{"digest":"` + string(payload) + `","mode":2541,"path":"suid","size":5,"type":"file"}]}`,
		"unknown field":   `{"entries":[],"owner":"root"}`,
		"unknown type":    `{"entries":[{"mode":420,"path":"dev","type":"device"}]}`,
		"not canonical":   `{"entries": [` + file("b") + `,` + file("a") + `]}`,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			md := putManifest(t, s, raw)
			dest := filepath.Join(base, "dest-"+strings.ReplaceAll(name, " ", "-"))
			err := s.Materialize(md, dest)
			t.Log(err)
			if err == nil {
				t.Fatalf("materialized a hostile manifest: %s", raw)
			}
			if _, err := os.Lstat(dest); !os.IsNotExist(err) {
				t.Fatal("dest exists after a refused manifest")
			}
		})
	}
	for _, p := range []string{filepath.Join(base, "pwned"), filepath.Join(outside, "pwned"), "/tmp/pwned"} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s was written", p)
		}
	}
	// The same checks without the store: the parser is what stands between a manifest and
	// the filesystem.
	if _, err := ParseManifest([]byte(cases["through symlink"])); err == nil {
		t.Fatal("ParseManifest accepted an entry under a symlink")
	}
}

func TestGCKeepsLiveRemovesDead(t *testing.T) {
	s := newStore(t)
	tree, m, err := s.PutDir(sampleTree(t))
	if err != nil {
		t.Fatal(err)
	}
	liveFile, _ := s.PutBytes([]byte("a live log"))
	dead1, _ := s.PutBytes([]byte("dead one"))
	dead2, _ := s.PutBytes([]byte("dead two!"))
	deadTree, _, err := s.PutDir(func() string {
		d := t.TempDir()
		writeFile(t, filepath.Join(d, "only-in-dead-tree"), "ghost", 0o644)
		return d
	}())
	if err != nil {
		t.Fatal(err)
	}
	ghost := digest.FromBytes([]byte("ghost"))
	missing := digest.FromBytes([]byte("never stored"))

	// A dry run reports without deleting.
	st, err := s.GC([]digest.Digest{tree, liveFile, missing}, GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != 4 || st.MissingRoots != 1 {
		t.Fatalf("dry run stats %+v", st)
	}
	if ok, _ := s.Has(dead1); !ok {
		t.Fatal("dry run deleted a blob")
	}
	// Everything is young: MinAge spares it all.
	if st, err := s.GC([]digest.Digest{tree}, GCOptions{MinAge: time.Hour}); err != nil || st.Deleted != 0 || st.Spared != 5 {
		t.Fatalf("MinAge stats %+v, %v", st, err)
	}

	st, err = s.GC([]digest.Digest{tree, liveFile, missing}, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantFreed := int64(len("dead one") + len("dead two!") + len("ghost"))
	for _, d := range []digest.Digest{dead1, dead2, deadTree, ghost} {
		if ok, _ := s.Has(d); ok {
			t.Errorf("dead blob %s survived", d)
		}
	}
	if st.Deleted != 4 || st.BytesFreed <= wantFreed {
		t.Errorf("stats %+v; want 4 deleted, more than %d bytes", st, wantFreed)
	}
	keep := []digest.Digest{tree, liveFile}
	for _, e := range m.Entries {
		if e.Type == digest.TypeFile {
			keep = append(keep, e.Digest)
		}
	}
	for _, d := range keep {
		if ok, _ := s.Has(d); !ok {
			t.Errorf("live blob %s was deleted", d)
		}
	}
	// The live tree still materializes.
	if err := s.Materialize(tree, filepath.Join(t.TempDir(), "t")); err != nil {
		t.Fatal(err)
	}
}

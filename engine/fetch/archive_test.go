package fetch

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/fetch/fetchtest"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/store"
)

// unpackBytes unpacks archive b (of format archive) into a tree in st under lim and
// stores it.
func unpackBytes(t testing.TB, st *store.Store, b []byte, archive string, stripN int, lim lang.SourceLimits) (digest.Digest, error) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "archive-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	tr := newTree(context.Background(), st, lim, false)
	if err := unpack(tr, f, int64(len(b)), archive, stripN); err != nil {
		return "", err
	}
	return tr.store()
}

func newStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Every way an archive can try to reach outside its tree is refused, with the entry named,
// and nothing is written outside: not at the absolute paths it names, not through its links.
func TestHostileArchivesAreRefused(t *testing.T) {
	outside := t.TempDir() // what an escape would write to
	abs := filepath.Join(outside, "pwned")
	rel, _ := filepath.Rel("/", abs)
	up := strings.Repeat("../", 32) + rel
	small := lang.SourceLimits{Download: 1 << 20, Unpacked: 64 << 10, Entries: 16, Time: lang.DefaultSourceLimits.Time}
	for name, c := range map[string]struct {
		entries []fetchtest.Entry
		archive string
		want    string
	}{
		"dotdot":               {[]fetchtest.Entry{{Name: up, Body: "x"}}, lang.ArchiveTar, `".." element`},
		"dotdot inside":        {[]fetchtest.Entry{{Name: "a/../../pwned", Body: "x"}}, lang.ArchiveTar, `".." element`},
		"absolute":             {[]fetchtest.Entry{{Name: abs, Body: "x"}}, lang.ArchiveTar, "absolute name"},
		"symlink absolute":     {[]fetchtest.Entry{{Name: "l", Type: tar.TypeSymlink, Link: outside}, {Name: "l/pwned", Body: "x"}}, lang.ArchiveTar, "outside the tree"},
		"symlink up":           {[]fetchtest.Entry{{Name: "d/l", Type: tar.TypeSymlink, Link: "../../" + rel}}, lang.ArchiveTar, "outside the tree"},
		"symlink chain":        {[]fetchtest.Entry{{Name: "d/up", Type: tar.TypeSymlink, Link: ".."}, {Name: "esc", Type: tar.TypeSymlink, Link: "d/up/../pwned"}}, lang.ArchiveTar, "outside the tree"},
		"symlink loop":         {[]fetchtest.Entry{{Name: "a", Type: tar.TypeSymlink, Link: "b"}, {Name: "b", Type: tar.TypeSymlink, Link: "a/x"}}, lang.ArchiveTar, "more than 40 links"},
		"through a symlink":    {[]fetchtest.Entry{{Name: "d/", Type: tar.TypeDir}, {Name: "l", Type: tar.TypeSymlink, Link: "d"}, {Name: "l/f", Body: "x"}}, lang.ArchiveTar, "which is a symlink"},
		"hard link outside":    {[]fetchtest.Entry{{Name: "h", Type: tar.TypeLink, Link: up}}, lang.ArchiveTar, `".." element`},
		"hard link absolute":   {[]fetchtest.Entry{{Name: "h", Type: tar.TypeLink, Link: "/etc/passwd"}}, lang.ArchiveTar, "absolute name"},
		"hard link unknown":    {[]fetchtest.Entry{{Name: "h", Type: tar.TypeLink, Link: "etc/passwd"}}, lang.ArchiveTar, "not a file named earlier"},
		"hard link to a dir":   {[]fetchtest.Entry{{Name: "d/", Type: tar.TypeDir}, {Name: "h", Type: tar.TypeLink, Link: "d"}}, lang.ArchiveTar, "not a file named earlier"},
		"char device":          {[]fetchtest.Entry{{Name: "null", Type: tar.TypeChar}}, lang.ArchiveTar, "is a device"},
		"block device":         {[]fetchtest.Entry{{Name: "sda", Type: tar.TypeBlock}}, lang.ArchiveTar, "is a device"},
		"fifo":                 {[]fetchtest.Entry{{Name: "p", Type: tar.TypeFifo}}, lang.ArchiveTar, "FIFO"},
		"named twice":          {[]fetchtest.Entry{{Name: "a", Body: "1"}, {Name: "a", Body: "2"}}, lang.ArchiveTar, "named twice"},
		"file then dir":        {[]fetchtest.Entry{{Name: "a", Body: "1"}, {Name: "a/b", Body: "2"}}, lang.ArchiveTar, "not a directory"},
		"too many entries":     {manyEntries(17), lang.ArchiveTar, "limits.entries"},
		"bomb":                 {[]fetchtest.Entry{{Name: "zeros", Body: strings.Repeat("\x00", 1<<20)}}, lang.ArchiveTarGz, "limits.unpacked"},
		"zip dotdot":           {[]fetchtest.Entry{{Name: up, Body: "x"}}, lang.ArchiveZip, `".." element`},
		"zip absolute":         {[]fetchtest.Entry{{Name: abs, Body: "x"}}, lang.ArchiveZip, "absolute name"},
		"zip symlink absolute": {[]fetchtest.Entry{{Name: "l", Type: tar.TypeSymlink, Link: outside}}, lang.ArchiveZip, "outside the tree"},
		"zip bomb":             {[]fetchtest.Entry{{Name: "zeros", Body: strings.Repeat("\x00", 1<<20)}}, lang.ArchiveZip, "limits.unpacked"},
	} {
		var b []byte
		switch c.archive {
		case lang.ArchiveZip:
			b = fetchtest.Zip(t, c.entries...)
		case lang.ArchiveTarGz:
			b = fetchtest.Gzip(t, fetchtest.Tar(t, c.entries...))
		default:
			b = fetchtest.Tar(t, c.entries...)
		}
		_, err := unpackBytes(t, newStore(t), b, c.archive, 0, small)
		if !errors.Is(err, ErrHostile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal saying %q", name, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("something was written outside the tree: %v", ents)
	}
}

func manyEntries(n int) []fetchtest.Entry {
	var out []fetchtest.Entry
	for i := 0; i < n; i++ {
		out = append(out, fetchtest.Entry{Name: "f" + strings.Repeat("x", i), Body: "x"})
	}
	return out
}

// What a well-behaved archive may hold is kept: links inside the tree (through other links
// too), a hard link to an earlier file (a copy), "./" names, implicit directories; and the
// tree materializes and hashes back to itself.
func TestArchiveLinksInsideTheTree(t *testing.T) {
	st := newStore(t)
	b := fetchtest.Tar(t,
		fetchtest.Entry{Name: "./top/a/file", Body: "data"},
		fetchtest.Entry{Name: "./top/a/up", Type: tar.TypeSymlink, Link: ".."},
		fetchtest.Entry{Name: "./top/b", Type: tar.TypeSymlink, Link: "a/up/a/file"},
		fetchtest.Entry{Name: "./top/dangling", Type: tar.TypeSymlink, Link: "nowhere/yet"},
		fetchtest.Entry{Name: "./top/hard", Type: tar.TypeLink, Link: "./top/a/file"},
	)
	tree, err := unpackBytes(t, st, b, lang.ArchiveTar, 1, lang.DefaultSourceLimits)
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "tree")
	if err := st.Materialize(tree, dest); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "b")); string(got) != "data" {
		t.Errorf("b through two links: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "hard")); string(got) != "data" {
		t.Errorf("the hard link's copy: %q", got)
	}
	if _, d, err := digest.Dir(dest); err != nil || d != tree {
		t.Errorf("materialized tree hashes to %s (%v), want %s", d, err, tree)
	}
	// strip more than the archive has leaves nothing, which is an error of the source.
	if _, err := unpackBytes(t, st, b, lang.ArchiveTar, 9, lang.DefaultSourceLimits); err != nil {
		t.Errorf("strip past every name is an empty tree for unpack: %v", err)
	}
}

// A refused archive fetched as a source leaves no record: no step can mount it.
func TestHostileSourceLeavesNoRecord(t *testing.T) {
	b := fetchtest.Tar(t, fetchtest.Entry{Name: "l", Type: tar.TypeSymlink, Link: "/etc"}, fetchtest.Entry{Name: "l/passwd", Body: "x"})
	base, host := serve(t, map[string][]byte{"/a.tar": b}, nil)
	x := newFixture(t, host)
	res, err := x.fetch(t, httpSource([]string{base + "/a.tar"}, sum(b), lang.ArchiveTar, 0))
	if !errors.Is(err, ErrHostile) || res != nil {
		t.Fatalf("a hostile source: %v, %v", err, res)
	}
	if n := x.records(t); n != 0 {
		t.Errorf("%d blobs named by records after a refused archive", n)
	}
}

// FuzzUnpack: whatever bytes an archive holds, unpacking them never panics, and a tree it
// stores is one the store will materialize, inside the destination, with every link
// resolving inside the tree.
func FuzzUnpack(f *testing.F) {
	f.Add(fetchtest.Tar(f, fetchtest.Entry{Name: "a/b", Body: "x"}, fetchtest.Entry{Name: "a/l", Type: tar.TypeSymlink, Link: "b"}), uint8(0))
	f.Add(fetchtest.Tar(f, fetchtest.Entry{Name: "a/up", Type: tar.TypeSymlink, Link: ".."}, fetchtest.Entry{Name: "h", Type: tar.TypeLink, Link: "a/b"}), uint8(0))
	f.Add(fetchtest.Zip(f, fetchtest.Entry{Name: "z/f", Body: "y"}, fetchtest.Entry{Name: "z/l", Type: tar.TypeSymlink, Link: "../z/f"}), uint8(1))
	f.Add(fetchtest.Gzip(f, fetchtest.Tar(f, fetchtest.Entry{Name: "g", Body: "z"})), uint8(2))
	lim := lang.SourceLimits{Download: 1 << 20, Unpacked: 1 << 20, Entries: 256, Time: lang.DefaultSourceLimits.Time}
	f.Fuzz(func(t *testing.T, b []byte, kind uint8) {
		archive := []string{lang.ArchiveTar, lang.ArchiveZip, lang.ArchiveTarGz}[int(kind)%3]
		st := newStore(t)
		tree, err := unpackBytes(t, st, b, archive, int(kind>>2)%3, lim)
		if err != nil {
			return
		}
		root := t.TempDir()
		dest := filepath.Join(root, "tree")
		if err := st.Materialize(tree, dest); err != nil {
			t.Fatalf("a stored tree does not materialize: %v", err)
		}
		m, err := st.ReadManifest(tree)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range m.Entries {
			if e.Type != digest.TypeSymlink {
				continue
			}
			resolved, err := filepath.EvalSymlinks(filepath.Join(dest, e.Path))
			if err != nil {
				continue // dangling inside the tree
			}
			if resolved != dest && !strings.HasPrefix(resolved, dest+string(filepath.Separator)) {
				t.Fatalf("link %s = %q resolves outside the tree, to %s", e.Path, e.Target, resolved)
			}
		}
		if ents, _ := os.ReadDir(root); len(ents) != 1 {
			t.Fatalf("materializing wrote beside the tree: %v", ents)
		}
	})
}

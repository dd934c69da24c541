package digest

import (
	"cmp"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The direct manifest writer gives exactly the bytes the generic canonical path gives, for
// random trees with every kind of entry and awkward names.
func TestCanonicalManifestMatchesCanonical(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	names := []string{"a", "b c", "ü", "\u00e9", "日本", "x\"y", "back\\slash", "tab\there", "\U0001F600", "ctrl\x01", "z"}
	for iter := 0; iter < 2000; iter++ {
		seen := map[string]bool{}
		var entries []Entry
		for n := r.Intn(12); n > 0; n-- {
			p := names[r.Intn(len(names))]
			if r.Intn(2) == 0 {
				p += "/" + names[r.Intn(len(names))]
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			switch r.Intn(4) {
			case 0:
				entries = append(entries, Entry{Path: p, Type: TypeDir, Mode: ModeDir})
			case 1:
				entries = append(entries, Entry{Path: p, Type: TypeSymlink, Mode: ModeSymlink, Target: names[r.Intn(len(names))]})
			default:
				mode := ModeFile
				if r.Intn(2) == 0 {
					mode = ModeExecutable
				}
				size := int64(r.Intn(3)) * r.Int63n(1<<53)
				entries = append(entries, Entry{Path: p, Type: TypeFile, Mode: mode, Size: size, Digest: FromBytes([]byte(p))})
			}
		}
		m := &Manifest{Entries: entries}
		got, err := m.Digest()
		if err != nil {
			t.Fatal(err)
		}
		sorted := &Manifest{Entries: append([]Entry{}, entries...)}
		if sorted.Entries == nil {
			sorted.Entries = []Entry{}
		}
		slices.SortFunc(sorted.Entries, func(a, b Entry) int { return cmp.Compare(a.Path, b.Path) })
		want, _, err := Of(sorted)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			b, _ := canonicalManifest(sorted.Entries)
			c, _ := Canonical(sorted)
			t.Fatalf("manifest digests differ:\ndirect:  %s\ngeneric: %s", b, c)
		}
	}
}

// writeOld writes a file and backdates it out of the racy window.
func writeOld(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) // fixed: a rewrite keeps the same mtime
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func TestStatCacheRemembersAndNotices(t *testing.T) {
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	writeOld(t, filepath.Join(tree, "a"), "alpha")
	writeOld(t, filepath.Join(tree, "sub", "b"), "beta")
	cachePath := filepath.Join(dir, "stat-cache")
	// ctime cannot be backdated: wait out the racy window once so the files are cacheable.
	time.Sleep(racyWindow + 100*time.Millisecond)

	_, want, err := Dir(tree)
	if err != nil {
		t.Fatal(err)
	}
	c := OpenStatCache(cachePath)
	if _, d, err := DirCached(tree, c); err != nil || d != want {
		t.Fatalf("first cached hash %s, %v; want %s", d, err, want)
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}

	// A second load answers from the saved cache without reading: a remembered digest
	// that is not the content's shows in the manifest.
	c2 := OpenStatCache(cachePath)
	a := filepath.Join(tree, "a")
	fi, _ := os.Lstat(a)
	if d, ok := c2.Lookup(a, fi); !ok || d != FromBytes([]byte("alpha")) {
		t.Fatalf("saved cache lookup = %s, %v", d, ok)
	}
	planted := FromBytes([]byte("planted"))
	c2.Store(a, fi, planted)
	m, _, err := DirCached(tree, c2)
	if err != nil || m.Entries[0].Path != "a" || m.Entries[0].Digest != planted {
		t.Fatalf("DirCached read the file instead of asking the cache: %+v, %v", m, err)
	}

	// Same size, same mtime, new content: the change time moves, so it is rehashed.
	writeOld(t, filepath.Join(tree, "a"), "ALPHA")
	_, changed, _ := Dir(tree)
	c3 := OpenStatCache(cachePath)
	if _, d, err := DirCached(tree, c3); err != nil || d != changed || d == want {
		t.Fatalf("after rewriting a with the same size and mtime: %s, %v; want %s", d, err, changed)
	}
	// A fresh file (inside the racy window) is hashed and not remembered.
	fresh := filepath.Join(dir, "fresh")
	os.WriteFile(fresh, []byte("new"), 0o644)
	c4 := OpenStatCache(cachePath)
	if d, _, err := FileCached(fresh, c4); err != nil || d != FromBytes([]byte("new")) {
		t.Fatalf("fresh file: %s, %v", d, err)
	}
	fi, _ = os.Stat(fresh)
	if _, ok := c4.Lookup(fresh, fi); ok {
		t.Fatal("a file changed within the racy window was remembered")
	}
}

func TestStatCacheIgnoresDamage(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "stat-cache")
	for _, content := range []string{"", "garbage\n", "foundry-stat-cache 2\nsha256:00 1 2 3 4 5 6 /x\n",
		statCacheHeader + "\nnot a line\nsha256:zz 1 2 3 4 5 6 /x\nsha256:" + strings.Repeat("0", 64) + " 1 2 3 4 5 6 relative\n"} {
		os.WriteFile(p, []byte(content), 0o644)
		if c := OpenStatCache(p); len(c.entries) != 0 {
			t.Fatalf("%q gave %d entries", content, len(c.entries))
		}
	}
}

func FuzzParseStatCache(f *testing.F) {
	f.Add([]byte(statCacheHeader + "\nsha256:" + strings.Repeat("a", 64) + " 1 2 3 4 5 6 /a b\n"))
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for p, e := range parseStatCache(b) {
			if !filepath.IsAbs(p) || e.digest.Validate() != nil {
				t.Fatalf("accepted entry %q %+v", p, e)
			}
		}
	})
}

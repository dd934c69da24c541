package seed

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// FuzzUnpack feeds arbitrary bytes to the layer unpacker (with whiteout semantics, as for
// image layers, and without, as for OCI archives). It must never panic and never create,
// change or remove anything outside the target directory.
//
//	go test -run '^$' -fuzz FuzzUnpack -parallel 1 -fuzztime 60s ./engine/seed/
func FuzzUnpack(f *testing.F) {
	up := "../"
	for _, ents := range [][]tarEnt{
		{{name: "a/", typ: tar.TypeDir}, {name: "a/b", body: "x"}, {name: "l", typ: tar.TypeSymlink, link: "a/b"}, {name: "h", typ: tar.TypeLink, link: "a/b"}},
		{{name: "../outside", body: "x"}},
		{{name: "evil", typ: tar.TypeSymlink, link: up + up}, {name: "evil/outside", body: "x"}},
		{{name: "evil", typ: tar.TypeSymlink, link: up + "sentinel"}, {name: "evil", body: "overwrite"}},
		{{name: "evil", typ: tar.TypeSymlink, link: up}, {name: "evil/.wh.sentinel"}},
		{{name: "evil", typ: tar.TypeSymlink, link: up}, {name: "evil/.wh..wh..opq"}},
		{{name: "evil", typ: tar.TypeSymlink, link: up}, {name: "h", typ: tar.TypeLink, link: "evil/sentinel"}},
		{{name: "d/", typ: tar.TypeDir, mode: 0o500}, {name: "d/f", body: "x"}, {name: "d/.wh.f"}},
		{{name: ".wh..wh..opq"}, {name: "./x", body: "y", mode: 0o4755}},
	} {
		f.Add(tarOf(f, ents...))
	}
	f.Add([]byte{})
	f.Add([]byte("not a tar at all"))
	f.Fuzz(func(t *testing.T, data []byte) { unpackConfined(t, data) })
}

// FuzzUnpackEntries fuzzes entry lists rather than raw bytes, so that every input is a valid
// tar and the fuzzer explores names, link targets and entry orders. Each line of the input is
// one entry: a type character (0 file, 1 hardlink, 2 symlink, 5 dir; anything else a file),
// then the name, then optionally " -> " and the link target.
//
//	go test -run '^$' -fuzz FuzzUnpackEntries -parallel 1 -fuzztime 60s ./engine/seed/
func FuzzUnpackEntries(f *testing.F) {
	for _, s := range []string{
		"5a/\n0a/b\n2l -> a/b\n1h -> a/b",
		"2evil -> ../..\n0evil/x",
		"2evil -> ..\n1h -> evil/sentinel",
		"2evil -> ../sentinel\n0evil",
		"2d -> .\n2d/e -> ..\n0d/e/sentinel",
		"2evil -> ..\n0evil/.wh.sentinel\n0evil/.wh..wh..opq",
		"5x\n2x/y -> /\n0x/y/etc/passwd",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for i, line := range strings.Split(spec, "\n") {
			if line == "" || i > 64 {
				continue
			}
			typ := byte(tar.TypeReg)
			switch line[0] {
			case '1', '2', '5':
				typ = line[0]
			}
			name, link, _ := strings.Cut(line[1:], " -> ")
			hdr := &tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: 0o755}
			body := "fuzz"
			if typ == tar.TypeReg {
				hdr.Size = int64(len(body))
			}
			if tw.WriteHeader(hdr) != nil {
				return
			}
			if typ == tar.TypeReg {
				if _, err := tw.Write([]byte(body)); err != nil {
					return
				}
			}
		}
		if tw.Close() != nil {
			return
		}
		unpackConfined(t, buf.Bytes())
	})
}

// unpackConfined unpacks data into fresh targets next to a sentinel file and fails if
// anything outside the targets appeared, changed or was linked.
func unpackConfined(t *testing.T, data []byte) {
	t.Helper()
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "sentinel"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, whiteouts := range []bool{true, false} {
		target := filepath.Join(base, "target"+string(rune('0'+i)))
		if err := os.Mkdir(target, 0o755); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(target)
		if err != nil {
			t.Fatal(err)
		}
		u := newUnpacker(root, 1<<20, whiteouts)
		if err := u.layer(context.Background(), bytes.NewReader(data)); err == nil {
			_ = u.finish()
		}
		root.Close()
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n != "sentinel" && !strings.HasPrefix(n, "target") {
			t.Fatalf("unpack created %s outside its target", n)
		}
	}
	if len(ents) != 3 {
		t.Fatalf("base has %d entries, want sentinel + 2 targets", len(ents))
	}
	fi, err := os.Lstat(filepath.Join(base, "sentinel"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 || fi.Size() != 4 {
		t.Fatalf("sentinel changed: %v %v", fi, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		t.Fatalf("sentinel was hard-linked from the target (nlink %d)", st.Nlink)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "sentinel")); string(b) != "keep" {
		t.Fatalf("sentinel content changed: %q", b)
	}
	// Make sure cleanup can remove what was unpacked (modes like 0500 on directories).
	_ = filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
}

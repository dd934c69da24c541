package registry

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
)

type tarEntry struct {
	name, link string
	typ        byte
	body       string
	mode       int64
}

func makeTar(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		must(t, tw.WriteHeader(hdr))
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	must(t, tw.Close())
	return buf.Bytes()
}

// pushRaw publishes a capability manifest around arbitrary layer bytes, bypassing Publish,
// as a hostile publisher would. layerDesc may lie about the layer.
func pushRaw(t *testing.T, s Store, layer []byte, layerDesc *Descriptor, tree digest.Digest) digest.Digest {
	t.Helper()
	contract := []byte(`{"name":"evil"}`)
	cfg := descriptorOf(MediaTypeContract, contract)
	must(t, putBytes(bg, s, cfg.Digest, contract))
	ld := descriptorOf(MediaTypeLayerTar, layer)
	must(t, putBytes(bg, s, ld.Digest, layer))
	if layerDesc != nil {
		ld = *layerDesc
	}
	if tree == "" {
		tree = digest.Digest(fakeDigest("some tree"))
	}
	m := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, ArtifactType: ArtifactTypeCapability, Config: cfg,
		Layers: []Descriptor{ld}, Annotations: map[string]string{AnnotationTree: string(tree), AnnotationTitle: "evil",
			AnnotationVersion: "1", AnnotationTarget: "linux/amd64"}}
	raw, _ := json.Marshal(m)
	md, err := s.PutManifest(bg, raw, MediaTypeManifest)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// TestPullRefusesHostileArtifacts: each artifact is refused, dest is never created, and
// nothing appears outside it.
func TestPullRefusesHostileArtifacts(t *testing.T) {
	reg := func(name, body string) tarEntry { return tarEntry{name: name, typ: tar.TypeReg, body: body} }
	dir := func(name string) tarEntry { return tarEntry{name: name, typ: tar.TypeDir, mode: 0o755} }
	cases := []struct {
		name    string
		entries []tarEntry
		allow   bool // AllowEscapingSymlinks
		want    string
	}{
		{"tar-slip", []tarEntry{reg("../outside/pwned", "x")}, false, "path with .."},
		{"tar-slip-nested", []tarEntry{dir("a"), reg("a/../../outside/pwned", "x")}, false, "path with .."},
		{"absolute-path", []tarEntry{reg("/tmp/pwned", "x")}, false, "absolute path"},
		{"symlink-absolute", []tarEntry{{name: "link", typ: tar.TypeSymlink, link: "/etc"}}, false, "absolute path"},
		{"symlink-escape", []tarEntry{{name: "link", typ: tar.TypeSymlink, link: "../../outside"}}, false, "leaves the tree"},
		{"symlink-then-write-through", []tarEntry{{name: "link", typ: tar.TypeSymlink, link: "OUTSIDE"}, reg("link/pwned", "x")}, true, "not a directory of the tree"},
		{"symlink-internal-then-write-through", []tarEntry{dir("d"), {name: "link", typ: tar.TypeSymlink, link: "d"}, reg("link/pwned", "x")}, false, "not a directory of the tree"},
		{"hardlink-outside", []tarEntry{{name: "hl", typ: tar.TypeLink, link: "../outside/target"}}, false, "hard link"},
		{"hardlink-inside", []tarEntry{reg("f", "x"), {name: "hl", typ: tar.TypeLink, link: "f"}}, false, "hard link"},
		{"device", []tarEntry{{name: "null", typ: tar.TypeChar}}, false, "refused"},
		{"duplicate", []tarEntry{reg("f", "x"), reg("f", "y")}, false, "appears twice"},
		{"missing-parent", []tarEntry{reg("nodir/f", "x")}, false, "not a directory of the tree"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			must(t, os.MkdirAll(outside, 0o755))
			must(t, os.WriteFile(filepath.Join(outside, "target"), []byte("secret"), 0o644))
			for i := range c.entries {
				if c.entries[i].link == "OUTSIDE" {
					c.entries[i].link = outside
				}
			}
			s, err := OpenLayout(filepath.Join(base, "layout"))
			must(t, err)
			md := pushRaw(t, s, makeTar(t, c.entries), nil, "")
			dest := filepath.Join(base, "dest", "out")
			_, err = Pull(bg, s, string(md), dest, PullOptions{NoVerify: true, AllowEscapingSymlinks: c.allow})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Pull = %v, want an error containing %q", err, c.want)
			}
			assertAbsent(t, dest)
			assertOutsideUntouched(t, outside)
		})
	}
}

func assertOutsideUntouched(t *testing.T, outside string) {
	t.Helper()
	ents, err := os.ReadDir(outside)
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != "target" {
		t.Fatalf("outside directory changed: %v", ents)
	}
	b, _ := os.ReadFile(filepath.Join(outside, "target"))
	if string(b) != "secret" {
		t.Fatalf("outside file changed: %q", b)
	}
}

func TestPullRefusesMismatchesAndOversize(t *testing.T) {
	good := makeTar(t, []tarEntry{{name: "f", typ: tar.TypeReg, body: "hello"}})
	goodTree := func() digest.Digest {
		m := &digest.Manifest{Entries: []digest.Entry{{Path: "f", Type: digest.TypeFile, Mode: digest.ModeFile, Size: 5, Digest: digest.FromBytes([]byte("hello"))}}}
		d, err := m.Digest()
		must(t, err)
		return d
	}()
	t.Run("control", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		md := pushRaw(t, s, good, nil, goodTree)
		if _, err := Pull(bg, s, string(md), filepath.Join(t.TempDir(), "out"), PullOptions{NoVerify: true}); err != nil {
			t.Fatalf("a well-formed artifact: %v", err)
		}
	})
	t.Run("tree-annotation-mismatch", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		md := pushRaw(t, s, good, nil, digest.Digest(fakeDigest("another tree")))
		dest := filepath.Join(t.TempDir(), "out")
		_, err := Pull(bg, s, string(md), dest, PullOptions{NoVerify: true})
		if !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("Pull = %v, want ErrDigestMismatch", err)
		}
		assertAbsent(t, dest)
	})
	t.Run("layer-bytes-swapped", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		md := pushRaw(t, s, good, nil, goodTree)
		// The registry serves other bytes under the layer's digest.
		evil := makeTar(t, []tarEntry{{name: "f", typ: tar.TypeReg, body: "HELLO"}})
		p := s.blobPath(digest.FromBytes(good))
		must(t, os.Chmod(p, 0o644))
		must(t, os.WriteFile(p, evil, 0o644))
		dest := filepath.Join(t.TempDir(), "out")
		_, err := Pull(bg, s, string(md), dest, PullOptions{NoVerify: true})
		if !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("Pull = %v, want ErrDigestMismatch", err)
		}
		assertAbsent(t, dest)
	})
	t.Run("layer-longer-than-descriptor", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		d := descriptorOf(MediaTypeLayerTar, good)
		d.Size -= 512 // claims fewer bytes than the blob has
		md := pushRaw(t, s, good, &d, goodTree)
		dest := filepath.Join(t.TempDir(), "out")
		if _, err := Pull(bg, s, string(md), dest, PullOptions{NoVerify: true}); !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("Pull = %v, want ErrDigestMismatch", err)
		}
		assertAbsent(t, dest)
	})
	t.Run("manifest-bytes-swapped", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		md := pushRaw(t, s, good, nil, goodTree)
		p := s.blobPath(md)
		raw, _ := os.ReadFile(p)
		must(t, os.WriteFile(p, bytes.Replace(raw, []byte(`"evil"`), []byte(`"EVIL"`), 1), 0o644))
		dest := filepath.Join(t.TempDir(), "out")
		if _, err := Pull(bg, s, string(md), dest, PullOptions{NoVerify: true}); !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("Pull = %v, want ErrDigestMismatch", err)
		}
		assertAbsent(t, dest)
	})
	t.Run("oversized-layer", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		md := pushRaw(t, s, good, nil, goodTree)
		dest := filepath.Join(t.TempDir(), "out")
		_, err := Pull(bg, s, string(md), dest, PullOptions{NoVerify: true, Limits: Limits{MaxLayerBytes: 1024}})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Pull = %v, want ErrTooLarge", err)
		}
		assertAbsent(t, dest)
	})
	t.Run("oversized-tree", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		big := makeTar(t, []tarEntry{{name: "f", typ: tar.TypeReg, body: strings.Repeat("x", 4096)}})
		md := pushRaw(t, s, big, nil, goodTree)
		dest := filepath.Join(t.TempDir(), "out")
		_, err := Pull(bg, s, string(md), dest, PullOptions{NoVerify: true, Limits: Limits{MaxTreeBytes: 1000}})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Pull = %v, want ErrTooLarge", err)
		}
		assertAbsent(t, dest)
	})
	t.Run("too-many-entries", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		var es []tarEntry
		for _, n := range []string{"a", "b", "c", "d"} {
			es = append(es, tarEntry{name: n, typ: tar.TypeReg, body: n})
		}
		md := pushRaw(t, s, makeTar(t, es), nil, goodTree)
		_, err := Pull(bg, s, string(md), filepath.Join(t.TempDir(), "out"), PullOptions{NoVerify: true, Limits: Limits{MaxEntries: 3}})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Pull = %v, want ErrTooLarge", err)
		}
	})
	t.Run("not-a-capability", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		cfg := descriptorOf(MediaTypeEmpty, emptyJSON)
		must(t, putBytes(bg, s, cfg.Digest, emptyJSON))
		raw, _ := json.Marshal(Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, Config: cfg, Layers: []Descriptor{}})
		md, _ := s.PutManifest(bg, raw, MediaTypeManifest)
		if _, err := Pull(bg, s, string(md), filepath.Join(t.TempDir(), "out"), PullOptions{NoVerify: true}); err == nil ||
			!strings.Contains(err.Error(), "not a Foundry capability") {
			t.Fatalf("Pull = %v", err)
		}
	})
	t.Run("non-canonical-contract", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		md := pushRaw(t, s, good, nil, goodTree)
		raw, _, _ := s.Manifest(bg, md)
		m, _ := ParseManifest(raw)
		contract := []byte(`{ "name" : "evil" }`)
		m.Config = descriptorOf(MediaTypeContract, contract)
		must(t, putBytes(bg, s, m.Config.Digest, contract))
		raw, _ = json.Marshal(m)
		md, _ = s.PutManifest(bg, raw, MediaTypeManifest)
		dest := filepath.Join(t.TempDir(), "out")
		if _, err := Pull(bg, s, string(md), dest, PullOptions{NoVerify: true}); err == nil || !strings.Contains(err.Error(), "canonical") {
			t.Fatalf("Pull = %v", err)
		}
		assertAbsent(t, dest)
	})
	t.Run("dest-exists", func(t *testing.T) {
		s, _ := OpenLayout(filepath.Join(t.TempDir(), "l"))
		md := pushRaw(t, s, good, nil, goodTree)
		dest := t.TempDir()
		if _, err := Pull(bg, s, string(md), dest, PullOptions{NoVerify: true}); err == nil {
			t.Fatal("Pull into an existing directory succeeded")
		}
	})
}

// TestDockerSchema2Refused: Foundry artifacts are OCI manifests; a Docker schema 2 manifest
// (or anything else) is not parsed as one.
func TestDockerSchema2Refused(t *testing.T) {
	raw := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"` + fakeDigest("c") + `","size":1},"layers":[]}`)
	if _, err := ParseManifest(raw); err == nil {
		t.Fatal("parsed a Docker schema 2 manifest as OCI")
	}
}

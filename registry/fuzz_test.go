package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/store"
)

// FuzzParseRegistryDocuments feeds untrusted registry responses (manifests, indexes,
// referrers lists) to the parsers: they must never panic, and what they accept must satisfy
// the invariants the rest of the package relies on.
func FuzzParseRegistryDocuments(f *testing.F) {
	d := fakeDigest("x")
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"` + MediaTypeManifest + `","artifactType":"` + ArtifactTypeCapability +
		`","config":{"mediaType":"` + MediaTypeContract + `","digest":"` + d + `","size":2},"layers":[{"mediaType":"` +
		MediaTypeLayerTar + `","digest":"` + d + `","size":10}],"annotations":{"` + AnnotationTree + `":"` + d + `"}}`))
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"` + MediaTypeIndex + `","manifests":[{"mediaType":"` + MediaTypeManifest +
		`","digest":"` + d + `","size":1,"artifactType":"` + ArtifactTypeDSSE + `"}]}`))
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"` + MediaTypeManifest + `","config":{"mediaType":"a","digest":"` + d +
		`","size":2,"data":"e30="},"layers":[],"subject":{"mediaType":"m","digest":"` + d + `","size":3}}`))
	f.Add([]byte(`{"schemaVersion":2} trailing`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if m, err := ParseManifest(raw); err == nil {
			if m.SchemaVersion != 2 || m.MediaType != MediaTypeManifest {
				t.Fatalf("accepted %+v", m)
			}
			for _, l := range append([]Descriptor{m.Config}, m.Layers...) {
				if l.Digest.Validate() != nil || l.Size < 0 || l.MediaType == "" {
					t.Fatalf("accepted descriptor %+v", l)
				}
			}
			if m.Subject != nil && m.Subject.Digest.Validate() != nil {
				t.Fatalf("accepted subject %+v", m.Subject)
			}
		}
		if ix, err := ParseIndex(raw); err == nil {
			for _, e := range ix.Manifests {
				if e.Digest.Validate() != nil || e.Size < 0 {
					t.Fatalf("accepted index entry %+v", e)
				}
			}
		}
		if m, err := ParseCapability(raw); err == nil {
			if m.ArtifactType != ArtifactTypeCapability || digest.Digest(m.Annotations[AnnotationTree]).Validate() != nil {
				t.Fatalf("accepted capability %+v", m)
			}
		}
	})
}

// memBlobs is a Store that only serves blobs, from memory: the fuzz loop stays fast.
type memBlobs map[digest.Digest][]byte

func (m memBlobs) Blob(_ context.Context, d digest.Digest) (io.ReadCloser, error) {
	b, ok := m[d]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}
func (memBlobs) Resolve(context.Context, string) (digest.Digest, error) { return "", ErrNotFound }
func (memBlobs) Manifest(context.Context, digest.Digest) ([]byte, string, error) {
	return nil, "", ErrNotFound
}
func (memBlobs) PutManifest(context.Context, []byte, string) (digest.Digest, error) {
	return "", errors.New("read-only")
}
func (memBlobs) Tag(context.Context, string, digest.Digest) error { return errors.New("read-only") }
func (memBlobs) PutBlob(context.Context, digest.Digest, int64, func() (io.ReadCloser, error)) error {
	return errors.New("read-only")
}
func (memBlobs) Referrers(context.Context, digest.Digest) ([]v1.Descriptor, error) { return nil, nil }
func (memBlobs) PushReferrer(context.Context, []byte, string) (digest.Digest, error) {
	return "", errors.New("read-only")
}
func (memBlobs) String() string { return "memory" }

// FuzzExtractLayer feeds arbitrary layer bytes to Pull's tar parser and, when it accepts
// them, materializes the tree: nothing may ever land outside the destination.
func FuzzExtractLayer(f *testing.F) {
	for _, es := range [][]tarEntry{
		{{name: "d/", typ: tar.TypeDir}, {name: "d/f", typ: tar.TypeReg, body: "x"}},
		{{name: "l", typ: tar.TypeSymlink, link: "../../x"}, {name: "l/f", typ: tar.TypeReg, body: "x"}},
		{{name: "../x", typ: tar.TypeReg, body: "x"}},
		{{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range es {
			tw.WriteHeader(&tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))})
			tw.Write([]byte(e.body))
		}
		tw.Close()
		f.Add(buf.Bytes(), false)
	}
	f.Fuzz(func(t *testing.T, layer []byte, allowEscape bool) {
		base := t.TempDir()
		dest := filepath.Join(base, "dest")
		if err := os.Mkdir(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dest)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		desc := descriptorOf(MediaTypeLayerTar, layer)
		x := newExtractor(root, Limits{MaxTreeBytes: 1 << 20, MaxEntries: 1000}.withDefaults(), allowEscape)
		lerr := x.layer(bg, memBlobs{desc.Digest: layer}, desc)
		// Accepted or not, nothing was written outside dest.
		ents, err := os.ReadDir(base)
		if err != nil || len(ents) != 1 || ents[0].Name() != "dest" {
			t.Fatalf("wrote beside the destination: %v %v", ents, err)
		}
		if lerr != nil {
			return
		}
		canon, md, err := x.tree()
		if err != nil {
			return
		}
		m, err := store.ParseManifest(canon)
		if err != nil {
			t.Fatalf("tree() accepted what store.ParseManifest refuses: %v", err)
		}
		if d, err := m.Digest(); err != nil || d != md {
			t.Fatalf("tree digest %s, manifest says %s (%v)", md, d, err)
		}
		// What was written is exactly the tree that was recorded.
		if _, got, err := digest.Dir(dest); err != nil || got != md {
			t.Fatalf("extracted directory hashes to %s (%v), the recorded tree is %s", got, err, md)
		}
		for _, e := range m.Entries {
			if e.Type == digest.TypeSymlink && !allowEscape {
				if j := path.Join(path.Dir(e.Path), e.Target); path.IsAbs(e.Target) || j == ".." || strings.HasPrefix(j, "../") {
					t.Fatalf("accepted escaping symlink %q -> %q", e.Path, e.Target)
				}
			}
		}
	})
}

package seed

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// tarEnt is one entry of a hand-made tar stream.
type tarEnt struct {
	name string
	typ  byte
	body string
	link string
	mode int64
}

func tarOf(t testing.TB, ents ...tarEnt) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Typeflag: typ, Name: e.name, Linkname: e.link, Mode: mode, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ggcrImage builds an OCI image with go-containerregistry from tar streams (gzip layers).
func ggcrImage(t testing.TB, env []string, layers ...[]byte) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, data := range layers {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = env
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func digestOf(t testing.TB, img v1.Image) string {
	t.Helper()
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func writeLayout(t testing.TB, imgs ...v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if err := p.AppendImage(img); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newBuilder(t testing.TB) *Builder {
	return &Builder{Root: filepath.Join(t.TempDir(), "images")}
}

func readRootfsFile(t *testing.T, rootfs, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rootfs, rel))
	if err != nil {
		t.Fatalf("rootfs: %v", err)
	}
	return string(b)
}

func TestImportOCILayout(t *testing.T) {
	ctx := context.Background()
	one := ggcrImage(t, []string{"X=1"}, tarOf(t, tarEnt{name: "etc/", typ: tar.TypeDir}, tarEnt{name: "etc/one", body: "1"}))
	two := ggcrImage(t, nil, tarOf(t, tarEnt{name: "two", body: "2"}))
	single := writeLayout(t, one)
	b := newBuilder(t)
	img, err := b.Build(ctx, &Spec{Name: "one", Import: &Import{OCILayout: single}})
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != digestOf(t, one) {
		t.Fatalf("imported digest %s, source %s", img.Digest, digestOf(t, one))
	}
	if got := readRootfsFile(t, img.Rootfs, "etc/one"); got != "1" {
		t.Fatalf("etc/one = %q", got)
	}
	if len(img.Env) != 1 || img.Env[0] != "X=1" {
		t.Fatalf("env %v", img.Env)
	}
	for _, mp := range MountPoints {
		if fi, err := os.Stat(filepath.Join(img.Rootfs, mp)); err != nil || !fi.IsDir() {
			t.Errorf("mount point %s missing in imported rootfs: %v", mp, err)
		}
	}

	both := writeLayout(t, one, two)
	if _, err := b.Build(ctx, &Spec{Import: &Import{OCILayout: both}}); err == nil || !strings.Contains(err.Error(), "Digest") {
		t.Fatalf("two manifests without digest: %v", err)
	}
	img2, err := b.Build(ctx, &Spec{Import: &Import{OCILayout: both, Digest: digestOf(t, two)}})
	if err != nil {
		t.Fatal(err)
	}
	if img2.Digest != digestOf(t, two) || readRootfsFile(t, img2.Rootfs, "two") != "2" {
		t.Fatalf("selected %s", img2.Digest)
	}
	if _, err := b.Build(ctx, &Spec{Import: &Import{OCILayout: both, Digest: "sha256:" + strings.Repeat("0", 64)}}); err == nil {
		t.Fatal("unknown digest accepted")
	}

	// A multi-platform index is resolved with Spec.Platform.
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: one, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: two, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	dir := filepath.Join(t.TempDir(), "multi")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	ih, _ := idx.Digest()
	img3, err := newBuilder(t).Build(ctx, &Spec{Platform: "linux/arm64", Import: &Import{OCILayout: dir, Digest: ih.String()}})
	if err != nil {
		t.Fatal(err)
	}
	if img3.Digest != digestOf(t, two) {
		t.Fatalf("platform selection gave %s", img3.Digest)
	}
	if _, err := newBuilder(t).Build(ctx, &Spec{Import: &Import{OCILayout: dir}}); err == nil {
		t.Fatal("index without platform accepted")
	}
}

func TestImportTarball(t *testing.T) {
	ctx := context.Background()
	src := ggcrImage(t, []string{"Y=2"}, tarOf(t, tarEnt{name: "a", body: "A"}), tarOf(t, tarEnt{name: "b", body: "B", mode: 0o755}))
	path := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(path, name.MustParseReference("example.com/x:latest"), src); err != nil {
		t.Fatal(err)
	}
	img, err := newBuilder(t).Build(ctx, &Spec{Import: &Import{Tarball: path}})
	if err != nil {
		t.Fatal(err)
	}
	if readRootfsFile(t, img.Rootfs, "a") != "A" || readRootfsFile(t, img.Rootfs, "b") != "B" {
		t.Fatal("tarball contents missing")
	}
	if fi, _ := os.Stat(filepath.Join(img.Rootfs, "b")); fi.Mode().Perm() != 0o755 {
		t.Errorf("b mode %v", fi.Mode())
	}
	again, err := newBuilder(t).Build(ctx, &Spec{Import: &Import{Tarball: path, Digest: img.Digest}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != img.Digest {
		t.Fatalf("docker tarball import not reproducible: %s vs %s", again.Digest, img.Digest)
	}
	if _, err := newBuilder(t).Build(ctx, &Spec{Import: &Import{Tarball: path, Digest: digestOf(t, src)}}); err == nil {
		t.Fatal("wrong expected digest accepted")
	}

	// An OCI layout archived with tar keeps its manifest digest.
	dir := writeLayout(t, src)
	archive := filepath.Join(t.TempDir(), "oci.tar")
	if out, err := exec.Command("tar", "-C", dir, "-cf", archive, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	oimg, err := newBuilder(t).Build(ctx, &Spec{Import: &Import{Tarball: archive}})
	if err != nil {
		t.Fatal(err)
	}
	if oimg.Digest != digestOf(t, src) {
		t.Fatalf("OCI archive digest %s, source %s", oimg.Digest, digestOf(t, src))
	}
}

func TestImportRegistry(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	src := ggcrImage(t, nil, tarOf(t, tarEnt{name: "r", body: "remote"}))
	tag, err := name.NewTag(host + "/seeds/base:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, src); err != nil {
		t.Fatal(err)
	}
	ref := host + "/seeds/base@" + digestOf(t, src)
	b := newBuilder(t)
	img, err := b.Build(ctx, &Spec{Import: &Import{Ref: ref}})
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != digestOf(t, src) || readRootfsFile(t, img.Rootfs, "r") != "remote" {
		t.Fatalf("registry import: %s", img.Digest)
	}
	// A multi-platform index is resolved with Spec.Platform, which is then required.
	arm := ggcrImage(t, nil, tarOf(t, tarEnt{name: "arch", body: "arm64"}))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: src, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	itag, err := name.NewTag(host + "/seeds/multi:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(itag, idx); err != nil {
		t.Fatal(err)
	}
	ih, _ := idx.Digest()
	iref := host + "/seeds/multi@" + ih.String()
	if _, err := b.Build(ctx, &Spec{Import: &Import{Ref: iref}}); err == nil || !strings.Contains(err.Error(), "Platform") {
		t.Errorf("index without platform: %v", err)
	}
	aimg, err := b.Build(ctx, &Spec{Platform: "linux/arm64", Import: &Import{Ref: iref}})
	if err != nil {
		t.Fatal(err)
	}
	if aimg.Digest != digestOf(t, arm) || readRootfsFile(t, aimg.Rootfs, "arch") != "arm64" {
		t.Errorf("index resolved to %s", aimg.Digest)
	}
	// Cached: works with the registry gone.
	srv.Close()
	if _, err := b.Build(ctx, &Spec{Import: &Import{Ref: ref}}); err != nil {
		t.Fatalf("cached import needed the registry: %v", err)
	}
	for _, bad := range []string{host + "/seeds/base:v1", host + "/seeds/base", host + "/seeds/base:v1@" + digestOf(t, src)} {
		_, err := b.Build(ctx, &Spec{Import: &Import{Ref: bad}})
		if err == nil || !strings.Contains(err.Error(), "tag") {
			t.Errorf("ref %s: %v, want a refusal that mentions tags", bad, err)
		}
	}
	if _, err := b.Build(ctx, &Spec{Import: &Import{Ref: ref, Digest: "sha256:" + strings.Repeat("1", 64)}}); err == nil {
		t.Error("disagreeing digest accepted")
	}
}

func TestImportWhiteouts(t *testing.T) {
	lower := tarOf(t,
		tarEnt{name: "a/", typ: tar.TypeDir}, tarEnt{name: "a/keep", body: "k"}, tarEnt{name: "a/gone", body: "g"},
		tarEnt{name: "d/", typ: tar.TypeDir}, tarEnt{name: "d/old", body: "o"}, tarEnt{name: "d/sub/", typ: tar.TypeDir},
		tarEnt{name: "d/sub/deep", body: "x"})
	upper := tarOf(t,
		tarEnt{name: "a/.wh.gone"},
		tarEnt{name: "d/", typ: tar.TypeDir},
		tarEnt{name: "d/new", body: "n"}, // before the opaque marker: must survive it
		tarEnt{name: "d/.wh..wh..opq"})
	src := ggcrImage(t, nil, lower, upper)
	img, err := newBuilder(t).Build(context.Background(), &Spec{Import: &Import{OCILayout: writeLayout(t, src)}})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(rel string) bool { _, err := os.Lstat(filepath.Join(img.Rootfs, rel)); return err == nil }
	for rel, want := range map[string]bool{"a/keep": true, "a/gone": false, "a/.wh.gone": false, "d/new": true, "d/old": false, "d/sub": false, "d/.wh..wh..opq": false} {
		if exists(rel) != want {
			t.Errorf("%s exists=%v, want %v", rel, !want, want)
		}
	}
}

// snapshot records every path and file content under dir.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		v := fi.Mode().String()
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			v += ":" + string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHostileImportsRefused(t *testing.T) {
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "secret"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", 12)
	cases := map[string][]tarEnt{
		"dotdot":               {{name: "../../../../victim/pwned", body: "x"}},
		"dotdot inside":        {{name: "a/../../victim/pwned", body: "x"}},
		"absolute":             {{name: victim + "/pwned", body: "x"}},
		"symlink abs escape":   {{name: "evil", typ: tar.TypeSymlink, link: victim}, {name: "evil/pwned", body: "x"}},
		"symlink rel escape":   {{name: "evil", typ: tar.TypeSymlink, link: up + victim}, {name: "evil/pwned", body: "x"}},
		"symlink dir escape":   {{name: "evil", typ: tar.TypeSymlink, link: victim}, {name: "evil/sub/", typ: tar.TypeDir}},
		"symlink whiteout":     {{name: "evil", typ: tar.TypeSymlink, link: victim}, {name: "evil/.wh.secret"}},
		"hardlink dotdot":      {{name: "hl", typ: tar.TypeLink, link: up + victim + "/secret"}},
		"hardlink absolute":    {{name: "hl", typ: tar.TypeLink, link: victim + "/secret"}},
		"hardlink via symlink": {{name: "s", typ: tar.TypeSymlink, link: victim}, {name: "hl", typ: tar.TypeLink, link: "s/secret"}},
	}
	for name, ents := range cases {
		t.Run(name, func(t *testing.T) {
			before := snapshot(t, victim)
			src := ggcrImage(t, nil, tarOf(t, ents...))
			b := newBuilder(t)
			_, err := b.Build(context.Background(), &Spec{Import: &Import{OCILayout: writeLayout(t, src)}})
			if err == nil {
				t.Fatal("hostile image accepted")
			}
			t.Log(err)
			after := snapshot(t, victim)
			if len(before) != len(after) {
				t.Fatalf("victim changed: %v -> %v", before, after)
			}
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("victim %s changed: %q -> %q", k, v, after[k])
				}
			}
			if ents, _ := os.ReadDir(filepath.Join(b.Root, "rootfs")); len(ents) != 0 {
				t.Fatalf("rootfs left after refusal: %v", ents)
			}
		})
	}

	// Replacing a symlink by a file must not write through the symlink.
	src := ggcrImage(t, nil, tarOf(t,
		tarEnt{name: "x", typ: tar.TypeSymlink, link: victim + "/secret"},
		tarEnt{name: "x", body: "overwrite"}))
	before := snapshot(t, victim)
	img, err := newBuilder(t).Build(context.Background(), &Spec{Import: &Import{OCILayout: writeLayout(t, src)}})
	if err != nil {
		t.Fatal(err)
	}
	if readRootfsFile(t, img.Rootfs, "x") != "overwrite" {
		t.Fatal("file did not replace symlink")
	}
	if after := snapshot(t, victim); after[filepath.Join(victim, "secret")] != before[filepath.Join(victim, "secret")] {
		t.Fatal("wrote through a symlink")
	}
}

func TestUnpackSizeLimit(t *testing.T) {
	src := ggcrImage(t, nil, tarOf(t, tarEnt{name: "big", body: strings.Repeat("z", 64<<10)}))
	b := newBuilder(t)
	b.MaxUnpackBytes = 32 << 10
	_, err := b.Build(context.Background(), &Spec{Import: &Import{OCILayout: writeLayout(t, src)}})
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("oversized image: %v", err)
	}
}

func TestBusyboxSeed(t *testing.T) {
	const bb = "/bin/busybox"
	if _, err := os.Stat(bb); err != nil {
		t.Skipf("%s missing (apt-get install busybox-static): %v", bb, err)
	}
	img, err := newBuilder(t).Build(context.Background(), &Spec{
		Name:     "busybox",
		Platform: "linux/amd64",
		Layers:   []Layer{{Files: map[string]string{"/bin/busybox": bb}}},
		Env:      map[string]string{"PATH": "/bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(img.Rootfs, "bin/busybox"))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Stat(bb)
	if fi.Mode().Perm() != 0o755 || fi.Size() != host.Size() {
		t.Fatalf("bin/busybox mode %v size %d", fi.Mode(), fi.Size())
	}
	if os.Geteuid() != 0 {
		return
	}
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		return
	}
	out, err := exec.Command(chroot, img.Rootfs, "/bin/busybox", "echo", "seed-ok").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "seed-ok" {
		t.Fatalf("busybox in the rootfs: %v %s", err, out)
	}
}

// A built seed may stack on an imported Docker-typed image: its layers keep their bytes and
// digests, and get the equivalent OCI media types, since the new manifest is an OCI one.
func TestStackOnDockerImage(t *testing.T) {
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarOf(t, tarEnt{name: "docker", body: "d"}))), nil
	}, tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		t.Fatal(err)
	}
	src, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.DockerManifestSchema2), l)
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t)
	ctx := context.Background()
	base, err := b.Build(ctx, &Spec{Import: &Import{OCILayout: writeLayout(t, src)}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	derived, err := b.Build(ctx, &Spec{Platform: "linux/amd64",
		Layers: []Layer{{From: &base}, {Files: map[string]string{"/new": f}}}})
	if err != nil {
		t.Fatal(err)
	}
	m := readManifestAt(t, derived)
	ld, _ := l.Digest()
	if len(m.Layers) != 3 || m.Layers[0].Digest != ld.String() || m.Layers[0].MediaType != string(types.OCILayer) {
		t.Fatalf("derived layers %+v", m.Layers)
	}
	if readRootfsFile(t, derived.Rootfs, "docker") != "d" || readRootfsFile(t, derived.Rootfs, "new") != "new" {
		t.Fatal("derived rootfs incomplete")
	}
}

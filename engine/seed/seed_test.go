package seed

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/foundry-build/foundry/executors"
)

// tree describes host files for a test: path → content; a trailing "*" on the key marks the
// file executable, a "->" in the content makes a symlink.
type tree map[string]string

// makeTree creates t under dir in the given key order, with the given mtime and modes
// perturbed by variant, so that two calls differ in everything a digest must ignore.
func makeTree(t *testing.T, dir string, tr tree, variant int) {
	t.Helper()
	keys := make([]string, 0, len(tr))
	for k := range tr {
		keys = append(keys, k)
	}
	// Different creation order per variant.
	if variant%2 == 0 {
		sortStrings(keys, false)
	} else {
		sortStrings(keys, true)
	}
	mtime := time.Date(2001+variant*7, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, k := range keys {
		content := tr[k]
		exec := strings.HasSuffix(k, "*")
		p := filepath.Join(dir, strings.TrimSuffix(k, "*"))
		dirMode := os.FileMode(0o755)
		if variant%2 == 1 {
			dirMode = 0o700
		}
		if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if exec {
			mode = 0o755
		}
		if variant%2 == 1 { // different, but equivalent after normalization
			mode = map[bool]os.FileMode{true: 0o700, false: 0o600}[exec]
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, 1000+variant, 2000+variant); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chtimes(p, mtime, mtime)
		}
		return nil
	})
}

func sortStrings(s []string, reverse bool) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && ((s[j] < s[j-1]) != reverse); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

var baseTree = tree{
	"bin/tool*":         "#!/bin/sh\necho tool\n",
	"etc/config":        "key=value\n",
	"etc/empty":         "",
	"lib/deep/nested/f": "nested",
	"lib/link":          "->deep/nested/f",
	"lib/abs":           "->/etc/config",
	"share/doc/README":  "read me",
	"share/doc/z-last":  "z",
	"share/doc.txt":     "sorts between share/doc and share/doc/",
	"a-long-name-" + strings.Repeat("x", 120) + "/f": "long path",
}

// specFor builds the standard test spec over a host tree in dir and a host file.
func specFor(dir, file string) *Spec {
	return &Spec{
		Name: "test",
		Layers: []Layer{
			{Files: map[string]string{"/usr/bin/solo": file}},
			{Dir: dir, At: "/opt/tree"},
		},
		Env:      map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/tmp", "A": "1"},
		User:     "65534:65534",
		Workdir:  "/work",
		Platform: "linux/amd64",
	}
}

func buildIn(t *testing.T, variant int, tr tree, mutate func(s *Spec)) executors.Image {
	t.Helper()
	host := t.TempDir()
	dir := filepath.Join(host, "tree")
	makeTree(t, dir, tr, variant)
	file := filepath.Join(host, "solo")
	if err := os.WriteFile(file, []byte("solo binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := specFor(dir, file)
	if mutate != nil {
		mutate(s)
	}
	b := &Builder{Root: filepath.Join(t.TempDir(), "images")}
	img, err := b.Build(context.Background(), s)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return img
}

func TestDeterministicAcrossHosts(t *testing.T) {
	a := buildIn(t, 0, baseTree, nil)
	b := buildIn(t, 1, baseTree, nil)
	if a.Digest != b.Digest {
		t.Fatalf("same inputs, different digests: %s vs %s", a.Digest, b.Digest)
	}
	if a.LayoutPath == b.LayoutPath {
		t.Fatal("test bug: both builds used one layout")
	}
	wantEnv := []string{"A=1", "HOME=/tmp", "PATH=/usr/bin:/bin"}
	if strings.Join(a.Env, ",") != strings.Join(wantEnv, ",") || a.User != "65534:65534" || a.Workdir != "/work" {
		t.Fatalf("config = %v %q %q", a.Env, a.User, a.Workdir)
	}
}

// TestGoldenDigest pins the digest of a fixed seed, so that a change in the tar or JSON
// encoding (a Go or library upgrade, an edit to wire.go) is noticed: it changes every seed's
// digest and so every action digest. Update the constant only deliberately.
func TestGoldenDigest(t *testing.T) {
	const golden = "sha256:196cf68453c22f01f2c9279da2edd8bf7582444e450ee6b2c6397e6a9584657f"
	img := buildIn(t, 0, baseTree, nil)
	if img.Digest != golden {
		t.Fatalf("digest of the fixed seed is %s, golden is %s", img.Digest, golden)
	}
}

func TestSensitivity(t *testing.T) {
	base := buildIn(t, 0, baseTree, nil).Digest
	withTree := func(edit func(tr tree)) tree {
		tr := tree{}
		for k, v := range baseTree {
			tr[k] = v
		}
		edit(tr)
		return tr
	}
	cases := []struct {
		name   string
		tr     tree
		mutate func(s *Spec)
	}{
		{"one byte", withTree(func(tr tree) { tr["etc/config"] = "key=valuf\n" }), nil},
		{"exec bit", withTree(func(tr tree) { delete(tr, "etc/config"); tr["etc/config*"] = "key=value\n" }), nil},
		{"path", withTree(func(tr tree) { delete(tr, "etc/empty"); tr["etc/empty2"] = "" }), nil},
		{"symlink target", withTree(func(tr tree) { tr["lib/link"] = "->deep/nested" }), nil},
		{"extra empty file", withTree(func(tr tree) { tr["etc/new"] = "" }), nil},
		{"env value", baseTree, func(s *Spec) { s.Env["A"] = "2" }},
		{"env key", baseTree, func(s *Spec) { s.Env["B"] = "1" }},
		{"user", baseTree, func(s *Spec) { s.User = "0:0" }},
		{"workdir", baseTree, func(s *Spec) { s.Workdir = "/" }},
		{"platform", baseTree, func(s *Spec) { s.Platform = "linux/arm64" }},
		{"at", baseTree, func(s *Spec) { s.Layers[1].At = "/opt/tree2" }},
		{"layer order", baseTree, func(s *Spec) { s.Layers[0], s.Layers[1] = s.Layers[1], s.Layers[0] }},
	}
	seen := map[string]string{base: "base"}
	for _, c := range cases {
		d := buildIn(t, 0, c.tr, c.mutate).Digest
		if prev, dup := seen[d]; dup {
			t.Errorf("%s: digest %s equals that of %s", c.name, d, prev)
		}
		seen[d] = c.name
	}
	// Name and Key label the image; they must not change it.
	d := buildIn(t, 0, baseTree, func(s *Spec) { s.Name = "other"; s.Key = "k" }).Digest
	if d != base {
		t.Errorf("name/key changed the digest: %s vs %s", d, base)
	}
}

func readManifestAt(t *testing.T, img executors.Image) *manifest {
	t.Helper()
	h, err := v1.NewHash(img.Digest)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(img.LayoutPath, "blobs", "sha256", h.Hex))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLayoutReadableByGGCR(t *testing.T) {
	img := buildIn(t, 0, baseTree, nil)
	p, err := layout.FromPath(img.LayoutPath)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := v1.NewHash(img.Digest)
	gi, err := p.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := gi.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.IsZero() {
		t.Fatalf("config: os=%s arch=%s created=%v", cf.OS, cf.Architecture, cf.Created)
	}
	layers, err := gi.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		d, _ := l.Digest()
		di, _ := l.DiffID()
		mt, _ := l.MediaType()
		if d != di || mt != "application/vnd.oci.image.layer.v1.tar" {
			t.Errorf("layer %s: diffid %s media type %s", d, di, mt)
		}
	}
	raw, _ := gi.RawConfigFile()
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	if _, ok := generic["created"]; ok {
		t.Errorf("config has a created time: %s", raw)
	}
}

func TestRootfsContents(t *testing.T) {
	img := buildIn(t, 0, baseTree, nil)
	r := img.Rootfs
	check := func(rel string, wantMode os.FileMode, content string) {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(r, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return
		}
		if fi.Mode() != wantMode {
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode(), wantMode)
		}
		if content != "" {
			b, _ := os.ReadFile(filepath.Join(r, rel))
			if string(b) != content {
				t.Errorf("%s: content %q", rel, b)
			}
		}
	}
	check("usr/bin/solo", 0o755, "solo binary")
	check("opt/tree/bin/tool", 0o755, "#!/bin/sh\necho tool\n")
	check("opt/tree/etc/config", 0o644, "key=value\n")
	check("opt/tree", os.ModeDir|0o755, "")
	check("opt/tree/lib/link", os.ModeSymlink|0o777, "")
	for _, mp := range MountPoints {
		want := os.ModeDir | 0o755
		if mp == "/tmp" {
			want = os.ModeDir | os.ModeSticky | 0o777 // writable by the sandbox's non-root user
		}
		check(strings.TrimPrefix(mp, "/"), want, "")
	}
	if l, _ := os.Readlink(filepath.Join(r, "opt/tree/lib/abs")); l != "/etc/config" {
		t.Errorf("abs symlink target %q", l)
	}
	m := readManifestAt(t, img)
	if n := len(m.Layers); n != 3 {
		t.Errorf("%d layers, want files + dir + mount points", n)
	}
}

func TestStacking(t *testing.T) {
	root := filepath.Join(t.TempDir(), "images")
	b := &Builder{Root: root}
	host := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(host, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	base, err := b.Build(ctx, &Spec{Name: "base", Platform: "linux/amd64",
		Layers: []Layer{{Files: map[string]string{"/bin/a": write("a", "A")}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The base lives in another builder's layout, so stacking must copy blobs across.
	other := &Builder{Root: filepath.Join(t.TempDir(), "other")}
	derived, err := other.Build(ctx, &Spec{Name: "derived", Platform: "linux/amd64",
		Layers: []Layer{{From: &base}, {Files: map[string]string{"/bin/b": write("b", "B")}}}})
	if err != nil {
		t.Fatal(err)
	}
	bm, dm := readManifestAt(t, base), readManifestAt(t, derived)
	if len(bm.Layers) != 2 || len(dm.Layers) != 3 {
		t.Fatalf("base %d layers, derived %d; want 2 and 3", len(bm.Layers), len(dm.Layers))
	}
	if dm.Layers[0].Digest != bm.Layers[0].Digest {
		t.Errorf("derived does not start with the base layer: %v vs %v", dm.Layers[0], bm.Layers[0])
	}
	if dm.Layers[2].Digest != bm.Layers[1].Digest {
		t.Errorf("derived does not end with the mount-point layer")
	}
	for _, f := range []string{"bin/a", "bin/b"} {
		if _, err := os.Stat(filepath.Join(derived.Rootfs, f)); err != nil {
			t.Errorf("derived rootfs: %v", err)
		}
	}
	// A derived seed from an equal base built elsewhere has the same digest.
	again, err := b.Build(ctx, &Spec{Name: "derived", Platform: "linux/amd64",
		Layers: []Layer{{From: &base}, {Files: map[string]string{"/bin/b": write("b", "B")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != derived.Digest {
		t.Errorf("stacked digest differs between layouts: %s vs %s", again.Digest, derived.Digest)
	}
}

func TestIdempotentConcurrentAndKey(t *testing.T) {
	host := t.TempDir()
	f := filepath.Join(host, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &Builder{Root: filepath.Join(t.TempDir(), "images")}
	spec := func() *Spec {
		return &Spec{Name: "c", Platform: "linux/amd64", Key: "sha256:caller-key",
			Layers: []Layer{{Files: map[string]string{"/f": f}}}}
	}
	var wg sync.WaitGroup
	digests := make([]string, 6)
	errs := make([]error, 6)
	for i := range digests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			img, err := b.Build(context.Background(), spec())
			digests[i], errs[i] = img.Digest, err
		}()
	}
	wg.Wait()
	for i := range digests {
		if errs[i] != nil {
			t.Fatalf("build %d: %v", i, errs[i])
		}
		if digests[i] != digests[0] {
			t.Fatalf("concurrent builds disagree: %v", digests)
		}
	}
	st, err := openStore(b.Root)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := st.readIndex()
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[AnnotationSeedName] != "c" {
		t.Fatalf("index.json = %+v, want one entry named c", idx.Manifests)
	}
	if left, _ := os.ReadDir(st.tmp); len(left) != 0 {
		t.Errorf("tmp not empty after successful builds: %v", left)
	}
	// With the key recorded, Build does not read host files.
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	img, err := b.Build(context.Background(), spec())
	if err != nil {
		t.Fatalf("build by key: %v", err)
	}
	if img.Digest != digests[0] {
		t.Fatalf("build by key returned %s", img.Digest)
	}
	s := spec()
	s.Key = ""
	if _, err := b.Build(context.Background(), s); err == nil {
		t.Fatal("build without key read no host files?")
	}
}

func TestInterruptedBuildLeavesNothingComplete(t *testing.T) {
	host := t.TempDir()
	makeTree(t, host, baseTree, 0)
	b := &Builder{Root: filepath.Join(t.TempDir(), "images")}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Build(ctx, &Spec{Platform: "linux/amd64", Layers: []Layer{{Dir: host}}})
	if err == nil {
		t.Fatal("cancelled build succeeded")
	}
	st, _ := openStore(b.Root)
	idx, _ := st.readIndex()
	if len(idx.Manifests) != 0 {
		t.Errorf("index lists %v after an interrupted build", idx.Manifests)
	}
	if ents, _ := os.ReadDir(st.rootfs); len(ents) != 0 {
		t.Errorf("rootfs has %v after an interrupted build", ents)
	}
}

func TestRefusals(t *testing.T) {
	host := t.TempDir()
	f := filepath.Join(host, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wh := filepath.Join(t.TempDir(), "wh")
	makeTree(t, wh, tree{".wh.secret": "x"}, 0)
	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	sockDir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(sockDir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cases := map[string]*Spec{
		"no platform":       {Layers: []Layer{{Files: map[string]string{"/f": f}}}},
		"relative path":     {Platform: "linux/amd64", Layers: []Layer{{Files: map[string]string{"f": f}}}},
		"unclean path":      {Platform: "linux/amd64", Layers: []Layer{{Files: map[string]string{"/a/../f": f}}}},
		"whiteout path":     {Platform: "linux/amd64", Layers: []Layer{{Files: map[string]string{"/.wh.f": f}}}},
		"file under file":   {Platform: "linux/amd64", Layers: []Layer{{Files: map[string]string{"/f": f, "/f/g": f}}}},
		"two kinds":         {Platform: "linux/amd64", Layers: []Layer{{Files: map[string]string{"/f": f}, Dir: host}}},
		"whiteout host dir": {Platform: "linux/amd64", Layers: []Layer{{Dir: wh}}},
		"fifo in dir":       {Platform: "linux/amd64", Layers: []Layer{{Dir: fifoDir}}},
		"socket in dir":     {Platform: "linux/amd64", Layers: []Layer{{Dir: sockDir}}},
		"host dir missing":  {Platform: "linux/amd64", Layers: []Layer{{Dir: filepath.Join(host, "nope")}}},
		"bad env":           {Platform: "linux/amd64", Env: map[string]string{"A=B": "c"}, Layers: []Layer{{Files: map[string]string{"/f": f}}}},
		"both":              {Platform: "linux/amd64", Import: &Import{Ref: "x"}, Layers: []Layer{{Files: map[string]string{"/f": f}}}},
		"neither":           {Platform: "linux/amd64"},
		"import with env":   {Env: map[string]string{"A": "1"}, Import: &Import{Ref: "x"}},
	}
	b := &Builder{Root: filepath.Join(t.TempDir(), "images")}
	for name, s := range cases {
		if _, err := b.Build(context.Background(), s); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestStaleTempSwept(t *testing.T) {
	b := newBuilder(t)
	st, err := openStore(b.Root)
	if err != nil {
		t.Fatal(err)
	}
	old, fresh := filepath.Join(st.tmp, "rootfs-crashed"), filepath.Join(st.tmp, "blob-inflight")
	for _, p := range []string{old, fresh} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * staleTemp)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(b.Root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Error("stale temp entry kept")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("fresh temp entry removed")
	}
}

// TestLargeHostDirStreams packs /usr/local/go (about 270 MB) and checks that the heap stays
// far below the data size, i.e. that file contents stream instead of being buffered. It
// writes about twice the tree to disk, so it runs only with FOUNDRY_SEED_BIG=1.
func TestLargeHostDirStreams(t *testing.T) {
	const dir = "/usr/local/go"
	if os.Getenv("FOUNDRY_SEED_BIG") == "" {
		t.Skip("set FOUNDRY_SEED_BIG=1 to pack " + dir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skip(err)
	}
	var peak uint64
	done := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak {
					peak = ms.HeapInuse
				}
			}
		}
	}()
	start := time.Now()
	img, err := newBuilder(t).Build(context.Background(), &Spec{Platform: "linux/amd64",
		Layers: []Layer{{Dir: dir, At: dir}}})
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifestAt(t, img)
	t.Logf("packed+unpacked %s: layer %d bytes in %v, peak heap %d MiB", dir, m.Layers[0].Size, time.Since(start), peak>>20)
	if peak > 256<<20 || int64(peak) > m.Layers[0].Size/2 {
		t.Errorf("peak heap %d MiB for a %d MiB layer: contents are buffered", peak>>20, m.Layers[0].Size>>20)
	}
	if _, err := os.Stat(filepath.Join(img.Rootfs, dir, "bin/go")); err != nil {
		t.Error(err)
	}
}

func TestSymlinksInFilesLayer(t *testing.T) {
	host := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(host, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &Builder{Root: t.TempDir()}
	spec := func(target string) *Spec {
		return &Spec{Platform: "linux/amd64", Layers: []Layer{{Files: map[string]string{"/bin/tool": host}, Symlinks: map[string]string{"/bin/sh": target}}}}
	}
	img, err := b.Build(context.Background(), spec("tool"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(img.Rootfs, "bin", "sh")); err != nil || got != "tool" {
		t.Fatalf("bin/sh -> %q, %v; want a symlink to tool", got, err)
	}
	other, err := b.Build(context.Background(), spec("other"))
	if err != nil {
		t.Fatal(err)
	}
	if other.Digest == img.Digest {
		t.Error("a different symlink target gave the same image digest")
	}
	if _, err := b.Build(context.Background(), &Spec{Platform: "linux/amd64", Layers: []Layer{{Files: map[string]string{"/bin/sh": host}, Symlinks: map[string]string{"/bin/sh": "x"}}}}); err == nil {
		t.Error("a path that is both a file and a symlink was accepted")
	}
}

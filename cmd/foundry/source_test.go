package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/fetch/fetchtest"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/registry/registrytest"
)

// sourceSeed is the sandbox image of the source tests: busybox.
const sourceSeed = `
seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/cat" = "busybox" }
  }
  env = { PATH = "/bin" }
}
`

// archiveServer serves files on loopback, counting the requests; its HOST:PORT is what a
// network grant names.
type archiveServer struct {
	url, host string
	hits      atomic.Int64
	files     map[string][]byte
	srv       *httptest.Server
}

func serveArchives(t *testing.T, files map[string][]byte) *archiveServer {
	t.Helper()
	s := &archiveServer{files: files}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		b, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(s.srv.Close)
	u, _ := url.Parse(s.srv.URL)
	s.url, s.host = s.srv.URL, u.Host
	return s
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// networkGrants writes an operator's grants file, outside the project, allowing hosts.
func networkGrants(t *testing.T, hosts ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "grants.hcl")
	q := make([]string, len(hosts))
	for i, h := range hosts {
		q[i] = `"` + h + `"`
	}
	if err := os.WriteFile(f, []byte(`grant "network" { hosts = [`+strings.Join(q, ", ")+`] }`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func writeProject(t *testing.T, hcl string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func planNode(t *testing.T, p *plan.Plan, addr string) *plan.Node {
	t.Helper()
	for _, n := range p.Nodes {
		if n.Address == addr {
			return n
		}
	}
	t.Fatalf("the plan has no %s", addr)
	return nil
}

// sourceDep is a resolved dependency of a step's provenance, as the tests read it.
type sourceDep struct {
	Name        string            `json:"name"`
	URI         string            `json:"uri"`
	Digest      map[string]string `json:"digest"`
	Annotations map[string]any    `json:"annotations"`
}

// depsNamed finds, in the project's signed provenance, the resolved dependencies mounted at
// name.
func depsNamed(t *testing.T, dir, name string) []sourceDep {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, ".foundry", "attestations"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sourceDep
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, ".foundry", "attestations", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Payload string }
		if json.Unmarshal(b, &env) != nil {
			continue
		}
		payload, _ := base64.StdEncoding.DecodeString(env.Payload)
		var st struct {
			Predicate struct {
				BuildDefinition struct {
					ResolvedDependencies []sourceDep `json:"resolvedDependencies"`
				} `json:"buildDefinition"`
			} `json:"predicate"`
		}
		if json.Unmarshal(payload, &st) != nil {
			continue
		}
		for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
			if d.Name == name {
				out = append(out, d)
			}
		}
	}
	return out
}

// A source by sha256: planned needs-grant (and refused by apply, nothing fetched) until
// the operator grants its host; then fetched once, verified, unpacked with strip, mounted
// read-only and laid in a seed, and named in the provenance of the step that mounts it and
// of the step that runs on that seed;
// then cached, and applied again offline with the server gone and no grant.
func TestSourceArchiveFetchedOnceThenOffline(t *testing.T) {
	needSandbox(t)
	archive := fetchtest.Gzip(t, fetchtest.Tar(t,
		fetchtest.Entry{Name: "pkg-1.0/", Type: tar.TypeDir},
		fetchtest.Entry{Name: "pkg-1.0/hello.txt", Body: "hello from a source\n"},
		fetchtest.Entry{Name: "pkg-1.0/bin/greet", Body: "#!/bin/sh\necho greeted\n", Mode: 0o755},
	))
	srv := serveArchives(t, map[string][]byte{"/dl/pkg-1.0.tar.gz": archive})
	u := srv.url + "/dl/pkg-1.0.tar.gz"
	dir := writeProject(t, sourceSeed+`
source "pkg" {
  url    = "`+u+`"
  sha256 = "`+sha256Hex(archive)+`"
  strip  = 1
}

seed "tools" {
  layer { from = seed.bb }
  layer {
    dir = source.pkg
    at  = "/opt/pkg"
  }
  env = { PATH = "/opt/pkg/bin:/bin" }
}

step "use" {
  image   = seed.bb
  mounts  = { "/src" = source.pkg }
  run     = ["sh", "-c", "cat /src/hello.txt > /out/hello"]
  outputs = ["/out/hello"]
}

step "greet" {
  image   = seed.tools
  run     = ["sh", "-c", "greet > /out/greeting"]
  outputs = ["/out/greeting"]
}
`)
	noGrants := networkGrants(t) // a grants file that grants no host
	grants := networkGrants(t, srv.host)

	code, out, errs := foundry(t, dir, "plan", "-json", "-grants", noGrants)
	p := decodePlan(t, out)
	n := planNode(t, p, "source.pkg")
	if code != 0 || n.Status != plan.StatusNeedsGrant || n.Fetch == nil || n.Fetch.Hosts[0] != srv.host || len(n.Fetch.Granted) != 0 || p.Summary.NeedsGrant != 1 {
		t.Fatalf("plan without a grant: exit %d, %+v %+v\n%s", code, n, n.Fetch, errs)
	}
	r := apply(t, dir, nil, "-grants", noGrants)
	if r.code != 1 || !strings.Contains(r.stderr, "source.pkg is fetched from "+srv.host+", which no grant allows") ||
		!strings.Contains(r.stderr, `grant "network" {`) || !strings.Contains(r.stderr, `hosts = ["`+srv.host+`"]`) || srv.hits.Load() != 0 {
		t.Fatalf("apply without a grant: exit %d, %d requests\n%s", r.code, srv.hits.Load(), r.stderr)
	}

	_, out, _ = foundry(t, dir, "plan", "-grants", grants)
	if !strings.Contains(out, "< source.pkg") || !strings.Contains(out, "fetch") || !strings.Contains(out, "1 to fetch") {
		t.Errorf("the text plan does not show the source to fetch:\n%s", out)
	}
	r = apply(t, dir, nil, "-grants", grants)
	if r.code != 0 || !sameSet(r.executed, "source.pkg", "step.use", "step.greet") || srv.hits.Load() != 1 {
		t.Fatalf("apply: exit %d, executed %v, %d requests\n%s%s", r.code, r.executed, srv.hits.Load(), r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "1 fetched, 2 executed") {
		t.Errorf("the summary does not count the fetch: %s", r.stdout)
	}
	outputs := map[string]string{"step.use": "/out/hello", "step.greet": "/out/greeting"}
	wants := map[string]string{"step.use": "hello from a source\n", "step.greet": "greeted\n"}
	for step, o := range outputs {
		if got := stepOutput(t, dir, step, o); got != wants[step] {
			t.Errorf("%s wrote %q, want %q", step, got, wants[step])
		}
	}
	deps := depsNamed(t, dir, "/src")
	if len(deps) != 1 || deps[0].URI != u || deps[0].Digest["sha256"] != sha256Hex(archive) ||
		deps[0].Annotations["foundry_source"] != "source.pkg" || !strings.HasPrefix(deps[0].Annotations["foundry_tree"].(string), "sha256:") {
		t.Errorf("the provenance of step.use does not name the source: %+v", deps)
	}
	// step.greet does not mount it but runs on seed.tools, which lays it at /opt/pkg.
	deps = depsNamed(t, dir, "image:/opt/pkg")
	if len(deps) != 1 || deps[0].URI != u || deps[0].Digest["sha256"] != sha256Hex(archive) ||
		deps[0].Annotations["foundry_source"] != "source.pkg" || deps[0].Annotations["foundry_role"] != "layer" {
		t.Errorf("the provenance of step.greet does not name the source its image holds: %+v", deps)
	}

	// Stored: cached in the plan, with the tree; the steps are keyed and cached too.
	_, out, _ = foundry(t, dir, "plan", "-json", "-grants", grants)
	p = decodePlan(t, out)
	if n := planNode(t, p, "source.pkg"); n.Status != plan.StatusCached || n.Fetch.Tree == "" || p.Summary.Run != 0 || p.Summary.Fetch != 0 {
		t.Errorf("plan after apply: %+v, summary %+v", n, p.Summary)
	}
	// Offline: the server is gone, no grant is given, and a step runs again on the tree
	// stored.
	srv.srv.Close()
	r = apply(t, dir, nil, "-grants", noGrants, "-replace", "step.use")
	if r.code != 0 || !sameSet(r.executed, "step.use") || !has(r.cached, "source.pkg") {
		t.Fatalf("offline apply: exit %d, executed %v, cached %v\n%s", r.code, r.executed, r.cached, r.stderr)
	}
	if got := stepOutput(t, dir, "step.use", "/out/hello"); got != "hello from a source\n" {
		t.Errorf("offline, step.use wrote %q", got)
	}
}

// has reports whether got holds want.
func has(got []string, want string) bool {
	for _, g := range got {
		if g == want {
			return true
		}
	}
	return false
}

// stepOutput reads a recorded output of a step from the project's last run.
func stepOutput(t *testing.T, dir, step, path string) string {
	t.Helper()
	code, out, errs := foundry(t, dir, "status", "-json")
	if code != 0 {
		t.Fatalf("status: %s", errs)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var st struct {
		Nodes []struct {
			Address string        `json:"address"`
			Action  digest.Digest `json:"action"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status -json: %v\n%s", err, out)
	}
	for _, n := range st.Nodes {
		if n.Address != step {
			continue
		}
		res, hit, err := ws.Cache.Lookup(context.Background(), n.Action)
		if err != nil || !hit {
			t.Fatalf("%s: no cached result for %s (%v)", step, n.Action, err)
		}
		o := res.Output(path)
		if o == nil {
			t.Fatalf("%s did not record %s", step, path)
		}
		b, err := ws.Store.Get(o.Digest)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Fatalf("status does not list %s:\n%s", step, out)
	return ""
}

// Bytes that changed upstream fail the apply with the expected and the actual digest,
// before any step sees them: nothing is kept, nothing that mounts the source runs; and an
// archive that tries to leave its tree is refused the same way.
func TestSourceMismatchAndHostileArchiveKeepNothing(t *testing.T) {
	needSandbox(t)
	pinned := fetchtest.Gzip(t, fetchtest.Tar(t, fetchtest.Entry{Name: "a.txt", Body: "1.0\n"}))
	changed := fetchtest.Gzip(t, fetchtest.Tar(t, fetchtest.Entry{Name: "a.txt", Body: "1.0, rebuilt\n"}))
	hostile := fetchtest.Tar(t, fetchtest.Entry{Name: "l", Type: tar.TypeSymlink, Link: "/etc"}, fetchtest.Entry{Name: "l/passwd", Body: "x"})
	srv := serveArchives(t, map[string][]byte{"/a.tar.gz": changed, "/h.tar": hostile})
	grants := networkGrants(t, srv.host)
	for name, c := range map[string]struct {
		path, sum, want string
		absent          []string
	}{
		"changed upstream": {"/a.tar.gz", sha256Hex(pinned), "served sha256:" + sha256Hex(changed) + ", but the source is pinned to sha256:" + sha256Hex(pinned),
			[]string{"sha256:" + sha256Hex(changed), "sha256:" + sha256Hex(pinned)}},
		"hostile archive": {"/h.tar", sha256Hex(hostile), `symlink "l" points to "/etc", outside the tree`, nil},
	} {
		dir := writeProject(t, sourceSeed+`
source "pkg" {
  url    = "`+srv.url+c.path+`"
  sha256 = "`+c.sum+`"
}

step "use" {
  image   = seed.bb
  mounts  = { "/src" = source.pkg }
  run     = ["sh", "-c", "cat /src/a.txt > /out/a"]
  outputs = ["/out/a"]
}
`)
		r := apply(t, dir, nil, "-grants", grants)
		if r.code != 1 || !sameSet(r.failed, "source.pkg") || !sameSet(r.skipped, "step.use") || len(r.executed) != 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, failed %v, skipped %v, executed %v\n%s", name, r.code, r.failed, r.skipped, r.executed, r.stderr)
		}
		ws, err := workspace.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range c.absent {
			if ok, _ := ws.Store.Has(digest.Digest(d)); ok {
				t.Errorf("%s: %s is in the store", name, d)
			}
		}
		ws.Close()
		_, out, _ := foundry(t, dir, "plan", "-json", "-grants", grants)
		if n := planNode(t, decodePlan(t, out), "source.pkg"); n.Status != plan.StatusFetch {
			t.Errorf("%s: after the failure the source is %s, want fetch again", name, n.Status)
		}
	}
}

// A git source is fetched at its commit from a repository the test made with go-git,
// through the smart HTTP protocol, with no git program involved; the provenance names the
// repository and the commit.
func TestSourceGitCommit(t *testing.T) {
	needSandbox(t)
	repo := fetchtest.NewRepo()
	first := repo.Commit(t, map[string]fetchtest.File{
		"VERSION":  {Body: "1\n"},
		"tools/go": {Body: "#!/bin/sh\n", Mode: filemode.Executable},
	}, plumbing.ZeroHash)
	repo.Commit(t, map[string]fetchtest.File{"VERSION": {Body: "2\n"}}, first)
	u := fetchtest.ServeGit(t, repo, false, nil) // the pinned commit is not a branch's tip
	pu, _ := url.Parse(u)
	dir := writeProject(t, sourceSeed+`
source "lib" {
  git    = "`+u+`"
  commit = "`+first.String()+`"
}

step "use" {
  image   = seed.bb
  mounts  = { "/lib" = source.lib }
  run     = ["sh", "-c", "cat /lib/VERSION > /out/v && test -x /lib/tools/go"]
  outputs = ["/out/v"]
}
`)
	r := apply(t, dir, nil, "-grants", networkGrants(t, pu.Host))
	if r.code != 0 || !sameSet(r.executed, "source.lib", "step.use") {
		t.Fatalf("apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	if got := stepOutput(t, dir, "step.use", "/out/v"); got != "1\n" {
		t.Errorf("step.use read VERSION %q, want the pinned commit's", got)
	}
	deps := depsNamed(t, dir, "/lib")
	if len(deps) != 1 || deps[0].URI != "git+"+u+"@"+first.String() || deps[0].Digest["gitCommit"] != first.String() {
		t.Errorf("the provenance does not name the commit: %+v", deps)
	}
}

// An OCI artifact by digest, from a real registry on loopback: its files are the tree.
func TestSourceOCIImage(t *testing.T) {
	needSandbox(t)
	reg := registrytest.StartDistribution(t)
	img := imageWith(t, map[string]string{"etc/data/config.json": `{"ok": true}`})
	ref, err := name.ParseReference(reg + "/tools/data:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dir := writeProject(t, sourceSeed+`
source "data" {
  oci = "`+reg+`/tools/data@`+d.String()+`"
}

step "use" {
  image   = seed.bb
  mounts  = { "/data" = source.data }
  run     = ["sh", "-c", "cat /data/etc/data/config.json > /out/c"]
  outputs = ["/out/c"]
}
`)
	r := apply(t, dir, nil, "-grants", networkGrants(t, reg))
	if r.code != 0 || !sameSet(r.executed, "source.data", "step.use") {
		t.Fatalf("apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	if got := stepOutput(t, dir, "step.use", "/out/c"); got != `{"ok": true}` {
		t.Errorf("step.use read %q", got)
	}
	deps := depsNamed(t, dir, "/data")
	if len(deps) != 1 || deps[0].URI != "oci://"+reg+"/tools/data@"+d.String() || "sha256:"+deps[0].Digest["sha256"] != d.String() {
		t.Errorf("the provenance does not name the image: %+v", deps)
	}
}

// imageWith is an image of one layer holding files.
func imageWith(t *testing.T, files map[string]string) v1.Image {
	t.Helper()
	var entries []fetchtest.Entry
	for p, b := range files {
		entries = append(entries, fetchtest.Entry{Name: p, Body: b})
	}
	tb := fetchtest.Tar(t, entries...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tb)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// A source goes wherever a directory does, modules included: one passed to a module as an
// input and one the module declares (module.m.source.inner) are each fetched once and
// mounted by the module's step, whose provenance names both. The first comes from a mirror
// (its url answers 404), unpacked from tar.xz with strip; the module's is a zip.
func TestSourceThroughAModuleAndAMirror(t *testing.T) {
	needSandbox(t)
	xz := fetchtest.Xz(t, fetchtest.Tar(t,
		fetchtest.Entry{Name: "pkg-2.0/", Type: tar.TypeDir},
		fetchtest.Entry{Name: "pkg-2.0/a.txt", Body: "from the input\n"},
	))
	zip := fetchtest.Zip(t, fetchtest.Entry{Name: "b.txt", Body: "from the module\n"})
	srv := serveArchives(t, map[string][]byte{"/mirror/pkg.tar.xz": xz, "/inner.zip": zip})
	dir := writeProject(t, sourceSeed+`
source "pkg" {
  url     = "`+srv.url+`/gone/pkg.tar.xz"
  mirrors = ["`+srv.url+`/mirror/pkg.tar.xz"]
  sha256  = "`+sha256Hex(xz)+`"
  strip   = 1
}

module "m" {
  source = "./modules/m"
  image  = seed.bb
  src    = source.pkg
}
`)
	if err := os.MkdirAll(filepath.Join(dir, "modules", "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules", "m", "main.hcl"), []byte(`
variable "image" {}
variable "src" {}

source "inner" {
  url    = "`+srv.url+`/inner.zip"
  sha256 = "`+sha256Hex(zip)+`"
}

step "use" {
  image   = var.image
  mounts  = { "/src" = var.src, "/inner" = source.inner }
  run     = ["sh", "-c", "cat /src/a.txt /inner/b.txt > /out/ab"]
  outputs = ["/out/ab"]
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil, "-grants", networkGrants(t, srv.host))
	if r.code != 0 || !sameSet(r.executed, "source.pkg", "module.m.source.inner", "module.m.step.use") || srv.hits.Load() != 3 {
		t.Fatalf("apply: exit %d, executed %v, %d requests\n%s%s", r.code, r.executed, srv.hits.Load(), r.stdout, r.stderr)
	}
	if got := stepOutput(t, dir, "module.m.step.use", "/out/ab"); got != "from the input\nfrom the module\n" {
		t.Errorf("module.m.step.use wrote %q", got)
	}
	for mount, want := range map[string]sourceDep{
		"/src":   {URI: srv.url + "/mirror/pkg.tar.xz", Digest: map[string]string{"sha256": sha256Hex(xz)}, Annotations: map[string]any{"foundry_source": "source.pkg"}},
		"/inner": {URI: srv.url + "/inner.zip", Digest: map[string]string{"sha256": sha256Hex(zip)}, Annotations: map[string]any{"foundry_source": "module.m.source.inner"}},
	} {
		deps := depsNamed(t, dir, mount)
		if len(deps) != 1 || deps[0].URI != want.URI || deps[0].Digest["sha256"] != want.Digest["sha256"] || deps[0].Annotations["foundry_source"] != want.Annotations["foundry_source"] {
			t.Errorf("the provenance of %s names %+v, want %+v", mount, deps, want)
		}
	}
}

// An OCI artifact (ORAS's shape: layers that are files, each named by its title
// annotation) by digest is a tree of those files; a title that leaves the tree is refused
// and nothing that mounts the source runs.
func TestSourceOCIArtifact(t *testing.T) {
	needSandbox(t)
	reg := registrytest.StartDistribution(t)
	push := func(repo, title, body string) string {
		t.Helper()
		art, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
			Layer:       static.NewLayer([]byte(body), "application/vnd.foundry.test.file"),
			Annotations: map[string]string{"org.opencontainers.image.title": title},
		})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(reg + "/" + repo + ":v1")
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, art); err != nil {
			t.Fatal(err)
		}
		d, err := art.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return reg + "/" + repo + "@" + d.String()
	}
	project := func(ref string) string {
		return writeProject(t, sourceSeed+`
source "tool" {
  oci = "`+ref+`"
}

step "use" {
  image   = seed.bb
  mounts  = { "/tool" = source.tool }
  run     = ["sh", "-c", "cat /tool/bin/tool.sh > /out/t"]
  outputs = ["/out/t"]
}
`)
	}
	grants := networkGrants(t, reg)

	ref := push("tools/script", "bin/tool.sh", "echo a tool\n")
	dir := project(ref)
	r := apply(t, dir, nil, "-grants", grants)
	if r.code != 0 || !sameSet(r.executed, "source.tool", "step.use") {
		t.Fatalf("apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	if got := stepOutput(t, dir, "step.use", "/out/t"); got != "echo a tool\n" {
		t.Errorf("step.use read %q", got)
	}
	if deps := depsNamed(t, dir, "/tool"); len(deps) != 1 || deps[0].URI != "oci://"+ref {
		t.Errorf("the provenance does not name the artifact: %+v", deps)
	}

	dir = project(push("tools/escape", "../../escape.sh", "echo out\n"))
	r = apply(t, dir, nil, "-grants", grants)
	if r.code != 1 || !sameSet(r.failed, "source.tool") || !sameSet(r.skipped, "step.use") || !strings.Contains(r.stderr, `layer title "../../escape.sh" is not a file name inside the tree`) {
		t.Errorf("an artifact whose title leaves the tree: exit %d, failed %v, skipped %v\n%s", r.code, r.failed, r.skipped, r.stderr)
	}
}

package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/foundry-build/foundry/engine/digest"
	"github.com/foundry-build/foundry/engine/store"
	"github.com/foundry-build/foundry/provenance"
)

// requireTool returns the path of an external program a test needs. Missing, it fails the
// test under CI=true (CI installs it) and skips it otherwise, saying how to install it.
func requireTool(t testing.TB, names []string, hint string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		if filepath.IsAbs(n) {
			if _, err := os.Stat(n); err == nil {
				return n
			}
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found and CI=true: %s", names[0], hint)
	}
	t.Skipf("%s not found: %s", names[0], hint)
	return ""
}

func goBin(name string) string {
	if gb := os.Getenv("GOBIN"); gb != "" {
		return filepath.Join(gb, name)
	}
	home, _ := os.UserHomeDir()
	gp := os.Getenv("GOPATH")
	if gp == "" {
		gp = filepath.Join(home, "go")
	}
	return filepath.Join(gp, "bin", name)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startDistribution starts Debian's docker-registry (distribution 2.8.2: no referrers API)
// with filesystem storage on a free loopback port and returns host:port.
func startDistribution(t testing.TB) string {
	t.Helper()
	bin := requireTool(t, []string{"/usr/bin/docker-registry", "docker-registry"}, "apt-get install docker-registry (scripts/deps.sh)")
	dir := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(dir, "data"), addr)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	logf, _ := os.Create(filepath.Join(dir, "registry.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting docker-registry: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
	t.Fatalf("docker-registry did not start on %s: %s", addr, b)
	return ""
}

// startGGCR starts go-containerregistry's in-process registry with the referrers API.
func startGGCR(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// startServe starts Handler (foundry registry serve) over a new layout.
func startServe(t testing.TB) (string, *Layout) {
	t.Helper()
	l, err := OpenLayout(filepath.Join(t.TempDir(), "layout"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(l, "foundry", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), l
}

type storeKind struct {
	name string
	open func(t testing.TB) Store
}

// storeKinds are the stores every behaviour test runs against.
var storeKinds = []storeKind{
	{"layout", func(t testing.TB) Store {
		s, err := Open(LayoutScheme + filepath.Join(t.TempDir(), "layout"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"ggcr-referrers-api", func(t testing.TB) Store {
		s, err := Open(startGGCR(t) + "/foundry/caps")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"distribution-tag-fallback", func(t testing.TB) Store {
		s, err := Open(startDistribution(t) + "/foundry/caps")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"foundry-serve", func(t testing.TB) Store {
		addr, _ := startServe(t)
		s, err := Open(addr + "/foundry")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

func forEachStore(t *testing.T, fn func(t *testing.T, s Store)) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) { fn(t, k.open(t)) })
	}
}

func fakeDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fixture is a content store with a tree, a contract and a key pair.
type fixture struct {
	src      *store.Store
	tree     digest.Digest
	treeDir  string
	contract []byte
	signer   *provenance.Signer
	keys     []*provenance.Verifier
	pubPath  string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	src, err := store.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(dir, "tree")
	must(t, os.MkdirAll(filepath.Join(tree, "bin"), 0o755))
	must(t, os.MkdirAll(filepath.Join(tree, "share", "doc"), 0o755))
	must(t, os.WriteFile(filepath.Join(tree, "bin", "int-sort"), []byte("#!/bin/sh\nsort -n\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(tree, "share", "doc", "README"), []byte("sorts integers\n"), 0o644))
	must(t, os.Symlink("../bin/int-sort", filepath.Join(tree, "share", "sort")))
	td, _, err := src.PutDir(tree)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := provenance.GenerateKey(provenance.KeyECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "foundry.key")
	pubPath := filepath.Join(dir, "foundry.pub")
	must(t, os.WriteFile(keyPath, priv, 0o600))
	must(t, os.WriteFile(pubPath, pub, 0o644))
	signer, err := provenance.LoadSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := provenance.LoadVerifiers(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{src: src, tree: td, treeDir: tree, signer: signer, keys: keys, pubPath: pubPath,
		contract: []byte(`{"name":"int-sort","summary":"Sort a JSON array of integers","target":"linux/amd64"}`)}
}

func (f *fixture) capability(tag string) Capability {
	return Capability{Contract: f.contract, Tree: f.tree, Name: "int-sort", Version: "1.0.0", Target: "linux/amd64", Tag: tag}
}

// attest signs SLSA provenance for a step whose outputs have the given digests, as the runc
// executor would report it.
func (f *fixture) attest(t testing.TB, name string, subjects ...digest.Digest) []byte {
	return attestWith(t, f.signer, name, subjects...)
}

func attestWith(t testing.TB, signer *provenance.Signer, name string, subjects ...digest.Digest) []byte {
	t.Helper()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var outs []provenance.Artifact
	for i, d := range subjects {
		outs = append(outs, provenance.Artifact{Name: fmt.Sprintf("/out/%s-%d", name, i), Digest: string(d)})
	}
	st, err := provenance.NewProvenance(&provenance.Execution{
		InvocationID: "test/" + name,
		Executor:     "runc",
		Isolation:    provenance.IsolationContainer,
		Step:         json.RawMessage(`{"run":["package"],"name":"` + name + `"}`),
		ActionDigest: fakeDigest("action " + name),
		Platform:     "linux/amd64",
		Network:      provenance.Network{Mode: "none"},
		Image:        provenance.Dependency{Name: "image", Digest: fakeDigest("image")},
		Outputs:      outs,
		StartedOn:    start,
		FinishedOn:   start.Add(time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := provenance.Sign(signer, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var bg = context.Background()

func startHandler(t testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

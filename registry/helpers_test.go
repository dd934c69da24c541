package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry/registrytest"
	"github.com/foundry-build/foundry/store"
)

func requireTool(t testing.TB, names []string, hint string) string {
	t.Helper()
	return registrytest.RequireTool(t, names, hint)
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

func startDistribution(t testing.TB) string { return registrytest.StartDistribution(t) }

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

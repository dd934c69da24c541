package graph

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/lang"
)

const sourceProject = `
seed "bb" {
  layer { files = { "/bin/sh" = host_file("/bin/sh") } }
}
source "pkg" {
  url     = "URL"
  mirrors = MIRRORS
  sha256  = "PIN"
  strip   = STRIP
}
step "use" {
  image   = seed.bb
  mounts  = { "/src" = source.pkg }
  run     = ["true"]
  outputs = ["/out/x"]
}
seed "tools" {
  layer { from = seed.bb }
  layer {
    dir = source.pkg
    at  = "/opt/pkg"
  }
}
`

func compileSource(t *testing.T, url, mirrors, pin, strip string) *Graph {
	t.Helper()
	dir := t.TempDir()
	src := strings.NewReplacer("URL", url, "MIRRORS", mirrors, "PIN", pin, "STRIP", strip).Replace(sourceProject)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g, diags := Compile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return g
}

// A source's digest is its pin and how it is unpacked: where it is fetched from changes no
// digest, another pin or strip changes it and every step that mounts it. A step's cache key
// names the source by the tree it made, and is unknown until it is fetched.
func TestSourceDigests(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	base := compileSource(t, "https://a.example/p.tgz", "[]", pin, "1")
	moved := compileSource(t, "https://b.example/x/p.tgz", `["https://c.example/p.tgz"]`, pin, "1")
	repinned := compileSource(t, "https://a.example/p.tgz", "[]", strings.Repeat("cd", 32), "1")
	restripped := compileSource(t, "https://a.example/p.tgz", "[]", pin, "2")
	for _, a := range []string{"source.pkg", "step.use"} {
		if base.Nodes[a].Digest != moved.Nodes[a].Digest {
			t.Errorf("%s: moving the source to another URL changed its digest", a)
		}
		if base.Nodes[a].Digest == repinned.Nodes[a].Digest || base.Nodes[a].Digest == restripped.Nodes[a].Digest {
			t.Errorf("%s: another pin or strip left the digest as it was", a)
		}
	}
	if !strings.Contains(string(base.Nodes["source.pkg"].Definition), `"pin":"sha256:`+pin+`"`) || strings.Contains(string(base.Nodes["source.pkg"].Definition), "a.example") {
		t.Errorf("definition: %s", base.Nodes["source.pkg"].Definition)
	}
	n := base.Nodes["step.use"]
	if _, _, ok, _ := base.CacheKey(n, func(*lang.Artifact) (Content, bool) { return Content{}, false }); ok {
		t.Error("a step mounting a source not fetched has a cache key")
	}
	key := func(tree digest.Digest) digest.Digest {
		k, _, ok, err := base.CacheKey(n, func(a *lang.Artifact) (Content, bool) { return TreeContent(tree), a.Kind == lang.ArtifactSource })
		if !ok || err != nil {
			t.Fatal(err)
		}
		return k
	}
	t1, t2 := digest.FromBytes([]byte("1")), digest.FromBytes([]byte("2"))
	if k1, again := key(t1), key(t1); k1 == key(t2) || k1 != again || k1 == n.Digest {
		t.Error("the cache key does not follow the tree mounted")
	}
}

// A seed with a source's tree as a layer waits for the source: the walk settles the source
// before it builds the image (once, a race let the seed look for a tree not yet fetched).
func TestSeedLayerOfASourceDependsOnIt(t *testing.T) {
	g := compileSource(t, "https://a.example/p.tgz", "[]", strings.Repeat("ab", 32), "1")
	if deps := g.Nodes["seed.tools"].Deps; !slices.Contains(deps, "source.pkg") {
		t.Fatalf("seed.tools depends on %v, not on source.pkg", deps)
	}
}

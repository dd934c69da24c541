package plan

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
	"github.com/foundry-build/foundry/lang"
)

// planOf compiles cfg and plans it, failing the test on any error.
func planOf(t *testing.T, cfg *lang.Config) *Plan {
	t.Helper()
	g, diags := graph.Compile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, err := Make(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParallelDigestSameAsSequential compiles and plans a graph large enough for the
// parallel passes (edges, digest waves, step views) on two processors and on one, and
// requires the same plan.
func TestParallelDigestSameAsSequential(t *testing.T) {
	cfg := graphtest.LoadSparse(t, rand.New(rand.NewSource(7)), graph.ParallelMin+100, 3, 20)
	plan := func() string {
		p := planOf(t, cfg)
		if len(p.Nodes) < graph.ParallelMin {
			t.Fatalf("only %d nodes: the parallel paths do not run", len(p.Nodes))
		}
		var b strings.Builder
		if err := p.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	sequential := plan()
	runtime.GOMAXPROCS(2)
	// The JSON plan holds every node's digest, dependencies and step view, in order.
	if parallel := plan(); parallel != sequential {
		t.Fatalf("the plan on two processors differs from the plan on one")
	}
}

// A cycle between steps is reported with every node on it, in the direction of data flow.
func TestDependencyCycleReported(t *testing.T) {
	dir := t.TempDir()
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(fmt.Sprintf(`seed "base" {
  layer { files = { "/bin/tool" = host_file(%q) } }
}
step "a" {
  image   = seed.base
  run     = ["tool"]
  mounts  = { "/in" = step.c.output["/out/o"] }
  outputs = ["/out/o"]
}
step "b" {
  image   = seed.base
  run     = ["tool"]
  mounts  = { "/in" = step.a.output["/out/o"] }
  outputs = ["/out/o"]
}
step "c" {
  image   = seed.base
  run     = ["tool"]
  mounts  = { "/in" = step.b.output["/out/o"] }
  outputs = ["/out/o"]
}
`, graphtest.SeedFile(t, "tool"))), 0o644))
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	g, diags := graph.Compile(cfg)
	if !diags.HasErrors() || diags[0].Summary != "Dependency cycle" {
		t.Fatalf("want a dependency cycle, got %v", diags)
	}
	for _, line := range []string{
		"step.a (main.hcl:4) is needed by step.b",
		"step.b (main.hcl:10) is needed by step.c",
		"step.c (main.hcl:16) is needed by step.a",
	} {
		if !strings.Contains(diags[0].Detail, line) {
			t.Errorf("cycle detail lacks %q:\n%s", line, diags[0].Detail)
		}
	}
	// Nothing was digested: no step holds a definition its producers' digests are missing
	// from (graph's stepTemplate writes them before the cycle is found).
	for a, n := range g.Nodes {
		if n.Definition != nil || n.Digest != "" {
			t.Errorf("%s has a definition or digest in a graph that failed to compile", a)
		}
	}
	// A graph without an order has nothing to plan; planning it must not fail.
	if p, err := Make(g, Options{}); err != nil || len(p.Nodes) != 0 {
		t.Fatalf("plan of a cyclic graph: %v, %v", p, err)
	}
}

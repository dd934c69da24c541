package engine

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/lang"
)

// genProject describes a random DAG of steps on one seed; render writes it as HCL.
type genProject struct {
	steps []genStep
	srcs  int // project directories src0..srcN-1
}

type genStep struct {
	argv   string
	env    string
	memory string
	deps   []int // earlier steps whose output this step mounts
	src    int   // -1 or a src directory it mounts
}

func randomProject(r *rand.Rand, n int) *genProject {
	p := &genProject{srcs: 3}
	for i := 0; i < n; i++ {
		s := genStep{argv: fmt.Sprintf("echo %d", i), env: "a", memory: "64MiB", src: -1}
		for j := 0; j < i; j++ {
			if r.Intn(4) == 0 {
				s.deps = append(s.deps, j)
			}
		}
		if r.Intn(2) == 0 {
			s.src = r.Intn(p.srcs)
		}
		p.steps = append(p.steps, s)
	}
	return p
}

// blocks renders each top-level block separately so tests can reorder and re-space them.
func (p *genProject) blocks(seedFile string, spaces string) []string {
	var out []string
	out = append(out, fmt.Sprintf("seed \"base\" {\n%slayer {\n files = { \"/bin/tool\" = host_file(%q) }\n }\n}\n", spaces, seedFile))
	for i, s := range p.steps {
		var b strings.Builder
		fmt.Fprintf(&b, "step \"s%d\" {\n%simage = seed.base\n", i, spaces)
		fmt.Fprintf(&b, "  run = [\"sh\", \"-c\", %q]\n", s.argv)
		fmt.Fprintf(&b, "  env = { MODE = %q }\n", s.env)
		mounts := []string{}
		for _, d := range s.deps {
			mounts = append(mounts, fmt.Sprintf("%q = step.s%d.output[\"/out/o\"]", fmt.Sprintf("/in/%d", d), d))
		}
		if s.src >= 0 {
			mounts = append(mounts, fmt.Sprintf("\"/src\" = dir(\"src%d\")", s.src))
		}
		fmt.Fprintf(&b, "  mounts = {%s%s}\n", spaces, strings.Join(mounts, ",\n"))
		fmt.Fprintf(&b, "  outputs = [\"/out/o\"]\n  limits {\n memory = %q\n }\n}\n", s.memory)
		out = append(out, b.String())
	}
	return out
}

// write lays the project out in dir: blocks spread over files in the given order.
func (p *genProject) write(t *testing.T, dir string, blocks []string, files int) {
	t.Helper()
	for i := 0; i < p.srcs; i++ {
		d := filepath.Join(dir, fmt.Sprintf("src%d", i))
		must(t, os.MkdirAll(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "main.c"), []byte(fmt.Sprintf("int main(){return %d;}\n", i)), 0o644))
	}
	per := make([][]string, files)
	for i, b := range blocks {
		per[i%files] = append(per[i%files], b)
	}
	for i, bs := range per {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.hcl", i)), []byte(strings.Join(bs, "\n")), 0o644))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func compileDir(t *testing.T, dir string) map[string]digest.Digest {
	t.Helper()
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	g, diags := Compile(cfg)
	if diags.HasErrors() {
		t.Fatalf("compile: %s", diags.Error())
	}
	out := map[string]digest.Digest{}
	for a, n := range g.Nodes {
		out[a] = n.Digest
	}
	return out
}

// loadConfig loads the project in dir, failing the test on any diagnostic.
func loadConfig(t *testing.T, dir string) *lang.Config {
	t.Helper()
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("%s: %s", dir, diags.Error())
	}
	return cfg
}

// planOf compiles cfg and plans it, failing the test on any error.
func planOf(t *testing.T, cfg *lang.Config) *Plan {
	t.Helper()
	g, diags := Compile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, err := MakePlan(g, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func seedFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "tool")
	must(t, os.WriteFile(p, []byte(content), 0o755))
	return p
}

// Same inputs in any file order, block order or whitespace give the same digests.
func TestDigestStability(t *testing.T) {
	tool := seedFile(t, "#!/bin/sh\n")
	for seed := int64(1); seed <= 8; seed++ {
		r := rand.New(rand.NewSource(seed))
		p := randomProject(r, 12)
		a := t.TempDir()
		p.write(t, a, p.blocks(tool, "  "), 1)
		want := compileDir(t, a)

		blocks := p.blocks(tool, "\n\n    ")
		r.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
		b := t.TempDir()
		p.write(t, b, blocks, 1+r.Intn(4))
		got := compileDir(t, b)
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d nodes, want %d", seed, len(got), len(want))
		}
		for addr, d := range want {
			if got[addr] != d {
				t.Errorf("seed %d: %s digest %s after reordering, want %s", seed, addr, got[addr], d)
			}
		}
	}
}

// descendants returns step k and every step that depends on it, transitively.
func (p *genProject) descendants(k int) map[string]bool {
	out := map[string]bool{fmt.Sprintf("step.s%d", k): true}
	for i := k + 1; i < len(p.steps); i++ {
		for _, d := range p.steps[i].deps {
			if out[fmt.Sprintf("step.s%d", d)] {
				out[fmt.Sprintf("step.s%d", i)] = true
			}
		}
	}
	return out
}

// Changing one input of one step changes exactly that step's digest and its dependents'.
func TestDigestSensitivity(t *testing.T) {
	tool := seedFile(t, "#!/bin/sh\n")
	mutations := []struct {
		name  string
		apply func(p *genProject, k int, dir string)
	}{
		{"argv", func(p *genProject, k int, _ string) { p.steps[k].argv += " changed" }},
		{"env", func(p *genProject, k int, _ string) { p.steps[k].env = "b" }},
		{"limit", func(p *genProject, k int, _ string) { p.steps[k].memory = "65MiB" }},
		{"input byte", func(p *genProject, k int, dir string) {
			// Point the step at a source directory of its own, then flip one byte in it.
			p.steps[k].src = p.srcs
			p.srcs++
		}},
	}
	for seed := int64(1); seed <= 6; seed++ {
		for _, m := range mutations {
			r := rand.New(rand.NewSource(seed))
			p := randomProject(r, 10)
			k := r.Intn(len(p.steps))
			if m.name == "input byte" {
				m.apply(p, k, "")
			}
			a := t.TempDir()
			p.write(t, a, p.blocks(tool, "  "), 1)
			before := compileDir(t, a)
			if m.name == "input byte" {
				f := filepath.Join(a, fmt.Sprintf("src%d", p.srcs-1), "main.c")
				b, _ := os.ReadFile(f)
				b[0] ^= 1
				must(t, os.WriteFile(f, b, 0o644))
			} else {
				m.apply(p, k, a)
				p.write(t, a, p.blocks(tool, "  "), 1)
			}
			after := compileDir(t, a)
			want := p.descendants(k)
			var changed []string
			for addr := range before {
				if before[addr] != after[addr] {
					changed = append(changed, addr)
				}
			}
			sort.Strings(changed)
			for _, addr := range changed {
				if !want[addr] {
					t.Errorf("seed %d, %s of s%d: %s changed but does not depend on it", seed, m.name, k, addr)
				}
			}
			for addr := range want {
				if before[addr] == after[addr] {
					t.Errorf("seed %d, %s of s%d: %s did not change", seed, m.name, k, addr)
				}
			}
		}
	}
}

// Changing the seed's host file changes the seed and every step.
func TestDigestSeedChangePropagates(t *testing.T) {
	tool := seedFile(t, "v1")
	p := randomProject(rand.New(rand.NewSource(3)), 5)
	a := t.TempDir()
	p.write(t, a, p.blocks(tool, "  "), 1)
	before := compileDir(t, a)
	must(t, os.WriteFile(tool, []byte("v2"), 0o755))
	after := compileDir(t, a)
	for addr := range before {
		if before[addr] == after[addr] {
			t.Errorf("%s unchanged after the seed's host file changed", addr)
		}
	}
}

// A recipe's digest covers every one of its steps, including one its package does not use.
func TestRecipeDigestCoversAllSteps(t *testing.T) {
	tool := seedFile(t, "x")
	src := func(arg string) string {
		return fmt.Sprintf(`
seed "b" {
  layer { files = { "/bin/sh" = host_file(%q) } }
}
capability "c" {
  interface "cli" { entrypoint = ["/bin/c"] }
}
recipe "r" {
  provides = capability.c
  step "used" {
    image   = seed.b
    run     = ["sh"]
    outputs = ["/out/c"]
  }
  step "unused" {
    image = seed.b
    run   = ["sh", %q]
  }
  package { files = { "/bin/c" = step.used.output["/out/c"] } }
}
`, tool, arg)
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src("a")), 0o644))
	before := compileDir(t, dir)
	must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src("b")), 0o644))
	after := compileDir(t, dir)
	if before["recipe.r"] == after["recipe.r"] {
		t.Error("changing a recipe step did not change the recipe's digest")
	}
	if before["recipe.r.package"] != after["recipe.r.package"] {
		t.Error("changing a step the package does not use changed the package's digest")
	}
}

// Every attribute of a service interface is part of the contract's identity; its suites
// and summary are not.
func TestServiceContractDigest(t *testing.T) {
	base := map[string]string{"port": "8080", "ready": `"/healthz"`, "errors": "{ bad = 400 }", "entrypoint": `["/bin/s"]`}
	src := func(over map[string]string, extra string) string {
		a := map[string]string{}
		for k, v := range base {
			a[k] = v
		}
		for k, v := range over {
			a[k] = v
		}
		body := ""
		for _, k := range []string{"entrypoint", "port", "ready", "errors"} {
			if a[k] != "" {
				body += fmt.Sprintf("    %s = %s\n", k, a[k])
			}
		}
		return fmt.Sprintf("capability \"s\" {\n%s  interface \"service\" {\n%s  }\n}\n", extra, body)
	}
	digestOf := func(hcl string) digest.Digest {
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o644))
		return compileDir(t, dir)["capability.s"]
	}
	ref := digestOf(src(nil, ""))
	for _, over := range []map[string]string{
		{"port": "8081"}, {"ready": `"/ready"`}, {"ready": ""}, {"errors": "{ bad = 422 }"}, {"errors": "{ worse = 400 }"}, {"entrypoint": `["/bin/t"]`},
	} {
		if digestOf(src(over, "")) == ref {
			t.Errorf("changing %v left the contract digest unchanged", over)
		}
	}
	if digestOf(src(nil, "  summary = \"documentation\"\n")) != ref {
		t.Error("the summary changed the contract digest")
	}
}

// TestParallelDigestSameAsSequential compiles and plans a graph large enough for the
// parallel passes (edges, digest waves, step views) on two processors and on one, and
// requires the same plan.
func TestParallelDigestSameAsSequential(t *testing.T) {
	cfg := loadSparse(t, rand.New(rand.NewSource(7)), parallelDigestMin+100, 3, 20)
	plan := func() string {
		p := planOf(t, cfg)
		if len(p.Nodes) < max(parallelDigestMin, parallelMin) {
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

// loadSparse writes and loads a project of n steps, each mounting the outputs of up to
// deps random earlier steps (and maybe a source directory), spread over the given number of
// files: large graphs with few edges, as the plan benchmark makes.
func loadSparse(t *testing.T, r *rand.Rand, n, deps, files int) *lang.Config {
	t.Helper()
	p := &genProject{srcs: 3}
	for i := 0; i < n; i++ {
		s := genStep{argv: fmt.Sprintf("echo %d", i), env: "a", memory: "64MiB", src: r.Intn(4) - 1}
		for k := 0; k < deps && i > 0; k++ {
			if d := r.Intn(i); !contains(s.deps, d) {
				s.deps = append(s.deps, d)
			}
		}
		p.steps = append(p.steps, s)
	}
	dir := t.TempDir()
	p.write(t, dir, p.blocks(seedFile(t, "tool"), "  "), files)
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestOrderIsKahnByAddress checks Graph.Order against Kahn's algorithm on addresses: every
// node after its dependencies, ties broken by the smallest address.
func TestOrderIsKahnByAddress(t *testing.T) {
	cfg := loadSparse(t, rand.New(rand.NewSource(11)), 300, 2, 3)
	g, diags := Compile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	placed := map[string]bool{}
	var want []string
	for len(want) < len(g.Nodes) {
		var ready []string
		for a, n := range g.Nodes {
			if placed[a] {
				continue
			}
			ok := true
			for _, d := range n.Deps {
				ok = ok && placed[d]
			}
			if ok {
				ready = append(ready, a)
			}
		}
		sort.Strings(ready)
		// Kahn's algorithm takes one ready node at a time; a node that becomes ready after
		// it competes with those still waiting, so take only the smallest each round.
		placed[ready[0]] = true
		want = append(want, ready[0])
	}
	if strings.Join(g.Order, " ") != strings.Join(want, " ") {
		t.Fatalf("Order differs from Kahn's algorithm by address:\n got %v\nwant %v", g.Order[:10], want[:10])
	}
}

// A cycle between steps is reported with every node on it, in the direction of data flow.
func TestDependencyCycleReported(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(fmt.Sprintf(`seed "base" {
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
`, seedFile(t, "tool"))), 0o644))
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	g, diags := Compile(cfg)
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
	// from (stepTemplate writes them before the cycle is found).
	for a, n := range g.Nodes {
		if n.Definition != nil || n.Digest != "" {
			t.Errorf("%s has a definition or digest in a graph that failed to compile", a)
		}
	}
	// A graph without an order has nothing to plan; planning it must not fail.
	if p, err := MakePlan(g, PlanOptions{}); err != nil || len(p.Nodes) != 0 {
		t.Fatalf("plan of a cyclic graph: %v, %v", p, err)
	}
}

// References to nodes that do not exist (lang rejects them; a configuration built another
// way may hold them) are reported in the order of the step's mount paths, however its map
// is iterated.
func TestUnknownNodesAreReportedInOrder(t *testing.T) {
	mounts := map[string]*lang.Artifact{}
	for _, p := range []string{"/c", "/a", "/d", "/b"} {
		mounts[p] = &lang.Artifact{Kind: lang.ArtifactStepOutput, Node: "step.missing" + p[1:], Path: "/out/o"}
	}
	cfg := &lang.Config{Steps: map[string]*lang.Step{
		"s": {Name: "s", Kind: "step", Mounts: mounts, Outputs: []string{"/out/o"}},
	}}
	for i := 0; i < 20; i++ {
		_, diags := Compile(cfg)
		var got []string
		for _, d := range diags {
			got = append(got, d.Detail)
		}
		want := []string{
			"step.s refers to step.missinga, which does not exist.",
			"step.s refers to step.missingb, which does not exist.",
			"step.s refers to step.missingc, which does not exist.",
			"step.s refers to step.missingd, which does not exist.",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

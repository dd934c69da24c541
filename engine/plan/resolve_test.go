package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
	"github.com/foundry-build/foundry/lang"
)

// capProject writes capabilities and recipes: recipes[name] = {provides, cost, needs...}.
func capProject(t *testing.T, caps []string, recipes [][]string) *graph.Graph {
	t.Helper()
	tool := graphtest.SeedFile(t, "x")
	var b strings.Builder
	fmt.Fprintf(&b, "seed \"b\" {\n  layer { files = { \"/bin/sh\" = host_file(%q) } }\n}\n", tool)
	for _, c := range caps {
		fmt.Fprintf(&b, "capability %q {\n  interface \"cli\" { entrypoint = [\"/bin/%s\"] }\n}\n", c, c)
	}
	for _, r := range recipes {
		name, provides, cost, needs := r[0], r[1], r[2], r[3:]
		var mounts []string
		for _, n := range needs {
			mounts = append(mounts, fmt.Sprintf("\"/tools/%s\" = capability.%s", n, n))
		}
		fmt.Fprintf(&b, `recipe %q {
  provides = capability.%s
  cost     = %s
  step "build" {
    image   = seed.b
    mounts  = { %s }
    run     = ["sh"]
    outputs = ["/out/x"]
  }
  package { files = { "/bin/%s" = step.build.output["/out/x"] } }
}
`, name, provides, cost, strings.Join(mounts, ", "), provides)
	}
	return compileProject(t, b.String())
}

// compileProject compiles a project of one file, main.hcl holding src.
func compileProject(t *testing.T, src string) *graph.Graph {
	t.Helper()
	dir := t.TempDir()
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644))
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g, diags := graph.Compile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return g
}

func capPlan(t *testing.T, g *graph.Graph, admitted func(*graph.Node) (*admit.Admitted, string, error)) map[string]*Capability {
	t.Helper()
	p, err := Make(g, Options{Admitted: admitted})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Capability{}
	for _, c := range p.Capabilities {
		out[c.Address] = c
	}
	return out
}

func TestResolutionOrderIsCostThenName(t *testing.T) {
	g := capProject(t, []string{"c"}, [][]string{{"zeta", "c", "5"}, {"alpha", "c", "5"}, {"cheap", "c", "1"}})
	for i := 0; i < 5; i++ {
		c := capPlan(t, g, nil)["capability.c"]
		var order []string
		for _, r := range c.Recipes {
			order = append(order, r.Address+"="+r.Status)
		}
		if got := strings.Join(order, " "); got != "recipe.cheap=build recipe.alpha=alternative recipe.zeta=alternative" {
			t.Fatalf("resolution order: %s", got)
		}
	}
}

// A recipe whose prerequisite cannot be resolved is skipped for one that can, even if it
// costs more; the plan names what the skipped one lacks.
func TestResolutionSkipsInfeasibleRecipe(t *testing.T) {
	g := capProject(t, []string{"c", "needs-nothing-provides"}, [][]string{{"cheap", "c", "1", "needs-nothing-provides"}, {"dear", "c", "9"}})
	c := capPlan(t, g, nil)["capability.c"]
	if c.Status != StatusBuild || c.Recipe != "recipe.dear" || !c.Reachable || !c.Ready {
		t.Fatalf("want recipe.dear chosen: %+v", c)
	}
	if r := c.Recipes[0]; r.Address != "recipe.cheap" || r.Status != StatusMissing || strings.Join(r.Missing, ",") != "capability.needs-nothing-provides" {
		t.Fatalf("cheap recipe: %+v", r)
	}
}

func TestResolutionReportsMissingSets(t *testing.T) {
	g := capProject(t, []string{"c", "a", "b"}, [][]string{{"r1", "c", "1", "a", "b"}, {"r2", "c", "2", "b"}})
	c := capPlan(t, g, nil)["capability.c"]
	if c.Status != StatusMissing || c.Reachable {
		t.Fatalf("want c missing: %+v", c)
	}
	if got := strings.Join(c.Recipes[0].Missing, ","); got != "capability.a,capability.b" {
		t.Errorf("r1 missing %s", got)
	}
	if got := strings.Join(c.Recipes[1].Missing, ","); got != "capability.b" {
		t.Errorf("r2 missing %s", got)
	}
	if !strings.Contains(c.Reason, "recipe.r2 needs capability.b") {
		t.Errorf("reason: %s", c.Reason)
	}
}

// A requirement met again on its own stack is a cycle, reported with its path; another
// recipe that avoids the cycle still resolves the capability.
func TestResolutionCycle(t *testing.T) {
	g := capProject(t, []string{"a", "b"}, [][]string{{"ra", "a", "1", "b"}, {"rb", "b", "1", "a"}})
	plans := capPlan(t, g, nil)
	a := plans["capability.a"]
	if a.Status != StatusMissing || strings.Join(a.Recipes[0].Cycle, " → ") != "capability.a → capability.b → capability.a" {
		t.Fatalf("want a cycle witness: %+v %+v", a, a.Recipes[0])
	}
	g = capProject(t, []string{"a", "b"}, [][]string{{"ra", "a", "1", "b"}, {"rb", "b", "1", "a"}, {"rb2", "b", "2"}})
	plans = capPlan(t, g, nil)
	if a := plans["capability.a"]; a.Status != StatusBuild || a.Recipe != "recipe.ra" {
		t.Fatalf("a should resolve through b's acyclic recipe: %+v", a)
	}
	if b := plans["capability.b"]; b.Status != StatusBuild || b.Recipe != "recipe.rb2" {
		t.Fatalf("b should use its acyclic recipe: %+v", b)
	}
}

func TestResolutionPrefersAdmittedVersion(t *testing.T) {
	g := capProject(t, []string{"c"}, [][]string{{"r", "c", "1"}})
	pin := &admit.Admitted{Ref: "oci-layout:reg@sha256:" + strings.Repeat("a", 64), Digest: digest.Digest("sha256:" + digestHex("a"))}
	p, err := Make(g, Options{Admitted: func(n *graph.Node) (*admit.Admitted, string, error) { return pin, "", nil }})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Capabilities[0]
	if c.Status != StatusRegistry || c.Pinned != pin || c.Recipes[0].Status != StatusAlternative {
		t.Fatalf("want the admitted version pinned: %+v", c)
	}
	for _, n := range p.Nodes {
		if strings.HasPrefix(n.Address, "recipe.r") && n.Status != StatusAlternative {
			t.Errorf("%s is %s; nothing should be built", n.Address, n.Status)
		}
	}
	if p.Summary.Run != 0 || p.Summary.Registry != 1 {
		t.Errorf("summary %+v", p.Summary)
	}
}

func digestHex(c string) string { return strings.Repeat(c, 64) }

// A recipe that is not chosen is marked with its package and steps, and nothing else: not a
// recipe whose name it begins (recipe.r-x sorts between recipe.r and recipe.r.package). A
// seed that only such recipes use is not built; one that a chosen recipe uses is.
func TestUnchosenRecipesAndTheirSeeds(t *testing.T) {
	tool := graphtest.SeedFile(t, "x")
	recipe := func(name, cost, seed string) string {
		return fmt.Sprintf(`recipe %q {
  provides = capability.c
  cost     = %s
  step "build" {
    image   = seed.%s
    run     = ["sh"]
    outputs = ["/out/x"]
  }
  package { files = { "/bin/c" = step.build.output["/out/x"] } }
}
`, name, cost, seed)
	}
	src := fmt.Sprintf("seed \"b\" {\n  layer { files = { \"/bin/sh\" = host_file(%q) } }\n}\n", tool) +
		fmt.Sprintf("seed \"spare\" {\n  layer { files = { \"/bin/sh\" = host_file(%q) } }\n}\n", tool) +
		"capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/bin/c\"] }\n}\n" +
		recipe("r", "5", "b") + recipe("r-x", "1", "b") + recipe("r2", "9", "spare")
	dir := t.TempDir()
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644))
	p := planOf(t, graphtest.LoadConfig(t, dir))
	want := map[string]string{
		"recipe.r-x": StatusBuild, "recipe.r-x.package": StatusBuild, "recipe.r-x.step.build": StatusRun,
		"recipe.r": StatusAlternative, "recipe.r.package": StatusAlternative, "recipe.r.step.build": StatusAlternative,
		"recipe.r2": StatusAlternative, "recipe.r2.package": StatusAlternative, "recipe.r2.step.build": StatusAlternative,
		"seed.b": StatusBuild, "seed.spare": StatusAlternative, "capability.c": StatusBuild,
	}
	for _, n := range p.Nodes {
		if w, ok := want[n.Address]; !ok {
			t.Errorf("unexpected node %s", n.Address)
		} else if n.Status != w {
			t.Errorf("%s is %s, want %s", n.Address, n.Status, w)
		}
		delete(want, n.Address)
	}
	for a := range want {
		t.Errorf("no node %s", a)
	}
}

// reconstructProject is a capability with a reconstruct block and no recipe, a step that
// mounts it, and a recipe of another capability that needs it.
func reconstructProject(t *testing.T) *graph.Graph {
	t.Helper()
	tool := graphtest.SeedFile(t, "x")
	src := fmt.Sprintf(`seed "b" {
  layer { files = { "/bin/sh" = host_file(%q) } }
}
seed "tools" {
  layer { files = { "/bin/sh" = host_file(%q) } }
  env = { T = "1" }
}
capability "c" {
  interface "cli" { entrypoint = ["/bin/c"] }
  reconstruct {
    builder {
      image   = seed.tools
      run     = ["sh", "/job/x"]
      outputs = ["/out/c"]
    }
    package {
      base  = seed.b
      files = { "/bin/c" = "/out/c" }
    }
    budget { candidates = 2 }
  }
}
capability "d" {
  interface "cli" { entrypoint = ["/bin/d"] }
}
recipe "d" {
  provides = capability.d
  step "build" {
    image   = seed.b
    mounts  = { "/c" = capability.c }
    run     = ["sh"]
    outputs = ["/out/x"]
  }
  package { files = { "/bin/d" = step.build.output["/out/x"] } }
}
step "use" {
  image  = seed.b
  mounts = { "/c" = capability.c }
  run    = ["/c/bin/c"]
}
`, tool, tool)
	return compileProject(t, src)
}

// A capability with no admitted version and no recipe, that has a reconstruct block, is to
// be reconstructed: reachable, not ready, with its budget; what needs it is not missing.
// Pinned, its builder's seed is not needed.
func TestReconstructIsReachableNotReady(t *testing.T) {
	g := reconstructProject(t)
	p, err := Make(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, n := range p.Nodes {
		status[n.Address] = n.Status
	}
	var c, d *Capability
	for _, cp := range p.Capabilities {
		switch cp.Address {
		case "capability.c":
			c = cp
		case "capability.d":
			d = cp
		}
	}
	if c.Status != StatusReconstruct || !c.Reachable || c.Ready || c.Reconstruct == nil || c.Reconstruct.Candidates != 2 ||
		c.Reconstruct.Image != "seed.tools" || c.Reconstruct.Builder != "capability.c.reconstruct.builder" {
		t.Fatalf("capability.c: %+v %+v", c, c.Reconstruct)
	}
	if !strings.Contains(c.Reason, "to be reconstructed by its builder (budget: 2 candidates)") {
		t.Errorf("reason %q", c.Reason)
	}
	if d.Status != StatusBuild || !d.Reachable || d.Ready {
		t.Errorf("capability.d needs c: %+v", d)
	}
	if status["step.use"] != StatusRun || status["seed.tools"] != StatusBuild || p.Summary.Reconstruct != 1 || p.Summary.Missing != 0 {
		t.Errorf("statuses %v, summary %+v", status, p.Summary)
	}
	var text strings.Builder
	p.WriteText(&text)
	for _, want := range []string{"~ capability.c", "reconstruct ", "reachable, not ready: capability.c.reconstruct.builder runs sh /job/x on seed.tools, at most 2 candidates", "1 to reconstruct, 0 missing."} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("plan text lacks %q:\n%s", want, text.String())
		}
	}

	pinned := func(n *graph.Node) (*admit.Admitted, string, error) {
		if n.Address == "capability.c" {
			return &admit.Admitted{Ref: "r@sha256:1"}, "", nil
		}
		return nil, "", nil
	}
	p, err = Make(g, Options{Admitted: pinned})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range p.Nodes {
		if n.Address == "seed.tools" && n.Status != StatusAlternative {
			t.Errorf("pinned: seed.tools is %s, want alternative", n.Status)
		}
	}
}

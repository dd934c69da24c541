package run_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/run/runtest"
	"github.com/foundry-build/foundry/engine/state"
)

// hostSeed is a seed for steps the local executor runs on the host: its env is theirs.
const hostSeed = `
seed "host" {
  layer { files = { "/marker" = "host" } }
  env = { PATH = "/usr/bin:/bin" }
}
`

// A failed step's users are skipped, and so are theirs, each once, naming the step that
// failed (not the skipped one in between); what does not need it runs. The skipped steps
// are recorded as such, with why.
func TestSkipPropagatesTheRootFailure(t *testing.T) {
	p := runtest.Write(t, map[string]string{"main.hcl": hostSeed + `
step "fails" {
  image   = seed.host
  run     = ["sh", "-c", "echo it broke >&2; exit 3"]
  outputs = ["/out/o"]
}
step "user" {
  image   = seed.host
  mounts  = { "/in" = step.fails.output["/out/o"] }
  run     = ["true"]
  outputs = ["/out/o"]
}
step "user-of-user" {
  image   = seed.host
  mounts  = { "/in" = step.user.output["/out/o"] }
  run     = ["true"]
}
step "other" {
  image   = seed.host
  run     = ["sh", "-c", "echo ok > $FOUNDRY_OUT/o"]
  outputs = ["/out/o"]
}
`})
	a := p.Apply(t, context.Background(), run.Options{})
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	res := a.Result
	if len(res.Failed) != 1 || res.Failed[0].Node != "step.fails" || res.Failed[0].ExitCode != 3 || !slices.Contains(res.Failed[0].LogTail, "it broke") {
		t.Fatalf("failed %+v, want step.fails exiting 3 with its log's tail", res.Failed)
	}
	if want := []string{"step.user", "step.user-of-user"}; !slices.Equal(res.Skipped, want) {
		t.Errorf("skipped %v, want %v", res.Skipped, want)
	}
	if res.Executed != 1 || res.Built != 1 || res.Cached != 0 {
		t.Errorf("executed %d, built %d, cached %d; want step.other run and the seed built", res.Executed, res.Built, res.Cached)
	}
	for _, node := range []string{"step.user", "step.user-of-user"} {
		ev := a.Of("node_skipped", node)
		if len(ev) != 1 || ev[0].Message != "needs step.fails, which failed" {
			t.Errorf("%s: node_skipped events %+v, want one naming step.fails", node, ev)
		}
	}
	ws, err := p.Workspace()
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	nodes, err := ws.State.Nodes(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]state.Node{}
	for _, n := range nodes {
		got[n.Address] = n
	}
	for addr, want := range map[string]state.NodeStatus{"step.fails": state.NodeFailed, "step.user": state.NodeSkipped,
		"step.user-of-user": state.NodeSkipped, "step.other": state.NodeDone} {
		if got[addr].Status != want {
			t.Errorf("%s recorded %q, want %q", addr, got[addr].Status, want)
		}
	}
	if e := got["step.user-of-user"].Error; e != "needs step.fails, which failed" {
		t.Errorf("step.user-of-user recorded as skipped because %q", e)
	}

	// Again: what succeeded is cached, what failed runs again and fails again.
	a = p.Apply(t, context.Background(), run.Options{})
	if res := a.Result; res.Cached != 1 || res.Executed != 0 || len(res.Failed) != 1 || len(res.Skipped) != 2 {
		t.Errorf("second apply: cached %d, executed %d, failed %d, skipped %v", res.Cached, res.Executed, len(res.Failed), res.Skipped)
	}
}

// A product whose check failed is not delivered: it is skipped and says so. (The local
// executor refuses the check, which mounts what is delivered: a failure all the same.)
func TestProductSkippedWhenItsCheckFails(t *testing.T) {
	p := runtest.Write(t, map[string]string{"main.hcl": hostSeed + `
product "app" {
  check "works" {
    image  = seed.host
    mounts = { "/README" = "hello" }
    run    = ["sh", "-c", "exit 1"]
  }
  deliver {
    to    = "dir:out"
    files = { "/README" = "hello" }
  }
}
`})
	a := p.Apply(t, context.Background(), run.Options{})
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	if !slices.Equal(a.Result.Skipped, []string{"product.app"}) || len(a.Result.Delivered) != 0 {
		t.Fatalf("skipped %v, delivered %v; want product.app skipped, nothing delivered", a.Result.Skipped, a.Result.Delivered)
	}
	ev := a.Of("node_skipped", "product.app")
	if len(ev) != 1 || !strings.HasPrefix(ev[0].Message, "not delivered: needs product.app.check.works") {
		t.Errorf("node_skipped %+v", ev)
	}
}

// capabilityProject is a capability whose candidates are told apart by their package's
// base seed: the entrypoint, a host shell, echoes its input when MODE is good and answers
// [0] otherwise. recipes are appended to it.
func capabilityProject(t *testing.T, recipes string) *runtest.Project {
	return runtest.Write(t, map[string]string{
		"schemas/ints.json": `{"type":"array","items":{"type":"integer"}}`,
		"cases/pair.json":   `{"input":[1,2],"output":[1,2]}`,
		"sealed/one.json":   `{"input":[5],"output":[5]}`,
		"main.hcl": hostSeed + `
seed "good" {
  layer { files = { "/marker" = "good" } }
  env = { PATH = "/usr/bin:/bin", MODE = "good" }
}
seed "bad" {
  layer { files = { "/marker" = "bad" } }
  env = { PATH = "/usr/bin:/bin", MODE = "bad" }
}
capability "echo" {
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/sh", "-c", "if [ \"$MODE\" = good ]; then cat; else echo '[0]'; fi"]
    input      = jsonschema("schemas/ints.json")
    output     = jsonschema("schemas/ints.json")
  }
  suite "dev" { cases = "cases/*.json" }
  suite "sealed" { cases = "sealed/*.json" }
}
product "uses-echo" {
  requires = [capability.echo]
}
` + recipes})
}

// recipeBlock is a recipe of capability.echo of the given cost whose step runs script and
// whose package lays its output on base.
func recipeBlock(name string, cost int, base, script string) string {
	return `
recipe "` + name + `" {
  provides = capability.echo
  cost     = ` + strconv.Itoa(cost) + `
  step "build" {
    image   = seed.host
    run     = ["sh", "-c", "` + script + `"]
    outputs = ["/out/x"]
  }
  package {
    base  = seed.` + base + `
    files = { "/x" = step.build.output["/out/x"] }
  }
}
`
}

// Recipes are tried in the plan's order: one that does not build and one whose candidate
// fails its dev case are each rejected with why, and the next is tried, until one passes
// its suites, and none after it is built. What the local executor built is never admitted
// (invariant 3: its provenance says isolation none), so the capability then fails with
// why, and what needs it is skipped.
func TestRecipesFallThroughToTheFirstThatPasses(t *testing.T) {
	p := capabilityProject(t, recipeBlock("a-broken", 1, "good", "exit 2")+
		recipeBlock("b-wrong", 2, "bad", "echo b > $FOUNDRY_OUT/x")+
		recipeBlock("c-right", 3, "good", "echo c > $FOUNDRY_OUT/x")+
		recipeBlock("d-unused", 4, "good", "echo d > $FOUNDRY_OUT/x"))
	a := p.Apply(t, context.Background(), run.Options{})
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	var tried []string
	for _, e := range a.Of("candidate_rejected", "capability.echo") {
		tried = append(tried, e.Recipe+" "+e.Suite)
	}
	if want := []string{"recipe.a-broken ", "recipe.b-wrong dev"}; !slices.Equal(tried, want) {
		t.Fatalf("rejections %q, want %q", tried, want)
	}
	rej := a.Of("candidate_rejected", "capability.echo")
	if !strings.Contains(rej[0].Message, "did not build: recipe.a-broken.step.build: exited with code 2") ||
		!strings.Contains(rej[1].Message, "got:      [0]") {
		t.Errorf("rejections say %q and %q", rej[0].Message, rej[1].Message)
	}
	var passed []string
	for _, e := range a.Of("suite_evaluated", "capability.echo") {
		if e.Recipe == "recipe.c-right" && e.Passed != nil && *e.Passed {
			passed = append(passed, e.Suite)
		}
	}
	if !slices.Equal(passed, []string{"dev", "sealed"}) {
		t.Errorf("recipe.c-right passed %v, want dev and sealed", passed)
	}
	for _, e := range a.Events {
		if e.Type == "node_started" && strings.HasPrefix(e.Node, "recipe.d-unused") {
			t.Errorf("%s ran after an earlier recipe passed", e.Node)
		}
	}
	var failed []string
	for _, f := range a.Result.Failed {
		failed = append(failed, f.Node)
		if f.Node == "capability.echo" && !strings.Contains(f.Reason, `builder "https://foundry.dev/builder/local@v1?isolation=none" is not allowed`) {
			t.Errorf("capability.echo failed because %q, want its unsandboxed build refused", f.Reason)
		}
	}
	// The recipe that did not build is reported with its step's failure too.
	if want := []string{"capability.echo", "recipe.a-broken.step.build"}; !slices.Equal(failed, want) {
		t.Errorf("failed %v, want %v", failed, want)
	}
	// Skipped: what needs the capability, and what of a-broken needs its step.
	if len(a.Of("capability_admitted", "")) != 0 || !slices.Equal(a.Result.Skipped, []string{"product.uses-echo", "recipe.a-broken", "recipe.a-broken.package"}) {
		t.Errorf("admitted %v, skipped %v", a.Of("capability_admitted", ""), a.Result.Skipped)
	}
}

// When no recipe passes, the capability fails with every rejection, and what needs it is
// skipped.
func TestNoRecipeAdmitted(t *testing.T) {
	p := capabilityProject(t, recipeBlock("only", 1, "bad", "echo x > $FOUNDRY_OUT/x"))
	a := p.Apply(t, context.Background(), run.Options{})
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	f := a.Result.Failed
	if len(f) != 1 || f[0].Node != "capability.echo" || !strings.Contains(f[0].Reason, "no recipe was admitted") || !strings.Contains(f[0].Reason, "recipe.only: failed the dev suite") {
		t.Fatalf("failed %+v", f)
	}
	if !slices.Equal(a.Result.Skipped, []string{"product.uses-echo"}) {
		t.Errorf("skipped %v", a.Result.Skipped)
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// matrixProject has a step with for_each, one with count and a module with a step.
const matrixProject = `
seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/cat" = "busybox", "/bin/echo" = "busybox" }
  }
  env = { PATH = "/bin" }
}
step "build" {
  for_each = toset(["a", "b"])
  image    = seed.bb
  run      = ["sh", "-c", "echo ${each.key} > /out/o"]
  outputs  = ["/out/o"]
}
step "shard" {
  count   = 2
  image   = seed.bb
  mounts  = { "/in" = step.build["a"].output["/out/o"] }
  run     = ["sh", "-c", "cat /in > /out/o"]
  outputs = ["/out/o"]
}
module "m" {
  source = "./m"
  image  = seed.bb
  in     = step.build["b"].output["/out/o"]
}
`

const matrixModule = `
variable "image" {}
variable "in" {}
step "use" {
  image   = var.image
  mounts  = { "/in" = var.in }
  run     = ["sh", "-c", "cat /in > /out/o"]
  outputs = ["/out/o"]
}
`

func writeMatrix(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "m"), 0o755)
	for p, s := range map[string]string{"main.hcl": matrixProject, "m/main.hcl": matrixModule} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type planNodeJSON struct {
	Address, Status, Reason, Block, Key, Module string
	Index                                       *int
}

func planNodes(t *testing.T, dir string, args ...string) (map[string]planNodeJSON, []string) {
	t.Helper()
	code, out, errs := foundry(t, dir, append([]string{"plan", "-json"}, args...)...)
	if code != 0 {
		t.Fatalf("plan -json %v: exit %d\n%s", args, code, errs)
	}
	var p struct {
		Targets []string
		Nodes   []planNodeJSON
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	m := map[string]planNodeJSON{}
	for _, n := range p.Nodes {
		m[n.Address] = n
	}
	return m, p.Targets
}

// A plan groups instances under their block and nodes under their module; -target keeps a
// node, a block's instances or a module, and what they need, and says the plan is partial.
func TestTargetSelectsWhatItNeeds(t *testing.T) {
	needSandbox(t)
	dir := writeMatrix(t)
	all, targets := planNodes(t, dir)
	if len(all) != 6 || targets != nil {
		t.Fatalf("whole plan: %d nodes, targets %v", len(all), targets)
	}
	if n := all[`step.build["b"]`]; n.Block != "step.build" || n.Key != "b" || n.Index != nil {
		t.Errorf(`step.build["b"]: %+v`, n)
	}
	if n := all["step.shard[1]"]; n.Block != "step.shard" || n.Index == nil || *n.Index != 1 {
		t.Errorf("step.shard[1]: %+v", n)
	}
	if n := all["module.m.step.use"]; n.Module != "module.m" || n.Block != "" {
		t.Errorf("module.m.step.use: %+v", n)
	}

	for _, c := range []struct {
		target string
		want   []string
	}{
		{`step.shard[0]`, []string{"seed.bb", `step.build["a"]`, "step.shard[0]"}},
		{"step.shard", []string{"seed.bb", `step.build["a"]`, "step.shard[0]", "step.shard[1]"}},
		{"module.m", []string{"seed.bb", `step.build["b"]`, "module.m.step.use"}},
	} {
		got, targets := planNodes(t, dir, "-target", c.target)
		if len(got) != len(c.want) || len(targets) != 1 || targets[0] != c.target {
			t.Errorf("-target %s: %d nodes %v, targets %v; want %v", c.target, len(got), keysOf(got), targets, c.want)
			continue
		}
		for _, a := range c.want {
			if _, ok := got[a]; !ok {
				t.Errorf("-target %s: %s is missing from %v", c.target, a, keysOf(got))
			}
		}
	}
	code, out, _ := foundry(t, dir, "plan", "-target", "step.shard")
	if code != 0 || !strings.Contains(out, "Partial plan: only step.shard and what it needs") ||
		!strings.Contains(out, "step.shard (count, 2 instances)") || !strings.Contains(out, `step.build (for_each, 1 instance)`) {
		t.Errorf("text plan:\n%s", out)
	}
	if code, out, _ := foundry(t, dir, "plan"); code != 0 || !strings.Contains(out, "Modules\n  module.m\n    + module.m.step.use") || strings.Contains(out, "Partial") {
		t.Errorf("whole text plan:\n%s", out)
	}
	if code, _, errs := foundry(t, dir, "plan", "-target", "step.sahrd"); code != 1 || !strings.Contains(errs, "-target step.sahrd: no node or block step.sahrd in this project (did you mean step.shard?)") {
		t.Errorf("a target that names nothing: exit %d: %s", code, errs)
	}
	code, out, _ = foundry(t, dir, "graph", "-target", "module.m")
	if code != 0 || !strings.Contains(out, `label="module.m"`) || strings.Contains(out, "step.shard") {
		t.Errorf("graph -target module.m:\n%s", out)
	}

	// apply -target runs only that; a saved partial plan stays partial.
	r := apply(t, dir, nil, "-target", `step.build["a"]`)
	if r.code != 0 || !sameSet(r.executed, `step.build["a"]`) {
		t.Fatalf(`apply -target step.build["a"]: exit %d, executed %v`, r.code, r.executed)
	}
	if code, _, errs := foundry(t, dir, "plan", "-target", "module.m", "-out", "m.plan"); code != 0 {
		t.Fatal(errs)
	}
	r = apply(t, dir, nil, filepath.Join(dir, "m.plan"))
	if r.code != 0 || !sameSet(r.executed, `step.build["b"]`, "module.m.step.use") {
		t.Fatalf("apply of a saved partial plan: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	r = apply(t, dir, nil)
	if r.code != 0 || !sameSet(r.executed, "step.shard[0]", "step.shard[1]") {
		t.Fatalf("the rest: executed %v", r.executed)
	}
}

// -replace runs a cached step again; what uses it follows the cache rules: the same bytes
// leave its users cached.
func TestReplaceRunsACachedStepAgain(t *testing.T) {
	needSandbox(t)
	dir := writeMatrix(t)
	if r := apply(t, dir, nil); r.code != 0 || len(r.executed) != 5 {
		t.Fatalf("first apply: exit %d, executed %v", r.code, r.executed)
	}
	got, _ := planNodes(t, dir, "-replace", "step.build")
	for _, a := range []string{`step.build["a"]`, `step.build["b"]`} {
		if got[a].Status != "run" || !strings.Contains(got[a].Reason, "-replace") {
			t.Errorf("planned %s: %+v", a, got[a])
		}
	}
	if n := got["step.shard[0]"]; n.Status != "run" || !strings.Contains(n.Reason, "runs unless its inputs come out unchanged") {
		t.Errorf("a user of a replaced step: %+v", n)
	}
	r := apply(t, dir, nil, "-replace", `step.build["a"]`)
	if r.code != 0 || !sameSet(r.executed, `step.build["a"]`) || len(r.cached) != 4 {
		t.Fatalf(`apply -replace step.build["a"]: executed %v, cached %v`, r.executed, r.cached)
	}
	if code, _, errs := foundry(t, dir, "plan", "-replace", "seed.bb"); code != 1 || !strings.Contains(errs, "names no step or check") {
		t.Errorf("-replace of a seed: exit %d: %s", code, errs)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

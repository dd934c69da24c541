package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sortProject is a list, its sorted unique lines (sort -u), and a report on those. The
// list's words come from a variable, so reordering them changes the list's definition
// and output but not the sorted lines.
const sortProject = `
variable "words" {
  default = ["b", "a", "b"]
}
seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/sort" = "busybox", "/bin/wc" = "busybox", "/bin/printf" = "busybox" }
  }
  env = { PATH = "/bin" }
}
step "list" {
  image   = seed.bb
  run     = ["sh", "-c", "printf '%s\\n' ${join(" ", var.words)} > /out/list"]
  outputs = ["/out/list"]
}
step "unique" {
  image   = seed.bb
  mounts  = { "/in/list" = step.list.output["/out/list"] }
  run     = ["sh", "-c", "sort -u /in/list > /out/sorted"]
  outputs = ["/out/sorted"]
}
step "report" {
  image   = seed.bb
  mounts  = { "/in/sorted" = step.unique.output["/out/sorted"] }
  run     = ["sh", "-c", "wc -l < /in/sorted > /out/count"]
  outputs = ["/out/count"]
}
`

// Content keys, end to end: a step is cached by what it mounts, not by what made it. With
// the list reordered, the list and its sort -u run again; sort -u makes the same bytes, so
// the report stays cached, and explain names the input whose producer ran to no change.
func TestUnchangedOutputLeavesDependentsCached(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(sortProject), 0o644); err != nil {
		t.Fatal(err)
	}
	all := []string{"step.list", "step.unique", "step.report"}
	if r := apply(t, dir, nil); r.code != 0 || !sameSet(r.executed, all...) {
		t.Fatalf("first apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	reordered := []string{"-var", `words=["a","b","b"]`}

	code, out, errs := foundry(t, dir, append([]string{"plan", "-json"}, reordered...)...)
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, errs)
	}
	var plan struct {
		Nodes []struct{ Address, Status, Reason string }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"step.list":   "run|",
		"step.unique": "run|runs unless its inputs come out unchanged: it mounts what step.list makes in this apply",
		"step.report": "run|runs unless its inputs come out unchanged: it mounts what step.unique makes in this apply",
	}
	for _, n := range plan.Nodes {
		if w, ok := want[n.Address]; ok && n.Status+"|"+n.Reason != w {
			t.Errorf("plan of the reordered list: %s is %s|%s, want %s", n.Address, n.Status, n.Reason, w)
		}
	}

	r := apply(t, dir, nil, reordered...)
	if r.code != 0 || !sameSet(r.executed, "step.list", "step.unique") || !sameSet(r.cached, "step.report") {
		t.Fatalf("reordered list: exit %d, executed %v, cached %v; want the report cached\n%s", r.code, r.executed, r.cached, r.stderr)
	}
	code, out, _ = foundry(t, dir, "output", "step.report", "/out/count")
	if code != 0 || strings.TrimSpace(out) != "2" {
		t.Fatalf("the cached report: exit %d, %q", code, out)
	}
	code, out, errs = foundry(t, dir, append(append([]string{"explain"}, reordered...), "step.report")...)
	if code != 0 || !strings.Contains(out, "cached:") ||
		!strings.Contains(out, "/in/sorted: step.unique ran again in run ") || !strings.Contains(out, "its output /out/sorted came out unchanged") {
		t.Fatalf("explain must name the input whose producer ran to no change: exit %d\n%s%s", code, out, errs)
	}

	// Other bytes do reach the report.
	r = apply(t, dir, nil, "-var", `words=["c","a"]`)
	if r.code != 0 || !sameSet(r.executed, all...) {
		t.Fatalf("a new word: executed %v, cached %v", r.executed, r.cached)
	}
}

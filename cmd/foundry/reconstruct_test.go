package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newReconstructFixture copies testdata/reconstruct with the given candidates budget: a
// capability with no recipe whose builder first proposes a sorter that drops duplicates,
// then, from the counterexample in /job, a correct one; step.use-sorter mounts it. edits
// are pairs of text to replace in main.hcl and its replacement.
func newReconstructFixture(t *testing.T, candidates string, edits ...string) string {
	t.Helper()
	needSandbox(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "reconstruct"), dir)
	tmpl, err := os.ReadFile(filepath.Join(dir, "main.hcl.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	hcl := strings.NewReplacer(append([]string{"CANDIDATES", candidates}, edits...)...).Replace(string(tmpl))
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// saysAll fails the test for each of wants that text, the output of what, does not hold.
func saysAll(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// failedApply applies dir with plain progress, and fails the test if the apply succeeds.
func failedApply(t *testing.T, dir string) applyRun {
	t.Helper()
	r := apply(t, dir, nil, "-progress", "plain")
	if r.code == 0 {
		t.Fatalf("apply succeeded:\n%s", r.stderr)
	}
	return r
}

// planCapability is the plan's entry for capability addr, from plan -json.
func planCapability(t *testing.T, dir, addr string) map[string]any {
	t.Helper()
	code, out, errs := foundry(t, dir, "plan", "-json")
	if code != 0 {
		t.Fatalf("plan -json: exit %d\n%s", code, errs)
	}
	var p struct{ Capabilities []map[string]any }
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Capabilities {
		if c["address"] == addr {
			return c
		}
	}
	t.Fatalf("no %s in the plan", addr)
	return nil
}

// A capability with no recipe is reconstructed in one apply: round 1's candidate fails the
// sealed suite and its counterexample goes to the builder; round 2's is admitted and
// published, and the step that mounts it runs in the same apply. The next apply and plan pin
// it from the registry and nothing runs.
func TestReconstructionAdmittedAfterRepair(t *testing.T) {
	dir := newReconstructFixture(t, "3")
	c := planCapability(t, dir, "capability.sorter")
	rc, _ := c["reconstruct"].(map[string]any)
	if c["status"] != "reconstruct" || c["reachable"] != true || c["ready"] != false || rc == nil || rc["candidates"] != 3.0 {
		t.Fatalf("planned: %v", c)
	}
	if code, out, _ := foundry(t, dir, "plan"); code != 0 || !strings.Contains(out, "~ capability.sorter") || !strings.Contains(out, "+ step.use-sorter") ||
		!strings.Contains(out, "1 to reconstruct, 0 missing.") {
		t.Fatalf("plan text: exit %d\n%s", code, out)
	}

	first := apply(t, dir, nil, "-progress", "plain")
	if first.code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", first.code, first.stdout, first.stderr)
	}
	saysAll(t, "apply", first.stderr,
		"RND capability.sorter: round 1 of 3: the builder proposes a candidate from 0 counterexample(s)",
		"reconstruct round 1: failed the sealed suite",
		"counterexample sealed/dup.json\n      input:    [2,1,2]\n      expected: [1,2,2]\n      got:      [1,2]",
		"RND capability.sorter: round 2 of 3: the builder proposes a candidate from 1 counterexample(s)",
		"eval capability.sorter: repair suite: 1 of 1 cases passed", // the disclosed case
		"ADM capability.sorter: reconstruct round 2 admitted as",
		"ok  step.use-sorter")
	if i, j := strings.Index(first.stderr, "ADM capability.sorter"), strings.Index(first.stderr, "ok  step.use-sorter"); i < 0 || j < i {
		t.Errorf("the step did not run after the admission")
	}
	code, out, _ := foundry(t, dir, "output", "step.use-sorter", "/out/sorted.json")
	if code != 0 || strings.TrimSpace(out) != "[1,3,3]" {
		t.Errorf("step.use-sorter made %q (exit %d)", out, code)
	}
	// Round 2's builder read the counterexample in /job.
	if code, out, _ := foundry(t, dir, "logs", "capability.sorter.reconstruct.builder"); code != 0 || !strings.Contains(out, `"input": "[2,1,2]"`) {
		t.Errorf("builder log (exit %d):\n%s", code, out)
	}

	if c := planCapability(t, dir, "capability.sorter"); c["status"] != "registry" {
		t.Fatalf("after the admission the plan does not pin it: %v", c)
	}
	second := apply(t, dir, nil)
	if second.code != 0 || len(second.executed) != 0 || !slices.Contains(second.cached, "step.use-sorter") ||
		!strings.Contains(second.stderr, `"type":"capability_pinned"`) || strings.Contains(second.stderr, "reconstruct_round") {
		t.Fatalf("second apply: exit %d, executed %v, cached %v\n%s", second.code, second.executed, second.cached, second.stderr)
	}
}

// With its budget spent and no candidate admitted, the capability fails with the smallest
// counterexample and the rounds tried, and what needs it is skipped.
func TestReconstructionExhausted(t *testing.T) {
	dir := newReconstructFixture(t, "1")
	r := failedApply(t, dir)
	saysAll(t, "apply", r.stderr,
		"EXH capability.sorter: reconstruction exhausted its budget: 1 of 1 candidates tried, none admitted",
		"Error: capability.sorter: reconstruction exhausted its budget: 1 of 1 candidates tried, none admitted\n  smallest counterexample (reconstruct round 1, sealed suite): sealed/dup.json\n    input:    [2,1,2]\n    expected: [1,2,2]\n    got:      [1,2]",
		"reconstruct round 1: failed the sealed suite",
		"step.use-sorter skipped")
	if strings.Contains(r.stderr, "round 2") {
		t.Errorf("a second round ran with a budget of 1:\n%s", r.stderr)
	}
	if c := planCapability(t, dir, "capability.sorter"); c["status"] != "reconstruct" {
		t.Errorf("an exhausted reconstruction admitted something: %v", c)
	}
}

// A builder that fails spends its round: nothing is evaluated, and the report says so.
func TestReconstructionBuilderFailureSpendsTheRound(t *testing.T) {
	r := failedApply(t, newReconstructFixture(t, "2", `"/src/propose.sh"`, `"/src/absent.sh"`))
	saysAll(t, "apply", r.stderr,
		"reconstruct round 1: did not build: capability.sorter.reconstruct.builder: exited with code",
		"reconstruct round 2: did not build:",
		"Error: capability.sorter: reconstruction exhausted its budget: 2 of 2 candidates tried, none admitted\n  reconstruct round 1: did not build")
	if strings.Contains(r.stderr, "eval capability.sorter") || strings.Contains(r.stderr, "smallest counterexample") {
		t.Errorf("a failed builder's round was evaluated:\n%s", r.stderr)
	}
}

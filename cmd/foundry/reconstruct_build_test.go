package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/workspace"
)

// buildEdits turn testdata/reconstruct's builder into one that proposes source
// (builder/template.sh: a template and its sort flags), and add a build that turns the
// proposal, read at /proposal, into /out/sorter with sed: the package takes the build's
// output. buildRun is the build's command.
func buildEdits(buildRun string) []string {
	return []string{
		`"/src/propose.sh"`, `"/src/template.sh"`,
		"outputs = [\"/out/sorter\"]\n      limits { time = \"60s\" }\n    }\n",
		"outputs = [\"/out/sorter.in\", \"/out/flags\"]\n      limits { time = \"60s\" }\n    }\n" +
			"    build {\n      image   = seed.bb\n      run     = [\"sh\", \"-c\", " + buildRun + "]\n      outputs = [\"/out/sorter\"]\n      limits { time = \"30s\" }\n    }\n",
	}
}

// sedBuild fills the template with the flags and says what it built.
const sedBuild = `"sed \"s/@FLAGS@/$(cat /proposal/flags)/\" /proposal/sorter.in > /out/sorter && chmod 755 /out/sorter && echo built with $(cat /proposal/flags) >&2"`

// A builder proposes source and the reconstruct block's build turns it into the tool: round
// 1's candidate (built from flags that drop duplicates) fails the sealed suite, round 2's is
// admitted; the plan shows the build, jobs show reports both runs' logs and the build's
// usage, the admission names the build among its inputs, and the next plan pins the
// capability with nothing rebuilt.
func TestReconstructionBuildStepAdmittedAfterRepair(t *testing.T) {
	dir := newReconstructFixture(t, "3", buildEdits(sedBuild)...)
	c := planCapability(t, dir, "capability.sorter")
	rc, _ := c["reconstruct"].(map[string]any)
	b, _ := rc["build"].(map[string]any)
	if c["status"] != "reconstruct" || b == nil || b["address"] != "capability.sorter.reconstruct.build" || b["image"] != "seed.bb" {
		t.Fatalf("planned: %v", c)
	}
	if code, out, _ := foundry(t, dir, "plan"); code != 0 || !strings.Contains(out, "each proposal is built: capability.sorter.reconstruct.build runs sh -c ") ||
		!strings.Contains(out, "over /proposal, and the candidate is packaged from /out/sorter") {
		t.Fatalf("plan text: exit %d\n%s", code, out)
	}

	first := apply(t, dir, nil, "-progress", "plain")
	if first.code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", first.code, first.stdout, first.stderr)
	}
	saysAll(t, "apply", first.stderr,
		"reconstruct round 1: failed the sealed suite",
		"counterexample sealed/dup.json\n      input:    [2,1,2]\n      expected: [1,2,2]\n      got:      [1,2]",
		"ADM capability.sorter: reconstruct round 2 admitted as",
		"ok  step.use-sorter")
	if code, out, _ := foundry(t, dir, "output", "step.use-sorter", "/out/sorted.json"); code != 0 || strings.TrimSpace(out) != "[1,3,3]" {
		t.Errorf("step.use-sorter made %q (exit %d)", out, code)
	}

	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 {
		t.Fatalf("job: %+v", j)
	}
	for i, r := range j.RoundList {
		// The build's run is charged with the round's: its wall time, CPU and output.
		if r.Used.BuildWall <= 0 || r.Used.BuilderWall <= 0 || r.Used.CPU <= 0 || r.Used.Wall < r.Used.BuilderWall+r.Used.BuildWall+r.Used.CasesWall {
			t.Errorf("round %d usage: %+v", r.N, r.Used)
		}
		flags := []string{"-nu", "-n"}[i]
		if len(r.Logs) != 2 || r.Logs[0].Run != "builder" || r.Logs[1].Run != "build" ||
			!slices.Contains(r.Logs[0].StderrTail, "proposed a template with flags "+flags) || !slices.Contains(r.Logs[1].StderrTail, "built with "+flags) {
			t.Errorf("round %d logs: %+v", r.N, r.Logs)
		}
	}
	if code, out, _ := foundry(t, dir, "jobs", "show", j.ID); code != 0 || !strings.Contains(out, "    build      ran\n      stderr (its last 20 lines at most):\n        | built with -n\n") ||
		!strings.Contains(out, ", build ") {
		t.Errorf("jobs show (exit %d):\n%s", code, out)
	}
	// The admission's inputs hold the build's provenance (its subject the tool) beside the
	// builder's (the template and flags).
	if code, out, errs := foundry(t, dir, "verify", "-key", filepath.Join(dir, ".foundry", "keys", "signing.pub"), j.Admitted); code != 0 ||
		!strings.Contains(out, `subjects: "/out/sorter" sha256:`) || !strings.Contains(out, `subjects: "/out/flags" sha256:`) {
		t.Errorf("verify (exit %d):\n%s%s", code, out, errs)
	}

	if c := planCapability(t, dir, "capability.sorter"); c["status"] != "registry" {
		t.Fatalf("after the admission the plan does not pin it: %v", c)
	}
	second := apply(t, dir, nil)
	if second.code != 0 || len(second.executed) != 0 || strings.Contains(second.stderr, "reconstruct_round") {
		t.Fatalf("second apply: exit %d, executed %v\n%s", second.code, second.executed, second.stderr)
	}
}

// A build that fails over the proposal spends its round as a failing builder does: nothing
// is evaluated, the report says why, and jobs show has the build's log.
func TestReconstructionBuildFailureSpendsTheRound(t *testing.T) {
	dir := newReconstructFixture(t, "2", buildEdits(`"echo no compiler for $(ls /proposal | tr '\n' ' ') >&2; exit 4"`)...)
	r := failedApply(t, dir)
	saysAll(t, "apply", r.stderr,
		"reconstruct round 1: did not build: the build over the proposal failed: capability.sorter.reconstruct.build: exited with code 4\n",
		"no compiler for flags sorter.in",
		"reconstruct round 2: did not build: the build over the proposal failed",
		"): 2 of 2 candidates tried, none admitted\n  spent: 0 probe(s), ")
	if strings.Contains(r.stderr, "eval capability.sorter") {
		t.Errorf("a failed build's round was evaluated:\n%s", r.stderr)
	}
	j := showJobJSON(t, dir, "sorter")
	for _, rd := range j.RoundList {
		if rd.Status != "failed" || rd.Used.BuildWall <= 0 || len(rd.Logs) != 2 || rd.Logs[1].Run != "build" ||
			!strings.Contains(rd.Logs[1].Error, "exited with code 4") || !slices.Contains(rd.Logs[1].StderrTail, "no compiler for flags sorter.in") {
			t.Errorf("round %d: %+v", rd.N, rd)
		}
	}
	if code, out, _ := foundry(t, dir, "jobs", "show", j.ID); code != 0 || !strings.Contains(out, "    build      failed: capability.sorter.reconstruct.build: exited with code 4") {
		t.Errorf("jobs show (exit %d):\n%s", code, out)
	}
}

// An apply killed after round 2's build was recorded, before the round was charged, resumes
// the round: the builder's and the build's runs are taken from the action cache, not run
// again, and charged once from their records (the build's CPU and run time among them).
func TestReconstructionBuildResumesAfterKill(t *testing.T) {
	dir := newReconstructFixture(t, "3", buildEdits(sedBuild)...)
	killed := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + run.FaultAfterCachePut + ":capability.sorter.reconstruct.build#2"})
	if killed.code != -1 {
		t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", killed.code, killed.stderr)
	}
	resumed := apply(t, dir, nil)
	if resumed.code != 0 {
		t.Fatalf("resumed apply: exit %d\n%s", resumed.code, resumed.stderr)
	}
	count := func(r applyRun, typ string) (n int) {
		for _, line := range strings.Split(r.stderr, "\n") {
			var e struct{ Type, Node string }
			if json.Unmarshal([]byte(line), &e) == nil && e.Type == typ && e.Node == "capability.sorter.reconstruct.build" {
				n++
			}
		}
		return n
	}
	if a, b, c := count(killed, "node_started"), count(resumed, "node_started"), count(resumed, "node_cached"); a != 2 || b != 0 || c != 1 {
		t.Errorf("the build started %d times in the killed apply (want 2), %d in the resumed one (want 0), cached %d (want 1)", a, b, c)
	}
	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 || j.RoundList[1].Attempts != 2 {
		t.Fatalf("job after the resume: %+v", j)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	r2 := j.RoundList[1]
	rec, hit, err := ws.Cache.Lookup(context.Background(), r2.Builder)
	if err != nil || !hit {
		t.Fatalf("round 2's builder run is not in the cache: %v", err)
	}
	if u := r2.Used; u.BuildWall <= 0 || u.CPU <= rec.CPU || u.BuilderWall < rec.Duration || u.Wall < u.BuilderWall+u.BuildWall+u.CasesWall {
		t.Errorf("round 2 used %+v; want the builder's recorded run (CPU %v, %v) and the build's charged", u, rec.CPU, rec.Duration)
	}
	if len(r2.Logs) != 2 || !slices.Contains(r2.Logs[1].StderrTail, "built with -n") {
		t.Errorf("round 2's logs: %+v", r2.Logs)
	}
}

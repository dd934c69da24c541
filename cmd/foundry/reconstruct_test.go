package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/reconstruct"
	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
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

	// The job is recorded: two rounds, the first rejected with its counterexample, what
	// each used, and the outcome.
	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 || !strings.HasPrefix(j.Admitted, "oci-layout:") ||
		!slices.Equal(j.Waiting, []string{"step.use-sorter"}) {
		t.Fatalf("job: %+v", j)
	}
	r1, r2 := j.RoundList[0], j.RoundList[1]
	if r1.Status != "rejected" || r1.Failure == nil || r1.Failure.Case != "sealed/dup.json" || r1.Failure.Got != "[1,2]" || r2.Status != "admitted" || r2.Failure != nil {
		t.Errorf("rounds: %+v", j.RoundList)
	}
	// Each round ran the one dev case (round 2 the disclosed case too, in repair).
	if r1.Used.Probes != 1 || r2.Used.Probes != 2 || j.Used.Probes != 3 || r1.Used.Written == 0 || r1.Used.CPU <= 0 || r1.Used.PeakMemory <= 0 || r1.Used.BuilderWall <= 0 || r1.Used.CasesWall <= 0 || r1.Used.Wall < r1.Used.BuilderWall+r1.Used.CasesWall {
		t.Errorf("usage: job %+v, rounds %+v / %+v", j.Used, r1.Used, r2.Used)
	}
	if code, out, _ := foundry(t, dir, "jobs"); code != 0 || !strings.Contains(out, j.ID+"  admitted    capability.sorter") || !strings.Contains(out, "3/20 probes") {
		t.Errorf("jobs (exit %d):\n%s", code, out)
	}
	if code, out, _ := foundry(t, dir, "jobs", "show", j.ID[:8]); code != 0 ||
		!strings.Contains(out, "round 1  rejected") || !strings.Contains(out, "counterexample sealed/dup.json") || !strings.Contains(out, "outcome: admitted in round 2 of 3 as oci-layout:") {
		t.Errorf("jobs show (exit %d):\n%s", code, out)
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
	// Explain names the job the step waits for: one apply will open, then the one it did.
	if code, out, errs := foundry(t, dir, "explain", "step.use-sorter"); code != 0 ||
		!strings.Contains(out, "waits for capability.sorter, which no admitted version or recipe provides: it is reconstructed by job job-") ||
		!strings.Contains(out, ", which apply opens") {
		t.Errorf("explain before the job (exit %d):\n%s%s", code, out, errs)
	}
	before := explainWaits(t, dir)
	if len(before) != 1 || before[0].Capability != "capability.sorter" || before[0].Job == nil || before[0].Job.Status != "new" ||
		!strings.HasPrefix(before[0].Job.ID, "job-") || before[0].Budget.Candidates != 1 || before[0].Budget.Probes != 20 {
		t.Errorf("explain -json before the job: waits_for_jobs %+v", before)
	}
	if code, out, _ := foundry(t, dir, "jobs", "-json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("jobs -json before any apply (exit %d): %s", code, out)
	}
	r := failedApply(t, dir)
	id := showJobJSON(t, dir, "sorter").ID
	// apply, status and status -json count the run's failures alike (issue 29): the
	// exhausted capability is one failed node in each.
	if !strings.Contains(r.stdout, ", 1 failed, ") {
		t.Errorf("apply's summary does not say 1 failed:\n%s", r.stdout)
	}
	if code, out, errs := foundry(t, dir, "status"); code != 0 || !strings.Contains(out, ", 1 failed, ") ||
		!strings.Contains(out, "failed   capability.sorter") {
		t.Errorf("status after the exhausted job (exit %d):\n%s%s", code, out, errs)
	}
	code, out, errs := foundry(t, dir, "status", "-json")
	var st struct{ Nodes []state.Node }
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status -json: exit %d\n%s%s", code, out, errs)
	}
	if n := state.CountNodes(st.Nodes)[state.NodeFailed]; n != 1 {
		t.Errorf("status -json counts %d failed nodes, apply 1: %s", n, out)
	}
	// Exhausted with its budget still spent, explain and plan say so and how to go on (issue
	// 29): not "runs once it is admitted", not "to reconstruct".
	if code, out, errs := foundry(t, dir, "explain", "step.use-sorter"); code != 0 ||
		!strings.Contains(out, "its job "+id+" is exhausted: its budget is spent (1 of 1 candidates) with no admission; to go on, raise the budget of the reconstruct block (main.hcl:") ||
		strings.Contains(out, "runs once it is admitted") {
		t.Errorf("explain after the job (exit %d):\n%s%s", code, out, errs)
	}
	if code, out, errs := foundry(t, dir, "plan"); code != 0 || strings.Contains(out, "to reconstruct") ||
		!strings.Contains(out, ", 1 exhausted (budget spent, raise it to go on)") || !strings.Contains(out, "job "+id+" (exhausted)") ||
		!strings.Contains(out, "exhausted: its budget is spent (1 of 1 candidates)") {
		t.Errorf("plan after the job (exit %d):\n%s%s", code, out, errs)
	}
	code, out, errs = foundry(t, dir, "plan", "-json")
	var pj struct {
		Summary      plan.Summary
		Capabilities []plan.Capability
	}
	if code != 0 || json.Unmarshal([]byte(out), &pj) != nil {
		t.Fatalf("plan -json: exit %d\n%s%s", code, out, errs)
	}
	if pj.Summary.Exhausted != 1 || len(pj.Capabilities) != 1 || pj.Capabilities[0].Reconstruct == nil || pj.Capabilities[0].Reconstruct.Job == nil ||
		pj.Capabilities[0].Reconstruct.Job.Status != "exhausted" || !strings.Contains(pj.Capabilities[0].Reconstruct.Job.Next, "raise the budget") {
		t.Errorf("plan -json after the job: %s", out)
	}
	// explain -json names the same job, now with what it spent.
	if after := explainWaits(t, dir); len(after) != 1 || after[0].Job == nil || after[0].Job.ID != id || after[0].Job.ID != before[0].Job.ID ||
		after[0].Job.Status != "exhausted" || after[0].Job.Rounds != 1 || after[0].Job.Probes != 1 || after[0].Job.WallMillis <= 0 {
		t.Errorf("explain -json after the job: waits_for_jobs %+v", after)
	}
	// jobs -json lists it: the job without its rounds.
	code, out, errs = foundry(t, dir, "jobs", "-json")
	var list []jobJSON
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("jobs -json: exit %d\n%s%s", code, out, errs)
	}
	if len(list) != 1 || list[0].ID != id || list[0].Capability != "sorter" || list[0].Status != "exhausted" || list[0].Rounds != 1 ||
		list[0].Budget.Candidates != 1 || list[0].Used.Probes != 1 || list[0].Used.Wall <= 0 || list[0].RoundList != nil ||
		!slices.Equal(list[0].Waiting, []string{"step.use-sorter"}) || !strings.Contains(list[0].Outcome, "exhausted its budget") {
		t.Errorf("jobs -json: %s", out)
	}
	saysAll(t, "apply", r.stderr,
		"EXH capability.sorter: reconstruction exhausted its budget (job job-",
		"): 1 of 1 candidates tried, none admitted\n",
		"Error: capability.sorter: reconstruction exhausted its budget (job job-",
		"): 1 of 1 candidates tried, none admitted\n  spent: 1 probe(s), ",
		"\n  smallest counterexample (reconstruct round 1, sealed suite): sealed/dup.json\n    input:    [2,1,2]\n    expected: [1,2,2]\n    got:      [1,2]",
		"reconstruct round 1: failed the sealed suite",
		"step.use-sorter skipped")
	if strings.Contains(r.stderr, "round 2") {
		t.Errorf("a second round ran with a budget of 1:\n%s", r.stderr)
	}
	if c := planCapability(t, dir, "capability.sorter"); c["status"] != "reconstruct" {
		t.Errorf("an exhausted reconstruction admitted something: %v", c)
	}
	// With the budget raised, apply can go on with the job: the plan says to reconstruct.
	hcl, err := os.ReadFile(filepath.Join(dir, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	raised := strings.Replace(string(hcl), "candidates = 1 ", "candidates = 2 ", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(raised), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := foundry(t, dir, "plan"); code != 0 || !strings.Contains(out, ", 1 to reconstruct") || strings.Contains(out, "exhausted (budget") {
		t.Errorf("plan with the budget raised (exit %d):\n%s%s", code, out, errs)
	}
}

// Two projects with the same reconstruct block have different jobs (issue 29): a job ID
// names its project as well as the contract, target and trust policy.
func TestReconstructionJobIDIsPerProject(t *testing.T) {
	a := explainWaits(t, newReconstructFixture(t, "1"))
	b := explainWaits(t, newReconstructFixture(t, "1", `project "reconstruct"`, `project "elsewhere"`))
	if len(a) != 1 || len(b) != 1 || a[0].Job == nil || b[0].Job == nil {
		t.Fatalf("explain -json: waits_for_jobs %+v and %+v", a, b)
	}
	if a[0].Job.ID == b[0].Job.ID {
		t.Errorf("projects reconstruct and elsewhere share job %s", a[0].Job.ID)
	}
	if again := explainWaits(t, newReconstructFixture(t, "1")); len(again) != 1 || again[0].Job == nil || again[0].Job.ID != a[0].Job.ID {
		t.Errorf("the same project's job ID changed: %+v, then %+v", a[0].Job, again)
	}
}

// A builder that fails spends its round: nothing is evaluated, and the report says so.
func TestReconstructionBuilderFailureSpendsTheRound(t *testing.T) {
	r := failedApply(t, newReconstructFixture(t, "2", `"/src/propose.sh"`, `"/src/absent.sh"`))
	saysAll(t, "apply", r.stderr,
		"reconstruct round 1: did not build: capability.sorter.reconstruct.builder: exited with code",
		"reconstruct round 2: did not build:",
		"Error: capability.sorter: reconstruction exhausted its budget (job job-",
		"): 2 of 2 candidates tried, none admitted\n  spent: 0 probe(s), ")
	if strings.Contains(r.stderr, "eval capability.sorter") || strings.Contains(r.stderr, "smallest counterexample") {
		t.Errorf("a failed builder's round was evaluated:\n%s", r.stderr)
	}
}

// showJobJSON is `foundry jobs show WHICH -json` in dir.
func showJobJSON(t *testing.T, dir, which string) jobJSON {
	t.Helper()
	code, out, errs := foundry(t, dir, "jobs", "show", which, "-json")
	if code != 0 {
		t.Fatalf("jobs show %s: exit %d\n%s", which, code, errs)
	}
	var j jobJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("jobs show -json: %v\n%s", err, out)
	}
	return j
}

// explainWaits is explain -json's waits_for_jobs for step.use-sorter in project dir.
func explainWaits(t *testing.T, dir string) []plan.Wait {
	t.Helper()
	code, out, errs := foundry(t, dir, "explain", "-json", "step.use-sorter")
	if code != 0 {
		t.Fatalf("explain -json: exit %d\n%s", code, errs)
	}
	var e struct {
		Waits []plan.Wait `json:"waits_for_jobs"`
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("explain -json: %v\n%s", err, out)
	}
	return e.Waits
}

// jobEvents counts, in the JSON progress of applies, the builder's runs started and the
// sealed suite's fresh evaluations (a reused sealed verdict has no case counts).
func jobEvents(runs ...applyRun) (builds, sealed int) {
	for _, r := range runs {
		for _, line := range strings.Split(r.stderr, "\n") {
			var e struct {
				Type, Node, Suite string
				Cases             *int
			}
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			switch {
			case e.Type == "node_started" && e.Node == "capability.sorter.reconstruct.builder":
				builds++
			case e.Type == "suite_evaluated" && e.Suite == "sealed" && e.Cases != nil:
				sealed++
			}
		}
	}
	return builds, sealed
}

// Killing apply with SIGKILL at named points of a job, then applying again, resumes the job:
// each round appears once, no finished round or recorded builder run is repeated, each
// candidate meets the sealed suite once, each round's usage is charged exactly once (the
// builder's as its run's record says, the dev and repair probes as they ran, and a part the
// killed apply never charged counted as spent), and the capability is published once.
func TestReconstructionResumesAfterKill(t *testing.T) {
	const builder = "capability.sorter.reconstruct.builder"
	cases := []struct {
		name, fault string
		resumed     int    // the round the kill interrupted, dispatched by both applies (0: none was running)
		builds      int    // builder runs started over both applies
		rerun       int    // the round whose builder ran again: the killed apply never recorded its run
		probes      [2]int // each round's probes
	}{
		{"round 1 builder before exec", run.FaultBeforeExec + ":" + builder, 1, 3, 1, [2]int{1, 2}},
		{"round 2 builder after exec", run.FaultAfterExec + ":" + builder + "#2", 2, 3, 2, [2]int{1, 2}},
		{"round 2 builder cached", run.FaultAfterCachePut + ":" + builder + "#2", 2, 2, 0, [2]int{1, 2}},
		{"round 1 proposed", reconstruct.FaultRoundProposed + ":capability.sorter", 1, 2, 0, [2]int{1, 2}},
		// The dev case ran before the kill and runs again: both runs are spent.
		{"round 1 before sealed", evaluate.FaultBeforeSealed + ":capability.sorter", 1, 2, 0, [2]int{2, 2}},
		{"round 1 after sealed", evaluate.FaultAfterSealed + ":capability.sorter", 1, 2, 0, [2]int{1, 2}},
		{"round 1 evaluated", reconstruct.FaultRoundEvaluated + ":capability.sorter", 0, 2, 0, [2]int{1, 2}},
		{"between rounds", reconstruct.FaultRoundFinished + ":capability.sorter", 0, 2, 0, [2]int{1, 2}},
		{"round 2 evaluated", reconstruct.FaultRoundEvaluated + ":capability.sorter#2", 2, 2, 0, [2]int{1, 2}},
		{"round 2 publish dispatched", admit.FaultAfterDispatch + ":capability.sorter", 2, 2, 0, [2]int{1, 2}},
		{"round 2 admitted", reconstruct.FaultRoundAdmitted + ":capability.sorter", 0, 2, 0, [2]int{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := newReconstructFixture(t, "3")
			killed := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + c.fault})
			if killed.code != -1 {
				t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", killed.code, killed.stderr)
			}
			resumed := apply(t, dir, nil)
			if resumed.code != 0 {
				t.Fatalf("resumed apply: exit %d\n%s", resumed.code, resumed.stderr)
			}
			if builds, _ := jobEvents(killed, resumed); builds != c.builds {
				t.Errorf("over both applies the builder started %d times, want %d", builds, c.builds)
			}
			j := showJobJSON(t, dir, "sorter")
			if j.Status != "admitted" || len(j.RoundList) != 2 || j.RoundList[0].N != 1 || j.RoundList[1].N != 2 ||
				j.RoundList[0].Status != "rejected" || j.RoundList[1].Status != "admitted" {
				t.Fatalf("job after the resume: %+v", j)
			}
			if f := j.RoundList[0].Failure; f == nil || f.Suite != "sealed" || !strings.Contains(f.Case, "dup") {
				t.Errorf("round 1's failure: %+v; want the sealed suite's dup case", f)
			}
			ws, err := workspace.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			var sum state.Usage
			for i, rd := range j.RoundList {
				if want := 1 + btoi(rd.N == c.resumed); rd.Attempts != want {
					t.Errorf("round %d dispatched %d times, want %d", rd.N, rd.Attempts, want)
				}
				rec, hit, err := ws.Cache.Lookup(context.Background(), rd.Builder)
				if err != nil || !hit {
					t.Fatalf("round %d's builder run %s is not in the cache: %v", rd.N, rd.Builder, err)
				}
				u := rd.Used
				if u.CPU != rec.CPU || u.PeakMemory != rec.PeakMemory || u.Written != [2]int64{87, 86}[i] || u.Probes != c.probes[i] ||
					u.Interventions != 0 || u.Spend != 0 {
					t.Errorf("round %d used %+v; want the builder's recorded CPU %v and memory %d, %d bytes written, %d probes",
						rd.N, u, rec.CPU, rec.PeakMemory, [2]int64{87, 86}[i], c.probes[i])
				}
				// The builder's wall is its recorded run's, and more when a run the killed apply
				// dispatched was never recorded (its reservation is spent).
				if (rd.N == c.rerun) != (u.BuilderWall > rec.Duration) || u.BuilderWall < rec.Duration {
					t.Errorf("round %d's builder wall %v, its recorded run %v (a run lost to the kill: %v)", rd.N, u.BuilderWall, rec.Duration, rd.N == c.rerun)
				}
				if u.Wall < u.BuilderWall+u.CasesWall || u.CasesWall <= 0 {
					t.Errorf("round %d's wall %v is less than its builder's %v and cases' %v", rd.N, u.Wall, u.BuilderWall, u.CasesWall)
				}
				sum = sum.Add(u)
			}
			if j.Used != sum {
				t.Errorf("the job used %+v, its rounds %+v", j.Used, sum)
			}
			// Each candidate met the sealed suite once: one signed sealed result and one verdict each.
			sealed := sealedResults(t, dir)
			verdicts, err := ws.State.Verdicts(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(sealed) != 2 || len(sealed[j.RoundList[0].Candidate]) != 1 || len(sealed[j.RoundList[1].Candidate]) != 1 || len(verdicts) != 2 ||
				verdicts[0].Candidate == verdicts[1].Candidate {
				t.Errorf("sealed results for %d candidates (rounds 1 and 2: %d, %d), %d verdicts; want one of each per candidate", len(sealed), len(sealed[j.RoundList[0].Candidate]), len(sealed[j.RoundList[1].Candidate]), len(verdicts))
			}
			code, out, _ := foundry(t, dir, "effects", "-json")
			var effects []effectJSON
			if code != 0 || json.Unmarshal([]byte(out), &effects) != nil || len(effects) != 1 || effects[0].Status != "succeeded" {
				t.Errorf("publishes (exit %d): %s", code, out)
			}
			if code, out, _ := foundry(t, dir, "output", "step.use-sorter", "/out/sorted.json"); code != 0 || strings.TrimSpace(out) != "[1,3,3]" {
				t.Errorf("step.use-sorter made %q (exit %d)", out, code)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Each budget stops the job when spent, with the job exhausted and the report saying which
// budget it was; a sealed set used up, or a builder that cannot run, leaves it unresolved.
func TestReconstructionOutcomes(t *testing.T) {
	cases := []struct {
		name   string
		edits  []string
		status string
		says   []string
	}{
		{"probes", []string{"budget { candidates = CANDIDATES }", "budget {\n      candidates = 3\n      probes = 2\n    }"}, "exhausted", []string{
			"reconstruct round 2: did not build: not evaluated: its 2 dev and repair case run(s) would exceed the probes budget (1 of 2 left)",
			"2 of 3 candidates tried", "the probes budget is spent: 1 of 2 used, and a candidate needs 2"}},
		{"wall", []string{"budget { candidates = CANDIDATES }", "budget {\n      candidates = 3\n      wall = \"1ms\"\n    }"}, "exhausted", []string{
			"reconstruct round 1: did not build: stopped: the job's wall-time budget", "the wall-time budget is spent: the job's is 1ms"}},
		// Each proposal is over the scratch budget: each round is spent, nothing is evaluated.
		{"scratch", []string{"budget { candidates = CANDIDATES }", "budget {\n      candidates = 2\n      scratch = \"80B\"\n    }"}, "exhausted", []string{
			"reconstruct round 1: did not build: the proposal is 87 bytes, over the scratch budget of 80 bytes",
			"reconstruct round 2: did not build: the proposal is 86 bytes, over the scratch budget of 80 bytes",
			"): 2 of 2 candidates tried, none admitted\n  spent: 0 probe(s)"}},
		// The project's ceiling on all jobs' wall time in one apply stops the round as the
		// job's own wall budget would.
		{"reconstruct_deadline", []string{`project "reconstruct" {}`, `project "reconstruct" {
  reconstruct_deadline = "1ms"
}`}, "exhausted", []string{
			"reconstruct round 1: did not build: stopped: the job's wall-time budget (or the project's reconstruct_deadline) ran out",
			"the wall-time budget is spent: the job's is 10m0s, and the project's reconstruct_deadline bounds all jobs of one apply"}},
		{"sealed set used up", []string{`project "reconstruct" {}`, `project "reconstruct" {
  min_undisclosed_sealed = 2
}`}, "unresolved", []string{
			"reconstruction is unresolved (job job-", "1 of 3 candidates tried, none admitted; the sealed set is used up: 1 undisclosed sealed case(s) left, and promotion needs 2"}},
		{"builder cannot run", []string{`run     = ["sh", "/src/propose.sh"]`, `run     = ["/bin/absent"]`}, "unresolved", []string{
			"reconstruction is unresolved (job job-", "cannot run: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := newReconstructFixture(t, "3", c.edits...)
			r := failedApply(t, dir)
			saysAll(t, "apply", r.stderr, c.says...)
			j := showJobJSON(t, dir, "sorter")
			if string(j.Status) != c.status || !strings.Contains(j.Outcome, c.says[len(c.says)-1]) {
				t.Errorf("job: status %s, want %s; outcome:\n%s", j.Status, c.status, j.Outcome)
			}
			// What was spent stays spent: the next apply ends the same way.
			again := failedApply(t, dir)
			saysAll(t, "the next apply", again.stderr, c.says[len(c.says)-1])
		})
	}
}

// A job's rows only schedule work: forged to say the job admitted a candidate (with a
// round of its own), they pin nothing. The next apply reopens the job, and its candidate is
// admitted only by the evaluator, and published for real; the forged round costs a
// candidate, never an evaluation.
func TestForgedJobRowsAdmitNothing(t *testing.T) {
	dir := newReconstructFixture(t, "1")
	failedApply(t, dir) // round 1 rejected: exhausted
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	forged := "oci-layout:/elsewhere@sha256:" + strings.Repeat("0", 64)
	ws.SQLForTest(t, `UPDATE jobs SET status = 'admitted', admitted = ?, outcome = 'admitted in round 2'`, forged)
	ws.SQLForTest(t, `INSERT INTO job_rounds (job_id, n, source, run_id, status, candidate, started) SELECT id, 2, 'forged', 'r0', 'admitted', ?, 1 FROM jobs`,
		"sha256:"+strings.Repeat("1", 64))
	ws.Close()
	if c := planCapability(t, dir, "capability.sorter"); c["status"] != "reconstruct" {
		t.Fatalf("the forged job made the plan pin something: %v", c)
	}
	// With a budget of 3 (round 1 genuine, round 2 forged) one round is left: round 3.
	hcl, err := os.ReadFile(filepath.Join(dir, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(strings.Replace(string(hcl), "candidates = 1", "candidates = 3", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 || !strings.Contains(r.stderr, "ADM capability.sorter: reconstruct round 3 admitted as oci-layout:") || strings.Contains(r.stderr, forged) {
		t.Fatalf("apply after the forgery: exit %d\n%s", r.code, r.stderr)
	}
	if j := showJobJSON(t, dir, "sorter"); j.Status != "admitted" || j.Admitted == forged || !strings.HasPrefix(j.Admitted, "oci-layout:"+dir) {
		t.Errorf("job: %+v", j)
	}
}

// toolHCL is a second capability to reconstruct, which the sorter's builder mounts as a
// tool: the sorter's job waits for the tool's.
const toolHCL = `capability "tool" {
  summary     = "Sort a JSON array of integers ascending, keeping duplicates: the builder's tool"
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/tool"]
    input      = jsonschema("schemas/ints.json")
    output     = jsonschema("schemas/ints.json")
  }
  suite "dev" { cases = "cases/*.json" }
  suite "sealed" { cases = "sealed/*.json" }
  reconstruct {
    builder {
      image   = seed.bb
      mounts  = { "/src" = dir("builder") }
      run     = ["sh", "/src/propose.sh"]
      outputs = ["/out/sorter"]
    }
    package {
      base  = seed.bb
      files = { "/bin/tool" = "/out/sorter" }
    }
  }
}
`

// A builder may mount a capability that is itself reconstructed: the plan shows both, and
// one apply runs the tool's job, then the sorter's, whose builder runs the admitted tool.
// Nesting deeper than the project's reconstruct_depth is refused by the plan, and a builder
// that needs its own capability is a cycle.
func TestNestedReconstruction(t *testing.T) {
	dir := newReconstructFixture(t, "3",
		`mounts  = { "/src" = dir("builder") }
      run     = ["sh", "/src/propose.sh"]`,
		`mounts  = { "/src" = dir("builder"), "/t" = capability.tool }
      run     = ["sh", "-c", "echo '[2,1]' | /t/bin/tool >&2 && sh /src/propose.sh"]`)
	if err := os.WriteFile(filepath.Join(dir, "tool.hcl"), []byte(toolHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"capability.tool", "capability.sorter"} {
		if c := planCapability(t, dir, a); c["status"] != "reconstruct" {
			t.Fatalf("%s planned %v", a, c)
		}
	}
	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	saysAll(t, "apply", r.stderr, "ADM capability.tool: reconstruct round 2 admitted", "ADM capability.sorter: reconstruct round 2 admitted", "ok  step.use-sorter")
	if i, j := strings.Index(r.stderr, "ADM capability.tool"), strings.Index(r.stderr, "RND capability.sorter: round 1"); i < 0 || j < i {
		t.Errorf("the sorter's job started before the tool it mounts was admitted:\n%s", r.stderr)
	}
	if code, out, _ := foundry(t, dir, "logs", "capability.sorter.reconstruct.builder"); code != 0 || !strings.Contains(out, "[1,2]") {
		t.Errorf("the sorter's builder did not run the tool (exit %d):\n%s", code, out)
	}

	deep := newReconstructFixture(t, "3", `project "reconstruct" {}`, "project \"reconstruct\" {\n  reconstruct_depth = 1\n}",
		`mounts  = { "/src" = dir("builder") }
      run     = ["sh", "/src/propose.sh"]`, `mounts  = { "/src" = dir("builder"), "/t" = capability.tool }
      run     = ["sh", "/src/propose.sh"]`)
	if err := os.WriteFile(filepath.Join(deep, "tool.hcl"), []byte(toolHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := planCapability(t, deep, "capability.sorter"); c["status"] != "missing" ||
		!strings.Contains(c["reason"].(string), "it would be reconstructed 2 deep (its builder needs a capability that is reconstructed too), and the project's reconstruct_depth is 1") {
		t.Errorf("nested past the depth: %v", c)
	}

	cyc := newReconstructFixture(t, "3", `mounts  = { "/src" = dir("builder") }
      run     = ["sh", "/src/propose.sh"]`, `mounts  = { "/src" = dir("builder"), "/t" = capability.sorter }
      run     = ["sh", "/src/propose.sh"]`)
	if code, _, errs := foundry(t, cyc, "plan"); code == 0 || !strings.Contains(errs, "Dependency cycle") || !strings.Contains(errs, "capability.sorter (main.hcl:14) is needed by capability.sorter") {
		t.Errorf("a builder that needs its own capability (exit %d):\n%s", code, errs)
	}
}

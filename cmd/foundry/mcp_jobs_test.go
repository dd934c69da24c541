package main

import (
	"strings"
	"testing"
)

// A model as the untrusted builder of a job, over MCP: while an apply runs the job, the
// jobs tool shows the round waiting, job_brief gives the round's /job files (never the
// sealed case no builder was shown), and propose sends a proposal into the loop. A wrong
// one comes back as the next round's counterexample; the right one is admitted by the
// evaluator and the waiting step runs. Proposals from a model are not a person's
// interventions, and propose needs -allow propose.
func TestMCPProposals(t *testing.T) {
	dir := newReconstructFixture(t, "3", builderBlock, `    proposals { outputs = ["/out/sorter"] }`)
	ra := startApply(t, dir, "runc")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")

	readOnly := connectStdio(t, dir)
	if names := toolNames(listTools(t, readOnly)); !strings.Contains(strings.Join(names, ","), "job_brief,jobs") || strings.Contains(strings.Join(names, ","), "propose") {
		t.Errorf("tools without -allow propose: %v", names)
	}
	cs := connectStdio(t, dir, "-allow", "propose")
	var jobs jobsOut
	structured(t, callTool(t, cs, "jobs", map[string]any{}), &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].WaitingRound != 1 || jobs.Jobs[0].Status != "open" {
		t.Fatalf("jobs: %+v", jobs)
	}
	id := jobs.Jobs[0].ID
	brief := func(round int) map[string]string {
		t.Helper()
		var b briefOut
		structured(t, callTool(t, cs, "job_brief", map[string]any{"job": id}), &b)
		files := map[string]string{}
		for _, f := range b.Files {
			files[f.Path] = f.Content
			if strings.Contains(f.Content, "5,4,9,8") {
				t.Errorf("the brief's %s holds the sealed case no builder was shown", f.Path)
			}
		}
		if b.Round != round || files["contract.json"] == "" || files["cases/dev/order.json"] == "" {
			t.Fatalf("brief of round %d: round %d, files %v", round, b.Round, b.Files)
		}
		return files
	}
	propose := func(unique bool) {
		t.Helper()
		res := callTool(t, cs, "propose", map[string]any{"job": id, "files": []map[string]any{{"path": "out/sorter", "content": sorterScript(unique), "executable": true}}})
		if res.IsError {
			t.Fatalf("propose: %s", resultText(res))
		}
	}
	brief(1)
	propose(true) // drops duplicates
	ra.waitFor(t, "candidate_rejected", "capability.sorter")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	if files := brief(2); !strings.Contains(files["counterexamples/1.json"], `"input": "[2,1,2]"`) {
		t.Errorf("round 2's brief lacks round 1's counterexample: %v", files)
	}
	for _, bad := range []map[string]any{
		{"job": "job-0000000000000000", "files": []map[string]any{{"path": "out/sorter", "content": "x"}}},
		{"job": id, "files": []map[string]any{{"path": "../escape", "content": "x"}}},
		{"job": id, "files": []map[string]any{{"path": "out/sorter", "content": "x"}}, "budget": 100},
		// A negative spend would raise what the job may spend.
		{"job": id, "files": []map[string]any{{"path": "out/sorter", "content": "x"}}, "spend": -5},
	} {
		if res := callTool(t, cs, "propose", bad); !res.IsError {
			t.Errorf("propose %v was taken: %s", bad, resultText(res))
		}
	}
	propose(false)
	if code := ra.wait(t); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, ra.stderrText())
	}
	// Both proposals were charged to the job as a builder's rounds are: a candidate each,
	// with the probes its dev and repair cases took; a model's proposal is no intervention.
	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 || j.Used.Interventions != 0 || j.Used.Spend != 0 {
		t.Errorf("job: %+v", j)
	}
	probes := 0
	for _, r := range j.RoundList {
		if r.Source != "proposals" || r.Used.Probes < 1 {
			t.Errorf("round %d: source %q, %d probes; want a proposal charged its dev and repair runs", r.N, r.Source, r.Used.Probes)
		}
		probes += r.Used.Probes
	}
	if j.Used.Probes != probes || j.Budget.Candidates != 3 {
		t.Errorf("job used %d probes of budget %+v; its rounds used %d", j.Used.Probes, j.Budget, probes)
	}
	if res := callTool(t, cs, "propose", map[string]any{"job": id, "files": []map[string]any{{"path": "out/sorter", "content": "x"}}}); !res.IsError || !strings.Contains(resultText(res), "no round of job") {
		t.Errorf("a proposal for an admitted job: %s", resultText(res))
	}
}

// Proposals over MCP spend the same budget as a builder's: with one candidate, a wrong
// proposal exhausts the job, the apply that waited for it fails with the report, and the
// model cannot propose again.
func TestMCPProposalsExhaustTheBudget(t *testing.T) {
	dir := newReconstructFixture(t, "1", builderBlock, `    proposals { outputs = ["/out/sorter"] }`)
	ra := startApply(t, dir, "runc")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	cs := connectStdio(t, dir, "-allow", "propose")
	var jobs jobsOut
	structured(t, callTool(t, cs, "jobs", map[string]any{}), &jobs)
	if len(jobs.Jobs) != 1 {
		t.Fatalf("jobs: %+v", jobs)
	}
	id := jobs.Jobs[0].ID
	res := callTool(t, cs, "propose", map[string]any{"job": id, "files": []map[string]any{{"path": "out/sorter", "content": sorterScript(true), "executable": true}}})
	if res.IsError {
		t.Fatalf("propose: %s", resultText(res))
	}
	if code := ra.wait(t); code == 0 || !strings.Contains(ra.stderrText(), "reconstruction exhausted its budget") {
		t.Fatalf("apply after the only candidate was rejected: exit %d\n%s", code, ra.stderrText())
	}
	if j := showJobJSON(t, dir, "sorter"); j.Status != "exhausted" || len(j.RoundList) != 1 || j.Used.Probes < 1 {
		t.Errorf("job: %+v", j)
	}
	res = callTool(t, cs, "propose", map[string]any{"job": id, "files": []map[string]any{{"path": "out/sorter", "content": sorterScript(false), "executable": true}}})
	if !res.IsError {
		t.Errorf("a proposal to an exhausted job was taken: %s", resultText(res))
	}
}

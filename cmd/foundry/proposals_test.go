package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/engine/reconstruct"
)

// builderBlock is the fixture's builder, which proposalsFixture replaces by a proposals
// block: every proposal is then sent from outside.
const builderBlock = `    builder {
      image   = seed.bb
      mounts  = { "/src" = dir("builder") }
      run     = ["sh", "/src/propose.sh"]
      outputs = ["/out/sorter"]
      limits { time = "60s" }
    }`

// sorterScript is a sorter proposal; with unique set it drops duplicates, the fixture's
// subtle mistake.
func sorterScript(unique bool) string {
	flags := "-n"
	if unique {
		flags = "-nu"
	}
	return "#!/bin/sh\ntr -d '[] \\n' | tr ',' '\\n' | sort " + flags + " | paste -sd, - | sed 's/^/[/; s/$/]/'\n"
}

// writeProposal writes a proposal holding /out/sorter under a new directory.
func writeProposal(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out", "sorter"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitFor waits for the apply's first event of type typ (for node, when set).
func (ra *runningApply) waitFor(t *testing.T, typ, node string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e := <-ra.events:
			if e.Type == typ && (node == "" || e.Node == node) {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event:\n%s", typ, ra.stderrText())
		}
	}
}

// A job whose proposals come from outside: each round waits; the proposer reads the brief
// (foundry jobs brief), sends a proposal (foundry jobs propose); a wrong one is rejected and
// its counterexample is in the next round's brief; the right one is admitted, and the step
// that waits for it runs, all in one apply. Each proposal counts as a person's
// intervention, and nothing is sent to a round that does not wait.
func TestReconstructionFromProposals(t *testing.T) {
	dir := newReconstructFixture(t, "3", builderBlock, `    proposals { outputs = ["/out/sorter"] }`)
	if code, out, errs := foundry(t, dir, "plan"); code != 0 || !strings.Contains(out, "each round waits for a proposal sent from outside") {
		t.Fatalf("plan (exit %d):\n%s%s", code, out, errs)
	}
	if code, _, errs := foundry(t, dir, "jobs", "propose", "sorter", writeProposal(t, sorterScript(false))); code != 1 || !strings.Contains(errs, "no job sorter") {
		t.Errorf("a proposal with no job (exit %d): %s", code, errs)
	}

	ra := startApply(t, dir, "runc")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	brief := t.TempDir()
	code, out, errs := foundry(t, dir, "jobs", "brief", "sorter", "-o", brief)
	if code != 0 || !strings.Contains(out, "round 1 waits for a proposal") {
		t.Fatalf("brief (exit %d):\n%s%s", code, out, errs)
	}
	for _, f := range []string{"contract.json", "cases/dev/order.json", "round.json"} {
		if _, err := os.Stat(filepath.Join(brief, f)); err != nil {
			t.Errorf("the brief lacks %s: %v", f, err)
		}
	}
	if code, _, errs := foundry(t, dir, "jobs", "propose", "sorter", writeProposal(t, sorterScript(true))); code != 0 {
		t.Fatalf("propose round 1 (exit %d): %s", code, errs)
	}
	// One proposal per round: a second one for round 1 has no round to go to until round 2 waits.
	ra.waitFor(t, "candidate_rejected", "capability.sorter")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	code, out, _ = foundry(t, dir, "jobs", "brief", "sorter", "-json")
	var b struct {
		Round int
		Files map[string]string
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.Round != 2 || !strings.Contains(b.Files["counterexamples/1.json"], `"input": "[2,1,2]"`) {
		t.Fatalf("round 2's brief (exit %d):\n%s", code, out)
	}
	if code, _, errs := foundry(t, dir, "jobs", "propose", "sorter", writeProposal(t, sorterScript(false)), "-spend", "0"); code != 0 {
		t.Fatalf("propose round 2 (exit %d): %s", code, errs)
	}
	if code := ra.wait(t); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, ra.stderrText())
	}
	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 || j.RoundList[0].Source != "proposals" || j.Used.Interventions != 2 {
		t.Errorf("job: %+v", j)
	}
	if code, out, _ := foundry(t, dir, "output", "step.use-sorter", "/out/sorted.json"); code != 0 || strings.TrimSpace(out) != "[1,3,3]" {
		t.Errorf("step.use-sorter made %q (exit %d)", out, code)
	}
	if code, _, errs := foundry(t, dir, "jobs", "propose", "sorter", writeProposal(t, sorterScript(false))); code != 1 || !strings.Contains(errs, "no round of job") {
		t.Errorf("a proposal for an admitted job (exit %d): %s", code, errs)
	}
}

// spendFixture is the proposals fixture with the job's budget and the project's block as given.
func spendFixture(t *testing.T, budget, project string) string {
	return newReconstructFixture(t, "3", builderBlock, `    proposals { outputs = ["/out/sorter"] }`,
		"budget { candidates = CANDIDATES }", budget, `project "reconstruct" {}`, project)
}

// proposeOnce applies dir while sending one proposal of script costing spend to the first
// waiting round of job which, and returns the apply's exit code and progress.
func proposeOnce(t *testing.T, dir, which, script, spend string) (int, string) {
	t.Helper()
	ra := startApply(t, dir, "runc")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	if code, _, errs := foundry(t, dir, "jobs", "propose", which, writeProposal(t, script), "-spend", spend); code != 0 {
		t.Fatalf("propose (exit %d): %s", code, errs)
	}
	return ra.wait(t), ra.stderrText()
}

// A proposal's cost is known only once it is made: one that takes its job past the job's
// spend budget, or all jobs past the project's reconstruct_spend, is charged but never
// evaluated (a correct candidate is not admitted), and the job is exhausted; the next apply
// dispatches no round.
func TestReconstructionSpendBudgets(t *testing.T) {
	t.Run("the job's spend", func(t *testing.T) {
		dir := spendFixture(t, "budget {\n      candidates = 3\n      spend = 1\n    }", "project \"reconstruct\" {\n  reconstruct_spend = 10\n}")
		code, progress := proposeOnce(t, dir, "sorter", sorterScript(false), "1.5")
		if code == 0 || strings.Contains(progress, `"suite_evaluated"`) || strings.Contains(progress, `"capability_admitted"`) {
			t.Fatalf("apply (exit %d) evaluated or admitted a proposal over the spend budget:\n%s", code, progress)
		}
		j := showJobJSON(t, dir, "sorter")
		const why = "the spend budget is spent: 1.5 of 1"
		if j.Status != "exhausted" || !strings.Contains(j.Outcome, why) || len(j.RoundList) != 1 || j.RoundList[0].Used.Spend != 1.5 ||
			j.RoundList[0].Used.Probes != 0 || j.RoundList[0].Failure == nil ||
			j.RoundList[0].Failure.Reason != "not evaluated: its proposal cost 1.5, and "+why {
			t.Fatalf("job: %+v", j)
		}
		again := failedApply(t, dir)
		saysAll(t, "the next apply", again.stderr, "1 of 3 candidates tried, none admitted; "+why)
		if strings.Contains(again.stderr, "waits for a proposal") {
			t.Errorf("the next apply dispatched a round:\n%s", again.stderr)
		}
	})
	t.Run("the project's reconstruct_spend over two jobs", func(t *testing.T) {
		dir := spendFixture(t, "budget {\n      candidates = 1\n      spend = 5\n    }", "project \"reconstruct\" {\n  reconstruct_spend = 1\n}")
		// The first job's one candidate is wrong: evaluated, rejected, 0.6 spent.
		if code, progress := proposeOnce(t, dir, "sorter", sorterScript(true), "0.6"); code == 0 || !strings.Contains(progress, `"candidate_rejected"`) {
			t.Fatalf("first job's apply (exit %d):\n%s", code, progress)
		}
		first := showJobJSON(t, dir, "sorter")
		// Another trust policy is another job for the same capability, under the same ceiling.
		hcl := filepath.Join(dir, "main.hcl")
		b, err := os.ReadFile(hcl)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hcl, []byte(strings.Replace(string(b), "reconstruct_spend = 1", "reconstruct_spend = 1\n  keep_pins = true", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		planned, _ := planCapability(t, dir, "capability.sorter")["reconstruct"].(map[string]any)["job"].(map[string]any)
		id, _ := planned["id"].(string)
		if id == "" || id == first.ID || planned["status"] != "new" {
			t.Fatalf("the plan's job %v; want a new one beside %s", planned, first.ID)
		}
		code, progress := proposeOnce(t, dir, id, sorterScript(false), "0.6")
		if code == 0 || strings.Contains(progress, `"suite_evaluated"`) || strings.Contains(progress, `"capability_admitted"`) {
			t.Fatalf("second job's apply (exit %d) evaluated or admitted a proposal over the ceiling:\n%s", code, progress)
		}
		second := showJobJSON(t, dir, id)
		const why = "the project's reconstruct_spend is spent: all jobs together spent 1.2 of 1"
		if second.ID == first.ID || second.Status != "exhausted" || !strings.Contains(second.Outcome, why) || second.Used.Spend != 0.6 || second.Used.Probes != 0 {
			t.Fatalf("second job (the first was %s): %+v", first.ID, second)
		}
	})
}

// An apply killed after a proposal sent from outside was charged resumes its round from the
// proposal's row without charging it again: its spend and its intervention count once.
func TestProposalChargedOnceAfterKill(t *testing.T) {
	dir := spendFixture(t, "budget {\n      candidates = 3\n      spend = 1\n    }", "project \"reconstruct\" {\n  reconstruct_spend = 1\n}")
	t.Setenv("FOUNDRY_TEST_FAULT", reconstruct.FaultRoundProposed+":capability.sorter#2")
	ra := startApply(t, dir, "runc")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	if code, _, errs := foundry(t, dir, "jobs", "propose", "sorter", writeProposal(t, sorterScript(true)), "-spend", "0.5"); code != 0 {
		t.Fatalf("propose round 1 (exit %d): %s", code, errs)
	}
	ra.waitFor(t, "candidate_rejected", "capability.sorter")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	if code, _, errs := foundry(t, dir, "jobs", "propose", "sorter", writeProposal(t, sorterScript(false)), "-spend", "0.25"); code != 0 {
		t.Fatalf("propose round 2 (exit %d): %s", code, errs)
	}
	if code := ra.wait(t); code != -1 {
		t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", code, ra.stderrText())
	}
	if r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT="}); r.code != 0 {
		t.Fatalf("resumed apply: exit %d\n%s", r.code, r.stderr)
	}
	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 || j.RoundList[1].Attempts != 2 {
		t.Fatalf("job: %+v", j)
	}
	if u := j.RoundList[1].Used; u.Spend != 0.25 || u.Interventions != 1 || u.Written != 86 || u.Probes != 2 {
		t.Errorf("round 2 used %+v; want its proposal's 0.25 spend, 1 intervention and 86 bytes charged once, 2 probes", u)
	}
	if j.Used.Spend != 0.75 || j.Used.Interventions != 2 {
		t.Errorf("the job used %+v; want 0.75 spend and 2 interventions", j.Used)
	}
}

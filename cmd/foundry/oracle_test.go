package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/reconstruct"
	"github.com/foundry-build/foundry/engine/state"
)

// oracleBuilder runs builder/oracle.sh, asking extra more questions than the duplicate one.
func oracleBuilder(extra string) []string {
	return []string{`run     = ["sh", "/src/propose.sh"]`, `run     = ["sh", "/src/oracle.sh", "` + extra + `"]`}
}

// roundOracle is round n's oracle record in job j (failing the test when it has none).
func roundOracle(t *testing.T, j jobJSON, n int) state.Oracle {
	t.Helper()
	if len(j.RoundList) < n || j.RoundList[n-1].Oracle == nil {
		t.Fatalf("round %d has no oracle record: %+v", n, j.RoundList)
	}
	return *j.RoundList[n-1].Oracle
}

// roundStderr is what round n's runs wrote to stderr, as jobs show -json has it.
func roundStderr(j jobJSON, n int) string {
	var s []string
	for _, l := range j.RoundList[n-1].Logs {
		s = append(s, l.StderrTail...)
	}
	return strings.Join(s, "\n")
}

// With observe = true, the builder of round 1 asks the reference as an oracle: its one
// question with a duplicate is run on the reference in the reference's own sandbox and
// charged as a probe, its two non-requests are refused; round 2's builder reads the answers
// in /job/oracle/round-1.jsonl, learns from them alone that duplicates are kept, and its
// candidate is admitted. jobs show reports what was asked, in text and JSON.
// It runs under runc and under containerd: the reference's sandbox is the evaluator's.
func TestReferenceOracle(t *testing.T) {
	for _, exe := range []string{"runc", "containerd"} {
		t.Run(exe, func(t *testing.T) { testReferenceOracle(t, exe) })
	}
}

func testReferenceOracle(t *testing.T, exe string) {
	dir := newReconstructFixture(t, "3", append(referenceEdits("-n", "observe = true"), oracleBuilder("1")...)...)
	args := []string{"-progress", "plain"}
	if exe == "containerd" {
		needContainerd(t)
		args = append(args, "-executor", "containerd", "-containerd-address", containerdAddress())
	}
	r := apply(t, dir, nil, args...)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	saysAll(t, "apply", r.stderr, "round 1: the builder asked the oracle 4 request(s): 2 answered (charged as probes), 2 refused",
		"ADM capability.sorter: reconstruct round 2 admitted as")
	j := showJobJSON(t, dir, "sorter")
	if o := roundOracle(t, j, 1); o.Asked != 4 || o.Answered != 2 || o.Refused != 2 || !strings.HasPrefix(string(o.Answers), "sha256:") {
		t.Errorf("round 1's oracle: %+v, want 4 asked, 2 answered, 2 refused", o)
	}
	if len(j.RoundList) != 2 || j.RoundList[1].Oracle != nil {
		t.Errorf("want round 2, which asked nothing, admitted: %+v", j.RoundList)
	}
	saysAll(t, "round 2's builder's stderr", roundStderr(j, 2),
		`"request":"/out/oracle/bbsort/dup.json","reference":"bbsort","input_digest":"sha256:`, `"output":"[1,3,3]\n","exit":0`,
		`"request":"/out/oracle/bbsort/q1.json"`, `"output":"[0,1]\n"`,
		`"request":"/out/oracle/bbsort/bad.json","reference":"bbsort","refused":"not a request: its content is not one JSON value`,
		`"request":"/out/oracle/nosuch/x.json","refused":"the reference dossier has no reference \"nosuch\""`)
	code, out, errs := foundry(t, dir, "jobs", "show", "sorter")
	if code != 0 {
		t.Fatalf("jobs show: exit %d\n%s", code, errs)
	}
	saysAll(t, "jobs show", out, "oracle     4 request(s) asked, 2 answered (charged as probes), 2 refused; answers sha256:")
}

// A builder that asks more than the probes left gets the first answered, each charged as
// a probe, and the rest refused and not run: round 1 spends exactly the budget on the
// oracle and its candidate is not evaluated. Raising the budget and changing the dossier
// (its licence) reopens the same job: it records the new dossier, each round's builder
// provenance names the dossier it ran under, and round 2 reads the refusals.
func TestReferenceOracleOverBudget(t *testing.T) {
	dir := newReconstructFixture(t, "3", append(referenceEdits("-n", "observe = true"), oracleBuilder("5")...)...)
	hcl := filepath.Join(dir, "main.hcl")
	edit := func(old, new string) {
		t.Helper()
		b, err := os.ReadFile(hcl)
		if err != nil || !strings.Contains(string(b), old) {
			t.Fatalf("main.hcl lacks %q (%v)", old, err)
		}
		if err := os.WriteFile(hcl, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("probes = 60", "probes = 4")
	r := failedApply(t, dir)
	saysAll(t, "apply", r.stderr, "round 1: the builder asked the oracle 8 request(s): 4 answered (charged as probes), 4 refused",
		"the probes budget is spent: 4 of 4 used")
	j1 := showJobJSON(t, dir, "sorter")
	if o := roundOracle(t, j1, 1); o.Asked != 8 || o.Answered != 4 || o.Refused != 4 {
		t.Errorf("round 1's oracle: %+v, want 8 asked, 4 answered, 4 refused", o)
	}
	if p := j1.RoundList[0].Used.Probes; p != 4 {
		t.Errorf("round 1 charged %d probe(s), want 4 (the answered requests)", p)
	}

	edit("probes = 4", "probes = 60")
	edit(`licence    = "GPL-2.0-only"`, `licence    = "GPL-2.0-or-later"`)
	if r := apply(t, dir, nil, "-progress", "plain"); r.code != 0 {
		t.Fatalf("apply with the budget raised: exit %d\n%s", r.code, r.stderr)
	}
	j2 := showJobJSON(t, dir, "sorter")
	if j2.ID != j1.ID || len(j2.RoundList) != 2 || j2.RoundList[1].Status != state.RoundAdmitted {
		t.Fatalf("want job %s's round 2 admitted: job %s, rounds %+v", j1.ID, j2.ID, j2.RoundList)
	}
	if j2.RoundList[0].Used.Probes != 4 {
		t.Errorf("round 1's charge changed: %d probe(s)", j2.RoundList[0].Used.Probes)
	}
	saysAll(t, "round 2's builder's stderr", roundStderr(j2, 2), `"request":"/out/oracle/bbsort/q1.json"`, `"request":"/out/oracle/bbsort/q2.json"`,
		`"request":"/out/oracle/bbsort/q4.json","reference":"bbsort","input_digest":"sha256:`, `"refused":"over the probe budget: 4 of 4 probe(s) were left`)
	if got := strings.Count(roundStderr(j2, 2), "over the probe budget"); got != 2 {
		t.Errorf("%d request(s) refused over the budget, want 2 (q4 and q5)", got)
	}

	// The dossier changed while the job was open: recorded, not refused.
	if j1.Dossier == "" || j2.Dossier == "" || j1.Dossier == j2.Dossier {
		t.Fatalf("the job's dossier: %q in apply 1, %q in apply 2; want two digests", j1.Dossier, j2.Dossier)
	}
	named := map[string]int{}
	for _, payload := range attestationPayloads(t, dir) {
		if !strings.Contains(payload, `"name":"/job"`) {
			continue
		}
		for _, d := range []string{j1.Dossier.Hex(), j2.Dossier.Hex()} {
			if strings.Contains(payload, d) {
				named[d]++
			}
		}
	}
	if named[j1.Dossier.Hex()] != 1 || named[j2.Dossier.Hex()] != 1 {
		t.Errorf("builder provenance naming the dossier of apply 1: %d, of apply 2: %d; want 1 each", named[j1.Dossier.Hex()], named[j2.Dossier.Hex()])
	}
}

// Without observe = true nothing runs: the builder's requests are refused, recorded and
// shown to the next round, and no probe is charged for them.
func TestReferenceOracleNotObservable(t *testing.T) {
	ref := "reference \"bbsort\" {\n      image      = seed.bb\n      entrypoint = [\"sh\", \"-c\", \"sort\"]\n      licence    = \"GPL-2.0-only\"\n      origin     = \"busybox, from the host\"\n    }\n    builder {"
	dir := newReconstructFixture(t, "2", append(oracleBuilder("1"), "reconstruct {\n    builder {", "reconstruct {\n    "+ref)...)
	r := failedApply(t, dir)
	saysAll(t, "apply", r.stderr, "round 1: the builder asked the oracle 4 request(s): 0 answered (charged as probes), 4 refused")
	j := showJobJSON(t, dir, "sorter")
	if o := roundOracle(t, j, 1); o.Asked != 4 || o.Answered != 0 || o.Refused != 4 {
		t.Errorf("round 1's oracle: %+v, want 4 asked, none answered, 4 refused", o)
	}
	stderr := roundStderr(j, 2)
	if got := strings.Count(stderr, `"refused":"reference bbsort may not be observed: its dossier says observe = false"`); got != 3 {
		t.Errorf("%d request(s) refused as not observable, want 3:\n%s", got, stderr)
	}
	if strings.Contains(stderr, `"output"`) || strings.Contains(stderr, `"exit"`) {
		t.Errorf("a request was answered:\n%s", stderr)
	}
	// Round 1 charged its one dev case, and nothing for the oracle.
	if p := j.RoundList[0].Used.Probes; p != 1 {
		t.Errorf("round 1 charged %d probe(s), want 1 (its dev case)", p)
	}
}

// Killing apply while the oracle is asked, or once its answers are charged, then applying
// again: the answers recorded with their charge are not asked again (round 1 charged its
// dev case and its 2 answered requests: 3 probes, as without a kill); a reservation the
// killed apply left open is spent (its 2 probes, and the 2 asked again: 5).
func TestReferenceOracleResumesAfterKill(t *testing.T) {
	edits := referenceEdits("-n", "observe = true")
	edits = append([]string{edits[0], edits[1], edits[4], edits[5]}, oracleBuilder("1")...) // no differential suite: the probes are the dev case's and the oracle's
	for _, c := range []struct {
		fault  string
		probes int
	}{{reconstruct.FaultRoundAsked, 3}, {reconstruct.FaultOracleAsking, 5}} {
		t.Run(c.fault, func(t *testing.T) {
			dir := newReconstructFixture(t, "3", edits...)
			if killed := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + c.fault + ":capability.sorter"}); killed.code != -1 {
				t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", killed.code, killed.stderr)
			}
			if r := apply(t, dir, nil, "-progress", "plain"); r.code != 0 {
				t.Fatalf("resumed apply: exit %d\n%s", r.code, r.stderr)
			}
			j := showJobJSON(t, dir, "sorter")
			if len(j.RoundList) != 2 || j.RoundList[0].Attempts != 2 || j.RoundList[1].Status != state.RoundAdmitted {
				t.Fatalf("want round 1 dispatched twice, round 2 admitted: %+v", j.RoundList)
			}
			if o := roundOracle(t, j, 1); o.Asked != 4 || o.Answered != 2 || o.Refused != 2 {
				t.Errorf("round 1's oracle: %+v, want 4 asked, 2 answered, 2 refused", o)
			}
			if p := j.RoundList[0].Used.Probes; p != c.probes {
				t.Errorf("round 1 charged %d probe(s), want %d", p, c.probes)
			}
		})
	}
}

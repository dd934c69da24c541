package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/foundry-build/foundry/digest"
)

// A failing case is reported shrunk: round 1's sorter crashes (exit 9, not a declared
// error) on a dev case holding a duplicate; the evaluator shrinks its input in sandboxes to
// [0,0], which still crashes it, and the rejection, `jobs show` and /job's counterexample
// show the shrunk input and the original case's digest. Round 2's builder repairs from the
// shrunk counterexample alone, and is admitted. The shrinking runs are charged as probes.
func TestFailingCaseIsReportedShrunk(t *testing.T) {
	dir := newReconstructFixture(t, "3",
		`"sh", "cp", "cat"`, `"sh", "cp", "cat", "uniq"`,
		`run     = ["sh", "/src/propose.sh"]`, `run     = ["sh", "/src/crash.sh"]`)
	dup := []byte(`{"input":[5,3,9,3,1,7],"output":[1,3,3,5,7,9]}` + "\n")
	if err := os.WriteFile(filepath.Join(dir, "cases", "dup.json"), dup, 0o644); err != nil {
		t.Fatal(err)
	}
	original := digest.FromBytes(dup)

	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	shrunk := "shrunk:   [0,0] (exited with 9 (not a declared error code); from case " + original.Short() + " in "
	saysAll(t, "apply", r.stderr,
		"reconstruct round 1: failed the dev suite: exited with 9 (not a declared error code), want 0 (success)",
		"counterexample cases/dup.json\n      input:    [5,3,9,3,1,7]", shrunk)

	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 {
		t.Fatalf("job: %+v", j)
	}
	f := j.RoundList[0].Failure
	if f == nil || f.Shrunk != "[0,0]" || f.Original != original || f.ShrinkRuns < 2 {
		t.Fatalf("round 1's failure: %+v", f)
	}
	// Both dev cases ran, then the shrinking runs: every one is a probe.
	if u := j.RoundList[0].Used; u.Probes != 2+f.ShrinkRuns {
		t.Errorf("round 1 used %d probes, want 2 dev cases + %d shrinking runs", u.Probes, f.ShrinkRuns)
	}
	if u := j.RoundList[1].Used; u.Probes != 2 {
		t.Errorf("round 2 used %d probes, want its 2 dev cases (it passed: nothing to shrink)", u.Probes)
	}
	// The builder of round 2 read the shrunk case and the original's digest in /job.
	code, out, _ := foundry(t, dir, "jobs", "show", "sorter")
	if code != 0 {
		t.Fatalf("jobs show: exit %d", code)
	}
	saysAll(t, "jobs show", out, shrunk, `repairing from the shrunk counterexample:   "shrunk": "[0,0]",  "shrunk_failure": "exited with 9 (not a declared error code)",  "original": "`+string(original)+`"`)
}

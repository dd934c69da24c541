package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/evaluate"
)

// sealedSeeds reads the signed sealed test results of project dir and returns, for each,
// the generated seed it reveals (its configuration's generated-seed URI) and its cases.
func sealedSeeds(t *testing.T, dir string) (seeds []string, cases [][]string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, ".foundry", "attestations", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Payload string }
		if json.Unmarshal(b, &env) != nil || env.Payload == "" {
			continue
		}
		p, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil || !strings.Contains(string(p), `"sealed"`) || !strings.Contains(string(p), evaluate.SeedDependency) {
			continue
		}
		var st struct {
			Predicate struct {
				Configuration []struct{ Name, URI string } `json:"configuration"`
				Passed        []string                     `json:"passedTests"`
				Failed        []string                     `json:"failedTests"`
			} `json:"predicate"`
		}
		if err := json.Unmarshal(p, &st); err != nil {
			t.Fatal(err)
		}
		for _, c := range st.Predicate.Configuration {
			if c.Name == evaluate.SeedDependency {
				seeds = append(seeds, c.URI)
				cases = append(cases, append(st.Predicate.Passed, st.Predicate.Failed...))
			}
		}
	}
	return seeds, cases
}

// A sealed suite generated from a fresh secret seed per candidate: round 1's builder
// memorises every dev input (the hand-written one and those generated from the dev seed it
// is told) and passes the dev suite, but crashes on the sealed batch, which it could not
// compute; its counterexample is shrunk. Round 2's real sorter passes a sealed batch drawn
// from another seed and is admitted. Each signed sealed result reveals its own seed.
func TestGeneratedSealedBatchDefeatsMemorising(t *testing.T) {
	dir := newReconstructFixture(t, "3",
		`"sh", "cp", "cat"`, `"sh", "cp", "cat", "wc"`,
		`run     = ["sh", "/src/propose.sh"]`, `run     = ["sh", "/src/memorise.sh"]`,
		`outputs = ["/out/sorter"]`, `outputs = ["/out/sorter", "/out/known"]`,
		`files = { "/bin/sorter" = "/out/sorter" }`, `files = { "/bin/sorter" = "/out/sorter", "/known" = "/out/known" }`,
		`suite "dev" { cases = "cases/*.json" }`, "suite \"dev\" {\n    cases = \"cases/*.json\"\n    generate {\n      count = 8\n      seed  = \"dev-1\"\n    }\n  }",
		`suite "sealed" { cases = "sealed/*.json" }`, "suite \"sealed\" {\n    generate { count = 30 }\n  }",
		`budget { candidates = CANDIDATES }`, "budget {\n      candidates = 3\n      probes = 80\n    }")
	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	saysAll(t, "apply", r.stderr,
		"dev suite: 9 of 9 cases passed",
		"reconstruct round 1: failed the sealed suite: exited with 9 (not a declared error code)")
	// The counterexample is shrunk, unless the secret batch's first failure is already the
	// smallest failing input there is ([0]: the memoriser knows [] from its dev cases).
	if !strings.Contains(r.stderr, "shrunk:   [") && !strings.Contains(r.stderr, "input:    [0]\n") {
		t.Errorf("apply: the counterexample was not shrunk:\n%s", r.stderr)
	}
	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 || j.RoundList[0].Failure == nil || j.RoundList[0].Failure.Suite != "sealed" {
		t.Fatalf("job: %+v", j)
	}
	seeds, cases := sealedSeeds(t, dir)
	if len(seeds) != 2 || seeds[0] == seeds[1] {
		t.Fatalf("signed sealed results reveal seeds %q; want two, different", seeds)
	}
	same := 0
	in0 := map[string]bool{}
	for _, c := range cases[0] {
		in0[c] = true
	}
	for _, c := range cases[1] {
		if in0[c] {
			same++
		}
	}
	if same == len(cases[1]) {
		t.Errorf("the two candidates met the same sealed batch: %v", cases)
	}
	// The seed of round 2's batch is not in any brief a builder saw: the job's files are
	// written before it is drawn.
	code, out, _ := foundry(t, dir, "jobs", "brief", "sorter")
	if code == 0 {
		for _, s := range seeds {
			if i := strings.Index(s, "seed="); i >= 0 && strings.Contains(out, s[i+5:]) {
				t.Errorf("a brief holds the sealed seed %s", s)
			}
		}
	}
}

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
)

// The attacks of this file are on the two invariants of reconstruction (spec/capability.md
// §5a): no candidate is admitted without a signed sealed pass of its own, and no candidate
// meets the sealed suite twice. The fixture's wrong candidate (a sorter that drops
// duplicates) fails the sealed case sealed/dup.json, which is then disclosed; the right one
// passes what is left of the sealed suite (sealed/pair.json).

// sealedResults are the signed sealed test results in dir's attestations, by the candidate
// they judge: the evidence of each meeting with the sealed suite.
func sealedResults(t *testing.T, dir string) map[digest.Digest][]provenance.SignedTestResult {
	t.Helper()
	keys, err := provenance.LoadVerifiers(filepath.Join(dir, ".foundry", "keys", "signing.pub"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := provenance.TestResultsIn(filepath.Join(dir, ".foundry", "attestations"), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[digest.Digest][]provenance.SignedTestResult{}
	for _, tr := range all {
		if tr.Suite == provenance.SuiteSealed {
			by[digest.Digest(strings.Join(tr.Subjects, ","))] = append(by[digest.Digest(strings.Join(tr.Subjects, ","))], tr)
		}
	}
	return by
}

// sqlOn runs queries on dir's state database, as someone with write access to .foundry
// would (the apply of dir may be running).
func sqlOn(t *testing.T, dir string, queries ...string) {
	t.Helper()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, q := range queries {
		ws.SQLForTest(t, q)
	}
}

// raiseCandidates rewrites dir's candidates budget from one value to another.
func raiseCandidates(t *testing.T, dir string, from, to string) {
	t.Helper()
	p := filepath.Join(dir, "main.hcl")
	hcl, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(hcl), "candidates = "+from, "candidates = "+to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Forging the state database between applies admits nothing and re-runs no sealed suite:
// after round 1's wrong candidate failed the sealed suite (the job exhausted with one
// candidate), the verdicts, evaluations and disclosed-case rows are deleted or edited, the
// job's rounds are deleted, marked passed or reset with another candidate, the job is marked
// admitted with a forged ref; then the budget is raised and apply runs again. Whatever the
// rows say, the wrong candidate never meets the sealed suite again (the signed result of
// its sealed failure keeps its case disclosed, and so in repair, where the candidate fails;
// a resumed round is settled from that signed result), only the right candidate's one
// sealed pass admits it, and its sealed suite no longer holds the disclosed case.
func TestReconstructionStateForgeryAdmitsNothing(t *testing.T) {
	forged := func(dir string) string {
		return "oci-layout:" + filepath.Join(dir, ".foundry", "registry") + "@sha256:" + strings.Repeat("0", 64)
	}
	cases := []struct {
		name   string
		forge  func(dir string) []string
		rounds int    // the job's rounds after the next apply
		again  string // the suite that rejects the wrong candidate when a later round proposes it again ("" when none does)
	}{
		{"evidence rows and rounds deleted", func(string) []string {
			return []string{"DELETE FROM verdicts", "DELETE FROM evaluations", "DELETE FROM retired_cases", "DELETE FROM job_rounds"}
		}, 2, "repair"},
		{"sealed verdict edited to passed, rounds deleted", func(string) []string {
			return []string{"UPDATE verdicts SET passed = 1, record = '{}'", "UPDATE evaluations SET passed = 1", "DELETE FROM retired_cases", "DELETE FROM job_rounds"}
		}, 2, "repair"},
		{"rejected round marked admitted", func(string) []string {
			return []string{"UPDATE job_rounds SET status = 'admitted', failure = NULL", "DELETE FROM retired_cases"}
		}, 3, "repair"},
		// The round is resumed: settled from the signed sealed result, never re-evaluated.
		{"rejected round reset to running with another candidate", func(string) []string {
			return []string{"UPDATE job_rounds SET status = 'running', failure = NULL, finished = NULL, candidate = 'sha256:" + strings.Repeat("1", 64) + "'"}
		}, 2, "sealed"},
		{"job marked admitted with a forged ref", func(dir string) []string {
			return []string{"UPDATE jobs SET status = 'admitted', outcome = 'admitted in round 1', admitted = '" + forged(dir) + "'",
				"UPDATE job_rounds SET status = 'admitted', failure = NULL"}
		}, 3, "repair"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := newReconstructFixture(t, "1")
			failedApply(t, dir)
			before := showJobJSON(t, dir, "sorter")
			wrong := before.RoundList[0].Candidate
			if before.Status != "exhausted" || wrong == "" || len(sealedResults(t, dir)[wrong]) != 1 {
				t.Fatalf("before the forgery: %+v", before)
			}
			sqlOn(t, dir, c.forge(dir)...)
			if p := planCapability(t, dir, "capability.sorter"); p["status"] != "reconstruct" {
				t.Fatalf("the forged rows made the plan pin something: %v", p)
			}
			raiseCandidates(t, dir, "1", "3")
			r := apply(t, dir, nil)
			if r.code != 0 {
				t.Fatalf("apply after the forgery: exit %d\n%s", r.code, r.stderr)
			}
			j := showJobJSON(t, dir, "sorter")
			last := j.RoundList[len(j.RoundList)-1]
			if j.Status != "admitted" || len(j.RoundList) != c.rounds || last.Status != "admitted" || last.Candidate == wrong ||
				j.Admitted == forged(dir) || !strings.HasPrefix(j.Admitted, "oci-layout:"+dir) || strings.Contains(r.stderr, forged(dir)) {
				t.Fatalf("job after the forgery: %+v", j)
			}
			// The wrong candidate, proposed again, is refused before the sealed suite (or
			// settled from its signed sealed failure when its round is resumed).
			for _, rd := range j.RoundList[:len(j.RoundList)-1] {
				if rd.Candidate != wrong || rd.Status == "admitted" && rd.N != 1 {
					t.Errorf("round %d: %+v", rd.N, rd)
				}
				if rd.Status == "rejected" && (rd.Failure == nil || rd.Failure.Suite != c.again || rd.Failure.Case != "sealed/dup.json") {
					t.Errorf("round %d's failure: %+v; want the %s suite's sealed/dup.json", rd.N, rd.Failure, c.again)
				}
			}
			// One sealed meeting per candidate: this apply's was the right candidate's, on
			// the sealed suite without the disclosed case.
			if _, sealed := jobEvents(r); sealed != 1 {
				t.Errorf("this apply ran the sealed suite %d times, want 1 (the right candidate's)", sealed)
			}
			results := sealedResults(t, dir)
			right := results[last.Candidate]
			if len(results) != 2 || len(results[wrong]) != 1 || results[wrong][0].Passed() || len(right) != 1 || !right[0].Passed() ||
				len(right[0].Predicate.GetPassedTests())+len(right[0].Predicate.GetFailedTests()) != 1 {
				t.Errorf("signed sealed results: %d candidates, the wrong one %d, the right one %d", len(results), len(results[wrong]), len(right))
			}
			ws, err := workspace.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			vs, err := ws.State.Verdicts(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rows := map[digest.Digest]int{}
			for _, v := range vs {
				rows[v.Candidate]++
			}
			if rows[last.Candidate] != 1 || rows[wrong] > 1 {
				t.Errorf("verdict rows by candidate: %v", rows)
			}
			code, out, _ := foundry(t, dir, "effects", "-json")
			var effects []effectJSON
			if code != 0 || json.Unmarshal([]byte(out), &effects) != nil || len(effects) != 1 || effects[0].Status != "succeeded" {
				t.Errorf("publishes (exit %d): %s", code, out)
			}
		})
	}
}

// statementOf is the in-toto statement in a DSSE envelope, unverified (verify checks it).
type statementOf struct {
	PredicateType string `json:"predicateType"`
	Predicate     struct {
		BuildDefinition struct {
			ResolvedDependencies []struct {
				Name, URI string
			} `json:"resolvedDependencies"`
		} `json:"buildDefinition"`
	} `json:"predicate"`
}

func readStatement(t *testing.T, path string) (envelope map[string]any, st statementOf) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &envelope); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(envelope["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	return envelope, st
}

// Re-proposing a candidate the sealed suite already judged, through every way a proposal
// arrives (foundry jobs propose, the MCP propose tool, and a proposals row forged into the
// state database for the waiting round), never puts it before the sealed suite again: its
// disclosed case now guards it in repair, and it is rejected there. Only the right
// candidate's sealed pass admits anything.
func TestReproposedCandidateIsNotResealed(t *testing.T) {
	dir := newReconstructFixture(t, "5", builderBlock, `    proposals { outputs = ["/out/sorter"] }`)
	ra := startApply(t, dir, "runc")
	ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	cs := connectStdio(t, dir, "-allow", "propose")
	id := ""
	rejected := func() {
		t.Helper()
		ra.waitFor(t, "candidate_rejected", "capability.sorter")
		ra.waitFor(t, "reconstruct_waiting", "capability.sorter")
	}
	mcpPropose := func(unique bool) {
		t.Helper()
		res := callTool(t, cs, "propose", map[string]any{"job": id, "files": []map[string]any{{"path": "out/sorter", "content": sorterScript(unique), "executable": true}}})
		if res.IsError {
			t.Fatalf("propose: %s", resultText(res))
		}
	}
	for i := range 2 { // rounds 1 and 2, through the CLI
		if code, _, errs := foundry(t, dir, "jobs", "propose", "sorter", writeProposal(t, sorterScript(true))); code != 0 {
			t.Fatalf("jobs propose %d (exit %d): %s", i+1, code, errs)
		}
		rejected()
	}
	id = showJobJSON(t, dir, "sorter").ID
	mcpPropose(true) // round 3
	rejected()
	// Round 4: a proposals row written straight into the state database, naming round 1's
	// files, is taken as any proposal is, and judged as one.
	sqlOn(t, dir, `INSERT INTO proposals (job_id, n, tree, source, by, spend, submitted) SELECT job_id, 4, tree, 'mcp', 'forged', 0, 1 FROM proposals WHERE n = 1`)
	rejected()
	mcpPropose(false) // round 5
	if code := ra.wait(t); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, ra.stderrText())
	}

	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 5 || j.RoundList[4].Status != "admitted" {
		t.Fatalf("job: %+v", j)
	}
	wrong := j.RoundList[0].Candidate
	for _, rd := range j.RoundList[:4] {
		suite := "repair"
		if rd.N == 1 {
			suite = "sealed"
		}
		if rd.Candidate != wrong || rd.Status != "rejected" || rd.Failure == nil || rd.Failure.Suite != suite || rd.Failure.Case != "sealed/dup.json" {
			t.Errorf("round %d: candidate %s (round 1's %s), %s, failure %+v; want the %s suite's sealed/dup.json", rd.N, rd.Candidate, wrong, rd.Status, rd.Failure, suite)
		}
	}
	if _, sealed := jobEvents(applyRun{stderr: ra.stderrText()}); sealed != 2 {
		t.Errorf("the sealed suite ran %d times, want 2 (once per candidate)", sealed)
	}
	results := sealedResults(t, dir)
	if len(results) != 2 || len(results[wrong]) != 1 || results[wrong][0].Passed() || len(results[j.RoundList[4].Candidate]) != 1 {
		t.Errorf("signed sealed results: %d candidates, round 1's %d, round 5's %d", len(results), len(results[wrong]), len(results[j.RoundList[4].Candidate]))
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if vs, err := ws.State.Verdicts(context.Background()); err != nil || len(vs) != 2 || vs[0].Candidate == vs[1].Candidate {
		t.Errorf("verdict rows: %+v (%v); want one per candidate", vs, err)
	}
}

// foundry verify of a reconstructed capability's admission checks the whole chain, whose
// inputs hold the builder's signed provenance of every round, each naming the job and its
// round by the URI of the /job it read; a round's statement changed in the attestations
// breaks the chain.
func TestReconstructionAdmissionVerifiesItsRounds(t *testing.T) {
	dir := newReconstructFixture(t, "3")
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || len(j.RoundList) != 2 {
		t.Fatalf("job: %+v", j)
	}
	// The builder's provenance of each round, by the round its /job names.
	atts := filepath.Join(dir, ".foundry", "attestations")
	files, err := filepath.Glob(filepath.Join(atts, "*.intoto.json"))
	if err != nil {
		t.Fatal(err)
	}
	rounds := map[int]string{} // round → its provenance file
	for _, f := range files {
		_, st := readStatement(t, f)
		for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
			for n := 1; n <= 2; n++ {
				if d.Name == "/job" && d.URI == "foundry:capability.sorter#"+j.ID+"/round-"+string(rune('0'+n)) {
					rounds[n] = f
				}
			}
		}
	}
	if len(rounds) != 2 {
		t.Fatalf("the builder's provenance by round: %v", rounds)
	}
	pub := filepath.Join(dir, ".foundry", "keys", "signing.pub")
	summary := "https://slsa.dev/verification_summary/v1"
	// The registry copy, with its attached attestations: the chain holds both rounds'.
	code, out, errs := foundry(t, dir, "verify", "-key", pub, j.Admitted)
	if code != 0 || !strings.Contains(out, "PASS sealed-evaluation") || !strings.Contains(out, "PASS inputs") {
		t.Fatalf("verify %s: exit %d\n%s%s", j.Admitted, code, out, errs)
	}
	for n, f := range rounds {
		b, _ := os.ReadFile(f)
		if d := digest.FromBytes(b); !strings.Contains(out, "("+string(d)+"): accepted") {
			t.Errorf("verify did not accept round %d's builder provenance %s among the admission's inputs:\n%s", n, d, out)
		}
	}
	local := []string{"verify", "-key", pub, "-attestations", atts, "-type", summary, string(j.RoundList[1].Candidate)}
	if code, out, errs := foundry(t, dir, local...); code != 0 {
		t.Fatalf("verify from the attestations: exit %d\n%s%s", code, out, errs)
	}
	// Round 1's statement now says it was round 3: its signature no longer holds, nor the
	// digest the summary lists it by.
	env, _ := readStatement(t, rounds[1])
	payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	env["payload"] = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(payload), "/round-1", "/round-3", 1)))
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rounds[1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := foundry(t, dir, local...); code != exitError || !strings.Contains(out, "FAIL inputs") {
		t.Errorf("verify with round 1's statement changed: exit %d\n%s%s", code, out, errs)
	}
}

// A round's row names its builder run by action key, and the admission binds every earlier
// round's builder provenance: a row forged to name another step's run binds nothing of
// it, since the signed provenance of the run it names does not name the job's round.
func TestForgedRoundBuilderBindsNothing(t *testing.T) {
	dir := newReconstructFixture(t, "1")
	if err := os.WriteFile(filepath.Join(dir, "other.hcl"), []byte(`step "other" {
  image   = seed.bb
  run     = ["sh", "-c", "echo other > /out/other"]
  outputs = ["/out/other"]
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	failedApply(t, dir)
	sqlOn(t, dir, `UPDATE job_rounds SET builder_action = (SELECT action_digest FROM nodes WHERE address = 'step.other' LIMIT 1)`)
	if j := showJobJSON(t, dir, "sorter"); len(j.RoundList) != 1 || j.RoundList[0].Builder == "" {
		t.Fatalf("the forged round: %+v", j.RoundList)
	}
	raiseCandidates(t, dir, "1", "3")
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	j := showJobJSON(t, dir, "sorter")
	code, out, errs := foundry(t, dir, "verify", "-key", filepath.Join(dir, ".foundry", "keys", "signing.pub"), j.Admitted)
	if code != 0 || j.Status != "admitted" || !strings.Contains(out, `subjects: "/out/sorter"`) {
		t.Fatalf("verify %s: exit %d\n%s%s", j.Admitted, code, out, errs)
	}
	if strings.Contains(out, `"/out/other"`) {
		t.Errorf("the admission binds step.other's provenance as round 1's builder:\n%s", out)
	}
}

// After the registry loses a reconstructed admission and its publish row is forged to name
// another manifest, the next apply reopens the job: its next round's candidate (the same
// as the admitted one) is settled by the sealed pass it already has, never run on the
// sealed suite again, and published for real; the forged reference is never reported.
func TestReconstructionForgedPublishRowIsNotEchoed(t *testing.T) {
	dir := newReconstructFixture(t, "3")
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	admitted := showJobJSON(t, dir, "sorter")
	right := admitted.RoundList[1].Candidate
	forged := "oci-layout:/elsewhere@sha256:" + strings.Repeat("0", 64)
	sqlOn(t, dir, `UPDATE effects SET result = '`+forged+`' WHERE kind = 'publish'`)
	if err := os.RemoveAll(filepath.Join(dir, ".foundry", "registry")); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 || strings.Contains(r.stderr, forged) || !strings.Contains(r.stderr, "sealed suite: passed (recorded evaluation") ||
		!strings.Contains(r.stderr, "ADM capability.sorter: reconstruct round 3 admitted as oci-layout:"+dir) {
		t.Fatalf("apply after the forgery: exit %d\n%s", r.code, r.stderr)
	}
	j := showJobJSON(t, dir, "sorter")
	if j.Status != "admitted" || j.Admitted == forged || len(j.RoundList) != 3 || j.RoundList[2].Candidate != right {
		t.Errorf("job: %+v", j)
	}
	if results := sealedResults(t, dir); len(results) != 2 || len(results[right]) != 1 {
		t.Errorf("signed sealed results: %d candidates, the admitted one %d", len(results), len(results[right]))
	}
}

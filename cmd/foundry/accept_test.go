package main

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/provenance"
)

// acceptEvent is a product_accepted or acceptance_failed event of apply -progress json.
type acceptEvent struct {
	Type, Node, Ref, Message string
	Cases                    int
	CasesPassed              int `json:"cases_passed"`
}

func acceptEvents(t *testing.T, stderr string) map[string]acceptEvent {
	t.Helper()
	out := map[string]acceptEvent{}
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e acceptEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil && (e.Type == "product_accepted" || e.Type == "acceptance_failed") {
			out[e.Node] = e
		}
	}
	return out
}

// Acceptance through the service's HTTP interface (testdata/accept): three products build
// the same scores service. The one that keeps uploads in its data volume is accepted, with
// a signed acceptance result; the one that keeps them in memory answers every request
// before the restart and fails the first one after it; the one that keeps a malformed
// upload it refused fails the case that checks the store is unchanged. Each failure shows
// the request, what was expected and what came back. The next apply reuses the signed pass
// and runs the failing acceptances again.
func TestAcceptanceCatchesDataKeptInMemory(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "accept"), dir)

	r := apply(t, dir, nil)
	if r.code == 0 {
		t.Fatalf("apply accepted every product:\n%s", r.stderr)
	}
	if !sameSet(r.executed, "product.durable.step.server", "product.forgetful.step.server", "product.careless.step.server") {
		t.Errorf("executed %v", r.executed)
	}
	ev := acceptEvents(t, r.stderr)
	durable := ev["product.durable"]
	if durable.Type != "product_accepted" || durable.Cases != 2 || durable.CasesPassed != 2 || !strings.HasPrefix(durable.Ref, "sha256:") {
		t.Errorf("durable: %+v", durable)
	}
	for _, p := range []string{"product.forgetful", "product.careless"} {
		if ev[p].Type != "acceptance_failed" {
			t.Errorf("%s: %+v", p, ev[p])
		}
	}
	for _, want := range []string{
		// In memory: requests 1 and 2 pass, 3 is the restart, 4 finds nothing.
		"product.forgetful: acceptance failed: answered 404 (error \"not_found\"), want 2xx (success)",
		"request:  request 4 of 5: GET /cgi-bin/scores?id=1\n",
		"expected: [1,2,2,3]\n",
		`got:      status 404 (error "not_found"); body "{\"error\":\"not_found\"}\n"`,
		// A refused upload that was kept anyway.
		"product.careless: acceptance failed: answered 200, want 404 (error \"not_found\")",
		"case acceptance/malformed.json",
		"request:  request 6 of 7: GET /cgi-bin/scores?id=2\n",
		`got:      status 200; body "[\"notalist\"]\n"`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("stderr:\n%s", r.stderr)
	}

	// The evidence: a signed acceptance result per product, the durable one PASSED on both
	// cases, under the product's address, about the service's tree.
	results := acceptanceResults(t, dir)
	byEnv := map[string]provenance.SignedTestResult{}
	for _, tr := range results {
		byEnv[tr.Digest] = tr
	}
	pass, ok := byEnv[durable.Ref]
	if !ok || !pass.Passed() || pass.Capability != "product.durable" ||
		strings.Join(pass.Predicate.GetPassedTests(), ",") != "acceptance/malformed.json,acceptance/restart.json" ||
		len(pass.Subjects) != 1 || pass.Configuration["candidate-image"] == "" {
		t.Fatalf("the durable product's evidence %s: %+v (of %d results)", durable.Ref, pass.TestResult, len(results))
	}
	forgot := byEnv[ev["product.forgetful"].Ref]
	if forgot.TestResult == nil || forgot.Passed() || len(forgot.Predicate.GetFailedTests()) != 2 {
		t.Fatalf("the forgetful product's evidence: %+v", forgot.TestResult)
	}

	// Again: the pass is reused from its signed result; the failures run again.
	r = apply(t, dir, nil)
	ev = acceptEvents(t, r.stderr)
	if r.code == 0 || ev["product.durable"].Ref != durable.Ref || !strings.Contains(ev["product.durable"].Message, "accepted before") ||
		ev["product.forgetful"].Type != "acceptance_failed" || len(r.executed) != 0 {
		t.Fatalf("second apply: exit %d, executed %v, events %+v\n%s", r.code, r.executed, ev, r.stderr)
	}
	if n := len(acceptanceResults(t, dir)); n != len(results)+2 {
		t.Errorf("second apply: %d acceptance results, want %d (two failures signed again, the pass reused)", n, len(results)+2)
	}
}

// acceptanceResults are the acceptance results in dir's attestation directory that verify
// with the project's key.
func acceptanceResults(t *testing.T, dir string) []provenance.SignedTestResult {
	t.Helper()
	keys, err := provenance.LoadVerifiers(filepath.Join(dir, ".foundry", "keys", "signing.pub"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := provenance.TestResultsIn(filepath.Join(dir, ".foundry", "attestations"), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []provenance.SignedTestResult
	for _, tr := range all {
		if tr.Suite == provenance.SuiteAcceptance {
			out = append(out, tr)
		}
	}
	return out
}

package provenance

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

var testContract = sha("contract int-sort")

func testEvaluatorID(t testing.TB) string {
	t.Helper()
	id, err := EvaluatorID("containerd", IsolationContainer)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// testEvaluation is what the evaluator might observe running suite on candidate.
func testEvaluation(t testing.TB, candidate, suite string, cases ...CaseResult) *Evaluation {
	t.Helper()
	if len(cases) == 0 {
		cases = []CaseResult{{Name: "empty", Pass: true}, {Name: "duplicates", Pass: true}, {Name: "int64-extremes", Pass: true}}
	}
	start := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	return &Evaluation{
		Capability:     "int-sort",
		ContractDigest: testContract,
		Candidate:      candidate,
		Suite:          suite,
		SuiteDigest:    sha("suite " + suite),
		Evaluator:      testEvaluatorID(t),
		Cases:          cases,
		StartedOn:      start,
		FinishedOn:     start.Add(2 * time.Second),
		Configuration:  []Dependency{{Name: "runner", URI: "oci:seed.busybox", Digest: sha("runner")}},
	}
}

func mintTR(t testing.TB, kp keyPair, e *Evaluation) []byte {
	t.Helper()
	st, err := NewTestResult(e)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Sign(kp.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// statementJSON decodes a minted statement as generic JSON, the way another tool would.
func statementJSON(t *testing.T, st *Statement) map[string]any {
	t.Helper()
	b, err := st.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewTestResult(t *testing.T) {
	cand := sha("candidate tree")
	e := testEvaluation(t, cand, SuiteSealed,
		CaseResult{Name: "b", Pass: true}, CaseResult{Name: "a", Pass: true})
	e.URL = "https://ci.example/runs/1"
	st, err := NewTestResult(e)
	if err != nil {
		t.Fatal(err)
	}
	m := statementJSON(t, st)
	if m["predicateType"] != "https://in-toto.io/attestation/test-result/v0.1" {
		t.Errorf("predicateType %v", m["predicateType"])
	}
	subj := m["subject"].([]any)
	if len(subj) != 1 || subj[0].(map[string]any)["name"] != "int-sort" ||
		subj[0].(map[string]any)["digest"].(map[string]any)["sha256"] != strings.TrimPrefix(cand, "sha256:") {
		t.Errorf("subject %v", subj)
	}
	pred := m["predicate"].(map[string]any)
	if pred["result"] != "PASSED" || pred["url"] != e.URL {
		t.Errorf("predicate %v", pred)
	}
	if got := pred["passedTests"].([]any); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("passedTests %v (want sorted a, b)", got)
	}
	if _, ok := pred["failedTests"]; ok {
		t.Errorf("failedTests present on a pass: %v", pred["failedTests"])
	}
	roles := map[string]map[string]any{}
	for _, c := range pred["configuration"].([]any) {
		rd := c.(map[string]any)
		roles[rd["annotations"].(map[string]any)["foundry_role"].(string)] = rd
	}
	if roles["contract"]["name"] != "int-sort" || roles["contract"]["digest"].(map[string]any)["sha256"] != strings.TrimPrefix(testContract, "sha256:") {
		t.Errorf("contract descriptor %v", roles["contract"])
	}
	if roles["suite"]["name"] != "sealed" {
		t.Errorf("suite descriptor %v", roles["suite"])
	}
	ev := roles["evaluator"]
	if ev["uri"] != testEvaluatorID(t) || ev["annotations"].(map[string]any)["foundry_startedOn"] != "2026-11-29T19:00:00Z" {
		t.Errorf("evaluator descriptor %v", ev)
	}
	if roles["configuration"]["name"] != "runner" {
		t.Errorf("configuration descriptor %v", roles["configuration"])
	}

	// The parser reads back what was minted.
	tr, err := ParseTestResult(st.InToto())
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Passed() || tr.Suite != SuiteSealed || tr.ContractDigest != testContract || tr.Capability != "int-sort" ||
		tr.Evaluator != testEvaluatorID(t) || len(tr.Subjects) != 1 || tr.Subjects[0] != cand || tr.SuiteDigest != sha("suite sealed") {
		t.Errorf("parsed %+v", tr)
	}
}

func TestTestResultFailsIfAnyCaseFails(t *testing.T) {
	e := testEvaluation(t, sha("c"), SuiteSealed,
		CaseResult{Name: "ok", Pass: true}, CaseResult{Name: "dups", Pass: false}, CaseResult{Name: "neg", Pass: false})
	st, err := NewTestResult(e)
	if err != nil {
		t.Fatal(err)
	}
	pred := statementJSON(t, st)["predicate"].(map[string]any)
	if pred["result"] != "FAILED" {
		t.Fatalf("result %v with failing cases", pred["result"])
	}
	if got := pred["failedTests"].([]any); len(got) != 2 || got[0] != "dups" || got[1] != "neg" {
		t.Errorf("failedTests %v", got)
	}
	tr, err := ParseTestResult(st.InToto())
	if err != nil || tr.Passed() || tr.Result != ResultFailed {
		t.Fatalf("parsed %+v, %v", tr, err)
	}
	// Every case failing is FAILED too; no case at all is refused, not PASSED.
	e = testEvaluation(t, sha("c"), SuiteDev, CaseResult{Name: "x"})
	if st, err := NewTestResult(e); err != nil || statementJSON(t, st)["predicate"].(map[string]any)["result"] != "FAILED" {
		t.Fatalf("all failing: %v", err)
	}
}

func TestNewTestResultRefuses(t *testing.T) {
	for name, mut := range map[string]func(*Evaluation){
		"no cases":         func(e *Evaluation) { e.Cases = nil },
		"duplicate case":   func(e *Evaluation) { e.Cases = []CaseResult{{Name: "a", Pass: true}, {Name: "a", Pass: true}} },
		"empty case name":  func(e *Evaluation) { e.Cases = []CaseResult{{Name: "", Pass: true}} },
		"control in name":  func(e *Evaluation) { e.Cases = []CaseResult{{Name: "a\nb", Pass: true}} },
		"unknown suite":    func(e *Evaluation) { e.Suite = "hidden" },
		"no capability":    func(e *Evaluation) { e.Capability = "" },
		"bad candidate":    func(e *Evaluation) { e.Candidate = "sha256:abc" },
		"bad contract":     func(e *Evaluation) { e.ContractDigest = "" },
		"no suite digest":  func(e *Evaluation) { e.SuiteDigest = "" },
		"no evaluator":     func(e *Evaluation) { e.Evaluator = "" },
		"relative id":      func(e *Evaluation) { e.Evaluator = "evaluator" },
		"no times":         func(e *Evaluation) { e.StartedOn = time.Time{} },
		"time backwards":   func(e *Evaluation) { e.FinishedOn = e.StartedOn.Add(-time.Second) },
		"bad config":       func(e *Evaluation) { e.Configuration = []Dependency{{Name: "x", Digest: "md5:1"}} },
		"relative url":     func(e *Evaluation) { e.URL = "runs/1" },
		"config no digest": func(e *Evaluation) { e.Configuration = []Dependency{{Name: "x"}} },
	} {
		t.Run(name, func(t *testing.T) {
			e := testEvaluation(t, sha("c"), SuiteSealed)
			mut(e)
			if _, err := NewTestResult(e); err == nil {
				t.Fatal("minted")
			}
		})
	}
	if _, err := NewTestResult(nil); err == nil {
		t.Fatal("minted from nil")
	}
}

func TestEvaluatorID(t *testing.T) {
	if id := testEvaluatorID(t); id != "https://foundry.dev/evaluator/containerd@v1?isolation=container" {
		t.Errorf("evaluator id %q", id)
	}
	if _, err := EvaluatorID("local", IsolationContainer); err == nil {
		t.Error("local executor labelled as a container")
	}
	local, _ := EvaluatorID("local", IsolationNone)
	if slices.Contains(DefaultEvaluators(), local) {
		t.Error("the unsandboxed evaluator is allowed by default")
	}
}

// chain is a candidate with its provenance, dev and sealed test results, all signed by kp.
type chain struct {
	kp                   keyPair
	candidate            string
	prov, dev, sealed    []byte
	policyURI, policyDig string
}

func newChain(t *testing.T) *chain {
	t.Helper()
	kp := newKeyPair(t, KeyECDSAP256)
	c := &chain{kp: kp, candidate: sha("candidate tree"), policyURI: "https://foundry.dev/policy/admission/v1", policyDig: sha("policy")}
	c.prov = mint(t, kp, testExecution(c.candidate))
	c.dev = mintTR(t, kp, testEvaluation(t, c.candidate, SuiteDev))
	c.sealed = mintTR(t, kp, testEvaluation(t, c.candidate, SuiteSealed))
	return c
}

func (c *chain) admission(inputs ...[]byte) *Admission {
	a := &Admission{
		Subject:        Artifact{Name: "int-sort", Digest: c.candidate},
		ContractDigest: testContract,
		ResourceURI:    "oci-layout:.foundry/registry@" + c.candidate,
		TimeVerified:   time.Date(2026, 11, 29, 19, 1, 0, 0, time.UTC),
		Policy:         PolicyRef{URI: c.policyURI, Digest: c.policyDig},
		Keys:           c.kp.keys,
		VerifiedLevels: []string{LevelProvenanceVerified},
	}
	for i, in := range inputs {
		a.Inputs = append(a.Inputs, Attestation{Source: "input" + string(rune('0'+i)), Envelope: in})
	}
	return a
}

func (c *chain) summary(t testing.TB, a *Admission) []byte {
	t.Helper()
	st, err := NewVerificationSummary(a)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Sign(c.kp.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestNewVerificationSummary(t *testing.T) {
	c := newChain(t)
	st, err := NewVerificationSummary(c.admission(c.prov, c.dev, c.sealed, c.sealed))
	if err != nil {
		t.Fatal(err)
	}
	m := statementJSON(t, st)
	if m["predicateType"] != "https://slsa.dev/verification_summary/v1" {
		t.Errorf("predicateType %v", m["predicateType"])
	}
	subj := m["subject"].([]any)[0].(map[string]any)
	if subj["name"] != "int-sort" || subj["digest"].(map[string]any)["sha256"] != strings.TrimPrefix(c.candidate, "sha256:") ||
		subj["annotations"].(map[string]any)["foundry_contract"] != testContract {
		t.Errorf("subject %v", subj)
	}
	pred := m["predicate"].(map[string]any)
	if pred["verificationResult"] != "PASSED" || pred["verifier"].(map[string]any)["id"] != VerifierIDAdmission ||
		pred["timeVerified"] != "2026-11-29T19:01:00Z" || pred["resourceUri"] != "oci-layout:.foundry/registry@"+c.candidate {
		t.Errorf("predicate %v", pred)
	}
	pol := pred["policy"].(map[string]any)
	if pol["uri"] != c.policyURI || pol["digest"].(map[string]any)["sha256"] != strings.TrimPrefix(c.policyDig, "sha256:") {
		t.Errorf("policy %v", pol)
	}
	levels := pred["verifiedLevels"].([]any)
	if len(levels) != 2 || levels[0] != LevelProvenanceVerified || levels[1] != LevelSealedEvaluationPassed {
		t.Errorf("levels %v", levels)
	}
	for _, l := range levels {
		if strings.HasPrefix(l.(string), "SLSA_") {
			t.Errorf("level %v", l)
		}
	}
	var got []string
	for _, in := range pred["inputAttestations"].([]any) {
		got = append(got, "sha256:"+in.(map[string]any)["digest"].(map[string]any)["sha256"].(string))
	}
	want := []string{EnvelopeDigest(c.prov), EnvelopeDigest(c.dev), EnvelopeDigest(c.sealed)}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("inputAttestations %v, want the three envelope digests %v (deduplicated, sorted)", got, want)
	}
	p, err := ParseVerificationSummary(st.InToto())
	if err != nil || p.GetVerificationResult() != ResultPassed {
		t.Fatalf("parse: %v", err)
	}
	// The sealed level is always claimed, even if not asked for.
	a := c.admission(c.sealed)
	a.VerifiedLevels = nil
	st, err = NewVerificationSummary(a)
	if err != nil {
		t.Fatal(err)
	}
	if l := statementJSON(t, st)["predicate"].(map[string]any)["verifiedLevels"].([]any); len(l) != 1 || l[0] != LevelSealedEvaluationPassed {
		t.Errorf("levels %v", l)
	}
}

func TestLevelNames(t *testing.T) {
	for _, l := range []string{"SLSA_BUILD_LEVEL_3", "slsa_build_level_1", "SLSA_", "FOUNDRY_MADE_UP", "foundry_sealed_evaluation_passed", "", "FOUNDRY SEALED"} {
		if err := CheckLevel(l); err == nil {
			t.Errorf("level %q accepted", l)
		}
		c := newChainOnce(t)
		a := c.admission(c.prov, c.sealed)
		a.VerifiedLevels = []string{l}
		if _, err := NewVerificationSummary(a); err == nil {
			t.Errorf("summary minted with level %q", l)
		}
	}
	if err := CheckLevel("SLSA_BUILD_LEVEL_3"); err == nil || !strings.Contains(err.Error(), "SLSA_") {
		t.Errorf("SLSA_ refusal does not say why: %v", err)
	}
	for _, l := range []string{LevelSealedEvaluationPassed, LevelProvenanceVerified} {
		if err := CheckLevel(l); err != nil || strings.HasPrefix(l, "SLSA_") {
			t.Errorf("level %q: %v", l, err)
		}
	}
}

var sharedChain *chain

func newChainOnce(t *testing.T) *chain {
	if sharedChain == nil {
		sharedChain = newChain(t)
	}
	return sharedChain
}

// TestNoAdmissionWithoutSealedPass tries to mint a summary from every kind of evidence that
// is not a verified sealed pass for the subject.
func TestNoAdmissionWithoutSealedPass(t *testing.T) {
	c := newChain(t)
	other := newKeyPair(t, KeyEd25519)
	otherCand := mintTR(t, c.kp, testEvaluation(t, sha("another candidate"), SuiteSealed))
	failedSealed := mintTR(t, c.kp, testEvaluation(t, c.candidate, SuiteSealed,
		CaseResult{Name: "a", Pass: true}, CaseResult{Name: "b", Pass: false}))
	wrongKey := mintTR(t, other, testEvaluation(t, c.candidate, SuiteSealed))
	otherContract := testEvaluation(t, c.candidate, SuiteSealed)
	otherContract.ContractDigest = sha("another contract")
	localEval := testEvaluation(t, c.candidate, SuiteSealed)
	localEval.Evaluator, _ = EvaluatorID("local", IsolationNone)
	repair := mintTR(t, c.kp, testEvaluation(t, c.candidate, SuiteRepair))
	tampered := decodeRaw(t, c.sealed)
	tampered.Payload = strings.Replace(string(mustB64(t, tampered.Payload)), "int-sort", "int-s0rt", 1)
	tampered.Payload = b64(tampered.Payload)
	sbom := mintOther(t, c.kp, c.candidate)

	for name, inputs := range map[string][][]byte{
		"nothing":                  nil,
		"provenance only":          {c.prov},
		"dev suite only":           {c.prov, c.dev},
		"dev and repair only":      {c.dev, repair},
		"sealed for another":       {c.prov, otherCand},
		"sealed pass + another":    {c.prov, c.sealed, otherCand},
		"sealed failed":            {c.prov, failedSealed},
		"sealed failed + passed":   {c.prov, c.sealed, failedSealed},
		"sealed, wrong key":        {c.prov, wrongKey},
		"sealed, another contract": {c.prov, mintTR(t, c.kp, otherContract)},
		"sealed, local evaluator":  {c.prov, mintTR(t, c.kp, localEval)},
		"sealed, tampered":         {c.prov, tampered.bytes(t)},
		"garbage":                  {[]byte("{}"), c.sealed},
		"another type":             {c.sealed, sbom},
		"provenance wrong key":     {c.sealed, mint(t, other, testExecution(c.candidate))},
		"provenance local builder": {c.sealed, mint(t, c.kp, localExecution(c.candidate))},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewVerificationSummary(c.admission(inputs...)); err == nil {
				t.Fatal("minted a summary")
			} else {
				t.Log(err)
			}
		})
	}
	// A key the admission trusts may sign the sealed result, though (two keys given).
	a := c.admission(c.prov, wrongKey)
	a.Keys = append(a.Keys, other.keys...)
	if _, err := NewVerificationSummary(a); err != nil {
		t.Fatalf("sealed pass signed by a trusted second key: %v", err)
	}
	// Claiming provenance without any is refused; without the claim it mints.
	a = c.admission(c.sealed)
	if _, err := NewVerificationSummary(a); err == nil {
		t.Fatal("FOUNDRY_PROVENANCE_VERIFIED without provenance")
	}
	a.VerifiedLevels = nil
	if _, err := NewVerificationSummary(a); err != nil {
		t.Fatal(err)
	}
}

func TestNewVerificationSummaryRefusesIncompleteAdmission(t *testing.T) {
	c := newChainOnce(t)
	for name, mut := range map[string]func(*Admission){
		"no subject name":  func(a *Admission) { a.Subject.Name = "" },
		"bad subject":      func(a *Admission) { a.Subject.Digest = "sha256:00" },
		"no contract":      func(a *Admission) { a.ContractDigest = "" },
		"no time":          func(a *Admission) { a.TimeVerified = time.Time{} },
		"no policy uri":    func(a *Admission) { a.Policy.URI = "" },
		"no policy digest": func(a *Admission) { a.Policy.Digest = "" },
		"bad verifier":     func(a *Admission) { a.Verifier = "admission" },
		"no keys":          func(a *Admission) { a.Keys = nil },
		"nil key":          func(a *Admission) { a.Keys = []*Verifier{nil} },
	} {
		t.Run(name, func(t *testing.T) {
			a := c.admission(c.prov, c.sealed)
			mut(a)
			if _, err := NewVerificationSummary(a); err == nil {
				t.Fatal("minted")
			}
		})
	}
	if _, err := NewVerificationSummary(nil); err == nil {
		t.Fatal("minted from nil")
	}
}

func localExecution(out string) *Execution {
	e := testExecution(out)
	e.Executor, e.Isolation = "local", IsolationNone
	e.RuntimeSpecDigest = ""
	return e
}

// mintOther signs a statement of another predicate type about d (package-internal: the
// public API cannot do this, which is the point).
func mintOther(t *testing.T, kp keyPair, d string) []byte {
	t.Helper()
	ds, _ := digestSet(d)
	st := &Statement{st: &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: "x", Digest: ds}},
		PredicateType: "https://spdx.dev/Document",
		Predicate:     mustStruct(t, map[string]any{"spdxVersion": "SPDX-2.3"}),
	}}
	env, err := Sign(kp.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
)

// testResult mints and signs, as the evaluator would, a test result of suite for the
// candidate with digest d: every case passes, plus a failing case for each name in failing.
func (f *verifyFixture) testResult(t *testing.T, d, suite string, failing ...string) []byte {
	t.Helper()
	eval, err := provenance.EvaluatorID("containerd", provenance.IsolationContainer)
	if err != nil {
		t.Fatal(err)
	}
	cases := []provenance.CaseResult{{Name: "empty", Pass: true}, {Name: "duplicates", Pass: true}}
	for _, n := range failing {
		cases = append(cases, provenance.CaseResult{Name: n})
	}
	start := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	st, err := provenance.NewTestResult(&provenance.Evaluation{
		Capability: "tool", ContractDigest: fakeDigest("contract"), Candidate: d,
		Suite: suite, SuiteDigest: fakeDigest("suite " + suite), Evaluator: eval,
		Cases: cases, StartedOn: start, FinishedOn: start.Add(time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := provenance.Sign(f.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// admit mints and signs a verification summary for d from inputs, as admission would.
func (f *verifyFixture) admit(t *testing.T, d string, inputs ...[]byte) ([]byte, error) {
	t.Helper()
	keys, err := provenance.LoadVerifiers(f.pub)
	if err != nil {
		t.Fatal(err)
	}
	a := &provenance.Admission{
		Subject:        provenance.Artifact{Name: "tool", Digest: d},
		ContractDigest: fakeDigest("contract"),
		TimeVerified:   time.Date(2026, 11, 29, 19, 1, 0, 0, time.UTC),
		Policy:         provenance.PolicyRef{URI: "https://foundry.dev/policy/admission/v1", Digest: fakeDigest("policy")},
		Keys:           keys,
		VerifiedLevels: []string{provenance.LevelProvenanceVerified},
	}
	for _, in := range inputs {
		a.Inputs = append(a.Inputs, provenance.Attestation{Envelope: in})
	}
	st, err := provenance.NewVerificationSummary(a)
	if err != nil {
		return nil, err
	}
	return provenance.Sign(f.signer, st)
}

func TestVerifyAdmissionChain(t *testing.T) {
	f := newVerifyFixture(t)
	bin := f.write(t, "out/tool", []byte("#!/bin/sh\necho tool\n"))
	d, _, err := digest.File(bin)
	if err != nil {
		t.Fatal(err)
	}
	prov := f.attest(t, "tool", string(d), "containerd", provenance.IsolationContainer)
	dev := f.testResult(t, string(d), provenance.SuiteDev)
	sealed := f.testResult(t, string(d), provenance.SuiteSealed)
	if _, err := f.admit(t, string(d), prov, dev); err == nil {
		t.Fatal("admitted without a sealed pass")
	}
	if _, err := f.admit(t, string(d), prov, f.testResult(t, string(d), provenance.SuiteSealed, "int64-extremes")); err == nil {
		t.Fatal("admitted with a failed sealed run")
	}
	vsa, err := f.admit(t, string(d), prov, dev, sealed)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.dir, "att")
	var sealedPath string
	for _, e := range [][]byte{prov, dev, sealed, vsa} {
		p, err := provenance.WriteEnvelope(dir, e)
		if err != nil {
			t.Fatal(err)
		}
		if string(e) == string(sealed) {
			sealedPath = p
		}
	}

	const vsaType = "https://slsa.dev/verification_summary/v1"
	code, out, errOut := runCLI(t, "verify", "-key", f.pub, "-attestations", dir, "--type", vsaType, bin)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"VERIFIED: 1 of 1", "PASS verifier", "PASS inputs", "PASS sealed-evaluation", "PASS provenance", "input attestation"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// JSON: the summary's inputs are in the report.
	code, out, _ = runCLI(t, "verify", "-key", f.pub, "-attestations", dir, "-type", vsaType, "-json", string(d))
	var rep provenance.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || !rep.OK {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	var inputs int
	for _, at := range rep.Artifacts[0].Attestations {
		if at.PredicateType == vsaType {
			inputs = len(at.Inputs)
		}
	}
	if inputs != 3 {
		t.Errorf("JSON report lists %d inputs of the summary, want 3", inputs)
	}

	// An evaluator the auditor does not allow: the test results stop counting.
	code, out, _ = runCLI(t, "verify", "-key", f.pub, "-attestations", dir, "-type", vsaType,
		"-policy", f.write(t, "strict.json", []byte(`{"evaluators":["https://example.com/evaluator"]}`)), bin)
	if code != exitError || !strings.Contains(out, "FAIL sealed-evaluation [no-sealed-pass]") {
		t.Fatalf("foreign evaluator allowlist: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI(t, "verify", "-key", f.pub, "-attestations", dir, "-evaluator", "", bin); code != exitUsage {
		t.Errorf("empty -evaluator: exit %d", code)
	}

	// The sealed test result removed: the chain breaks and the report says where.
	if err := os.Remove(sealedPath); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "verify", "-key", f.pub, "-attestations", dir, "-type", vsaType, bin)
	if code != exitError {
		t.Fatalf("exit %d without the sealed test result\n%s", code, out)
	}
	for _, want := range []string{"NOT VERIFIED", "FAIL inputs [input-missing]", "FAIL sealed-evaluation [no-sealed-pass]", "PASS provenance"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// Provenance alone still verifies as provenance: the default type is unaffected.
	if code, out, _ := runCLI(t, "verify", "-key", f.pub, "-attestations", dir, bin); code != exitOK {
		t.Fatalf("provenance: exit %d\n%s", code, out)
	}
}

// TestCosignVerifiesAdmission: the test result and the summary are ordinary signed in-toto
// attestations to cosign, verified with the project key and filtered by their predicate
// type, as an auditor would check them without foundry.
func TestCosignVerifiesAdmission(t *testing.T) {
	cosign := findCosign(t)
	f := newVerifyFixture(t)
	bin := f.write(t, "out/tool", []byte("#!/bin/sh\necho tool\n"))
	d, _, err := digest.File(bin)
	if err != nil {
		t.Fatal(err)
	}
	prov := f.attest(t, "tool", string(d), "containerd", provenance.IsolationContainer)
	sealed := f.testResult(t, string(d), provenance.SuiteSealed)
	vsa, err := f.admit(t, string(d), prov, sealed)
	if err != nil {
		t.Fatal(err)
	}
	other := f.write(t, "out/other", []byte("other"))
	for _, tc := range []struct {
		env      []byte
		typ      string
		artifact string
		ok       bool
	}{
		{sealed, provenance.PredicateTestResult, bin, true},
		{vsa, provenance.PredicateVSA, bin, true},
		{vsa, provenance.PredicateVSA, other, false},             // another artifact
		{vsa, provenance.PredicateTestResult, bin, false},        // another type
		{sealed, provenance.PredicateSLSAProvenance, bin, false}, // another type
	} {
		envPath := f.write(t, "cosign.intoto.json", tc.env)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, cosign, "verify-blob-attestation", "--key", f.pub,
			"--signature", envPath, "--type", tc.typ, "--insecure-ignore-tlog", tc.artifact).CombinedOutput()
		cancel()
		if (err == nil) != tc.ok {
			t.Errorf("cosign --type %s on %s: err=%v, want ok=%v\n%s", tc.typ, filepath.Base(tc.artifact), err, tc.ok, out)
		}
	}
}

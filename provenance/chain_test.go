package provenance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vsa "github.com/in-toto/attestation/go/predicates/vsa/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// forged describes a summary signed by a trusted key without NewVerificationSummary's
// checks: what a buggy or subverted admission could sign. Verify must still refuse it.
type forged struct {
	subject, contract string
	inputs            [][]byte
	result, verifier  string
	levels            []string
}

func (c *chain) forge(t *testing.T, f forged) []byte {
	t.Helper()
	if f.subject == "" {
		f.subject = c.candidate
	}
	if f.contract == "" {
		f.contract = testContract
	}
	if f.result == "" {
		f.result = ResultPassed
	}
	if f.verifier == "" {
		f.verifier = VerifierIDAdmission
	}
	if f.levels == nil {
		f.levels = []string{LevelSealedEvaluationPassed}
	}
	pred := &vsa.VerificationSummary{
		Verifier:           &vsa.VerificationSummary_Verifier{Id: f.verifier},
		TimeVerified:       timestamppb.New(time.Date(2026, 11, 29, 19, 1, 0, 0, time.UTC)),
		ResourceUri:        "foundry:capability/int-sort@" + f.subject,
		Policy:             &vsa.VerificationSummary_Policy{Uri: c.policyURI, Digest: map[string]string{"sha256": strings.TrimPrefix(c.policyDig, "sha256:")}},
		VerificationResult: f.result,
		VerifiedLevels:     f.levels,
	}
	for _, in := range f.inputs {
		pred.InputAttestations = append(pred.InputAttestations, &vsa.VerificationSummary_InputAttestation{
			Digest: map[string]string{"sha256": strings.TrimPrefix(EnvelopeDigest(in), "sha256:")}})
	}
	ps, err := predicateStruct(pred)
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := digestSet(f.subject)
	ann := mustStruct(t, map[string]any{AnnotationContract: f.contract})
	if f.contract == "none" {
		ann = nil
	}
	st := &Statement{st: &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: "int-sort", Digest: ds, Annotations: ann}},
		PredicateType: PredicateVSA,
		Predicate:     ps,
	}}
	env, err := Sign(c.kp.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// store writes envelopes into a fresh directory as foundry does.
func store(t *testing.T, envs ...[]byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, e := range envs {
		if _, err := WriteEnvelope(dir, e); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// verifyChain verifies c.candidate requiring a verification summary, with the envelopes in
// dir as the source, and returns the report and the first summary's attestation report.
func (c *chain) verifyChain(t *testing.T, keys []*Verifier, pol Policy, dir string, explicit ...[]byte) (*Report, *AttestationReport) {
	t.Helper()
	opts := Options{Keys: keys, Policy: pol}
	pol.PredicateTypes = append(pol.PredicateTypes, PredicateVSA)
	opts.Policy = pol
	if dir != "" {
		src, err := NewDirSource(dir)
		if err != nil {
			t.Fatal(err)
		}
		opts.Source = src
	}
	for i, e := range explicit {
		opts.Attestations = append(opts.Attestations, Attestation{Source: "explicit" + string(rune('0'+i)), Envelope: e})
	}
	rep, err := Verify(context.Background(), opts, Subject{Name: "int-sort", Digest: c.candidate})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range rep.Artifacts[0].Attestations {
		if at.PredicateType == PredicateVSA {
			return rep, at
		}
	}
	return rep, nil
}

func reportText(rep *Report) string {
	var b strings.Builder
	rep.WriteText(&b)
	return b.String()
}

// check finds the named check of an attestation report.
func check(at *AttestationReport, name string) *Check {
	for i := range at.Checks {
		if at.Checks[i].Name == name {
			return &at.Checks[i]
		}
	}
	return nil
}

func wantLink(t *testing.T, rep *Report, at *AttestationReport, name string, ok bool, code string) {
	t.Helper()
	if at == nil {
		t.Fatalf("no summary among the candidates:\n%s", reportText(rep))
	}
	c := check(at, name)
	if c == nil {
		t.Fatalf("no %s check:\n%s", name, reportText(rep))
	}
	if c.OK != ok || (!ok && c.Code != code) {
		t.Fatalf("%s: ok=%v code=%q, want ok=%v code=%q\n%s", name, c.OK, c.Code, ok, code, reportText(rep))
	}
}

func TestChainVerifies(t *testing.T) {
	c := newChain(t)
	sum := c.summary(t, c.admission(c.prov, c.dev, c.sealed))
	dir := store(t, c.prov, c.dev, c.sealed, sum)

	for name, run := range map[string]func() (*Report, *AttestationReport){
		"directory": func() (*Report, *AttestationReport) { return c.verifyChain(t, c.kp.keys, Policy{}, dir) },
		"explicit": func() (*Report, *AttestationReport) {
			return c.verifyChain(t, c.kp.keys, Policy{}, "", sum, c.sealed, c.dev, c.prov)
		},
		"summary + directory": func() (*Report, *AttestationReport) { return c.verifyChain(t, c.kp.keys, Policy{}, dir, sum) },
	} {
		t.Run(name, func(t *testing.T) {
			rep, at := run()
			if !rep.OK {
				t.Fatalf("chain did not verify:\n%s", reportText(rep))
			}
			for _, link := range []string{"signature", "subject", "verifier", "result", "levels", "inputs", "sealed-evaluation", "provenance"} {
				wantLink(t, rep, at, link, true, "")
			}
			if len(at.Inputs) != 3 {
				t.Fatalf("%d inputs reported", len(at.Inputs))
			}
			for _, in := range at.Inputs {
				if !in.OK {
					t.Errorf("input %s refused", in.Digest)
				}
				if in.PredicateType == PredicateSLSAProvenance && len(in.Dependencies) != 0 {
					t.Errorf("provenance input has dependencies %v", in.Dependencies)
				}
			}
			txt := reportText(rep)
			for _, s := range []string{"VERIFIED: 1 of 1", "PASS sealed-evaluation", "input attestation", "allowed verifier: " + VerifierIDAdmission} {
				if !strings.Contains(txt, s) {
					t.Errorf("report lacks %q:\n%s", s, txt)
				}
			}
		})
	}
	// The same directory does not satisfy a VSA requirement for another digest.
	rep, err := Verify(context.Background(), Options{Keys: c.kp.keys, Policy: Policy{PredicateTypes: []string{PredicateVSA}},
		Source: mustDirSource(t, dir)}, Subject{Name: "x", Digest: sha("other")})
	if err != nil || rep.OK {
		t.Fatalf("verified another digest: %v", err)
	}
}

func mustDirSource(t *testing.T, dir string) *DirSource {
	t.Helper()
	s, err := NewDirSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChainMissingOrTamperedInput(t *testing.T) {
	c := newChain(t)
	sum := c.summary(t, c.admission(c.prov, c.sealed))

	t.Run("missing", func(t *testing.T) {
		rep, at := c.verifyChain(t, c.kp.keys, Policy{}, store(t, c.prov, sum))
		if rep.OK {
			t.Fatal("verified without the sealed test result")
		}
		wantLink(t, rep, at, "inputs", false, CodeInputMissing)
		wantLink(t, rep, at, "sealed-evaluation", false, CodeNoSealedPass)
		wantLink(t, rep, at, "provenance", true, "")
	})

	// A changed test result has another digest: it is not the one the summary lists.
	tr := decodeRaw(t, c.sealed)
	tr.Payload = b64(strings.Replace(string(mustB64(t, tr.Payload)), `"sealed"`, `"dev"`, 1))
	tampered := tr.bytes(t)

	t.Run("tampered on disk under the original name", func(t *testing.T) {
		dir := store(t, c.prov, c.sealed, sum)
		name := filepath.Join(dir, "sha256-"+strings.TrimPrefix(EnvelopeDigest(c.sealed), "sha256:")+".intoto.json")
		if err := os.WriteFile(name, tampered, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, at := c.verifyChain(t, c.kp.keys, Policy{}, dir)
		if rep.OK {
			t.Fatal("verified with a tampered test result")
		}
		wantLink(t, rep, at, "inputs", false, CodeInputMissing)
		wantLink(t, rep, at, "sealed-evaluation", false, CodeNoSealedPass)
	})

	t.Run("replaced after the scan", func(t *testing.T) {
		dir := store(t, c.prov, c.sealed, sum)
		src := mustDirSource(t, dir)
		name := filepath.Join(dir, "sha256-"+strings.TrimPrefix(EnvelopeDigest(c.sealed), "sha256:")+".intoto.json")
		if err := os.WriteFile(name, tampered, 0o644); err != nil {
			t.Fatal(err)
		}
		// Both lookups (by subject, by envelope digest) read the file again and get the new
		// bytes, which do not have the digest the summary lists.
		rep, err := Verify(context.Background(), Options{Keys: c.kp.keys, Policy: Policy{PredicateTypes: []string{PredicateVSA}},
			Source: src}, Subject{Name: "int-sort", Digest: c.candidate})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK {
			t.Fatalf("verified with a test result replaced after the scan:\n%s", reportText(rep))
		}
	})

	t.Run("tampered, given explicitly", func(t *testing.T) {
		rep, at := c.verifyChain(t, c.kp.keys, Policy{}, "", sum, c.prov, tampered)
		if rep.OK {
			t.Fatal("verified with a tampered test result")
		}
		wantLink(t, rep, at, "inputs", false, CodeInputMissing)
	})

	t.Run("summary signed by another key", func(t *testing.T) {
		other := newKeyPair(t, KeyEd25519)
		rep, at := c.verifyChain(t, other.keys, Policy{}, store(t, c.prov, c.sealed, sum))
		if rep.OK || at != nil {
			t.Fatalf("verified a summary with an untrusted key:\n%s", reportText(rep))
		}
		if !strings.Contains(reportText(rep), "signature-invalid") {
			t.Errorf("report:\n%s", reportText(rep))
		}
	})
}

func TestChainSubstitution(t *testing.T) {
	c := newChain(t)
	other := newKeyPair(t, KeyEd25519)
	forOther := mintTR(t, c.kp, testEvaluation(t, sha("another candidate"), SuiteSealed))
	wrongKey := mintTR(t, other, testEvaluation(t, c.candidate, SuiteSealed))
	failed := mintTR(t, c.kp, testEvaluation(t, c.candidate, SuiteSealed, CaseResult{Name: "a", Pass: true}, CaseResult{Name: "b"}))
	localEval := testEvaluation(t, c.candidate, SuiteSealed)
	localEval.Evaluator, _ = EvaluatorID("local", IsolationNone)
	local := mintTR(t, c.kp, localEval)
	otherContract := testEvaluation(t, c.candidate, SuiteSealed)
	otherContract.ContractDigest = sha("another contract")
	contract := mintTR(t, c.kp, otherContract)
	all := [][]byte{c.prov, c.dev, c.sealed, forOther, wrongKey, failed, local, contract}

	type link struct {
		name string
		ok   bool
		code string
	}
	for name, tc := range map[string]struct {
		f     forged
		links []link
	}{
		"test result for another candidate": {forged{inputs: [][]byte{c.prov, forOther}},
			[]link{{"inputs", false, CodeInputRefused}, {"sealed-evaluation", false, CodeNoSealedPass}}},
		"dev suite only": {forged{inputs: [][]byte{c.prov, c.dev}},
			[]link{{"inputs", true, ""}, {"sealed-evaluation", false, CodeNoSealedPass}}},
		"wrong-key test result": {forged{inputs: [][]byte{c.prov, wrongKey}},
			[]link{{"inputs", false, CodeInputRefused}, {"sealed-evaluation", false, CodeNoSealedPass}}},
		"failed sealed run": {forged{inputs: [][]byte{c.prov, failed}},
			[]link{{"inputs", true, ""}, {"sealed-evaluation", false, CodeNoSealedPass}}},
		"unsandboxed evaluator": {forged{inputs: [][]byte{c.prov, local}},
			[]link{{"inputs", false, CodeInputRefused}, {"sealed-evaluation", false, CodeNoSealedPass}}},
		"another contract": {forged{inputs: [][]byte{c.prov, contract}},
			[]link{{"inputs", false, CodeInputRefused}, {"sealed-evaluation", false, CodeNoSealedPass}}},
		"summary under another contract": {forged{inputs: [][]byte{c.prov, c.sealed}, contract: sha("x")},
			[]link{{"inputs", false, CodeInputRefused}}},
		"a bad input beside a good one": {forged{inputs: [][]byte{c.prov, c.sealed, wrongKey}},
			[]link{{"inputs", false, CodeInputRefused}, {"sealed-evaluation", true, ""}}},
		"verificationResult FAILED": {forged{inputs: [][]byte{c.prov, c.sealed}, result: ResultFailed},
			[]link{{"result", false, CodeResult}}},
		"SLSA_ level": {forged{inputs: [][]byte{c.prov, c.sealed}, levels: []string{LevelSealedEvaluationPassed, "SLSA_BUILD_LEVEL_3"}},
			[]link{{"levels", false, CodeLevels}}},
		"no sealed level": {forged{inputs: [][]byte{c.prov, c.sealed}, levels: []string{LevelProvenanceVerified}},
			[]link{{"levels", false, CodeLevels}}},
		"unknown verifier": {forged{inputs: [][]byte{c.prov, c.sealed}, verifier: "https://evil.example/verifier"},
			[]link{{"verifier", false, CodeVerifier}}},
		"no contract on the subject": {forged{inputs: [][]byte{c.prov, c.sealed}, contract: "none"},
			[]link{{"contract", false, CodeContract}}},
		"no inputs": {forged{},
			[]link{{"inputs", true, ""}, {"sealed-evaluation", false, CodeNoSealedPass}}},
	} {
		t.Run(name, func(t *testing.T) {
			sum := c.forge(t, tc.f)
			rep, at := c.verifyChain(t, c.kp.keys, Policy{}, store(t, append(all, sum)...))
			if rep.OK {
				t.Fatalf("verified:\n%s", reportText(rep))
			}
			for _, l := range tc.links {
				wantLink(t, rep, at, l.name, l.ok, l.code)
			}
		})
	}

	t.Run("summary about another subject", func(t *testing.T) {
		sum := c.forge(t, forged{subject: sha("another candidate"), inputs: [][]byte{c.prov, forOther}})
		rep, _ := c.verifyChain(t, c.kp.keys, Policy{}, "", sum)
		if rep.OK || firstRefusal(rep) != CodeSubject {
			t.Fatalf("refusal %q:\n%s", firstRefusal(rep), reportText(rep))
		}
	})

	// The forged summaries are well-formed: the same forge with honest inputs verifies, so
	// each refusal above is for the substitution and nothing else.
	sum := c.forge(t, forged{inputs: [][]byte{c.prov, c.dev, c.sealed}})
	if rep, _ := c.verifyChain(t, c.kp.keys, Policy{}, store(t, append(all, sum)...)); !rep.OK {
		t.Fatalf("honest forged summary refused:\n%s", reportText(rep))
	}
	// A test result signed by a key the verifier also trusts does count.
	sum = c.forge(t, forged{inputs: [][]byte{c.prov, wrongKey}})
	if rep, _ := c.verifyChain(t, append(c.kp.keys, other.keys...), Policy{}, store(t, append(all, sum)...)); !rep.OK {
		t.Fatalf("second trusted key refused:\n%s", reportText(rep))
	}
}

func TestChainProvenance(t *testing.T) {
	c := newChain(t)
	a := c.admission(c.sealed)
	a.VerifiedLevels = nil
	sum := c.summary(t, a)

	// The summary lists no provenance: the candidate's own provenance is looked up.
	rep, at := c.verifyChain(t, c.kp.keys, Policy{}, store(t, c.sealed, sum, c.prov))
	if !rep.OK || at.Provenance == nil || !at.Provenance.OK {
		t.Fatalf("own provenance not used:\n%s", reportText(rep))
	}
	rep, at = c.verifyChain(t, c.kp.keys, Policy{}, store(t, c.sealed, sum))
	if rep.OK {
		t.Fatal("verified without any provenance")
	}
	wantLink(t, rep, at, "provenance", false, CodeNoProvenance)
	// Own provenance from an unsandboxed builder does not count by default.
	rep, at = c.verifyChain(t, c.kp.keys, Policy{}, store(t, c.sealed, sum, mint(t, c.kp, localExecution(c.candidate))))
	if rep.OK {
		t.Fatal("verified with local-builder provenance")
	}
	wantLink(t, rep, at, "provenance", false, CodeNoProvenance)

	// A listed provenance whose Foundry-produced input has no provenance breaks the chain.
	e := testExecution(c.candidate)
	e.Inputs = append(e.Inputs, Dependency{Name: "/lib", Digest: sha("lib"), Producer: sha("lib action")})
	prov := mint(t, c.kp, e)
	sum = c.summary(t, c.admission(prov, c.sealed))
	rep, at = c.verifyChain(t, c.kp.keys, Policy{}, store(t, prov, c.sealed, sum))
	if rep.OK {
		t.Fatal("verified with an unverified dependency")
	}
	wantLink(t, rep, at, "inputs", false, CodeInputRefused)
	// With the dependency's provenance present, the whole chain verifies down to inputs.
	e2 := testExecution(sha("lib"))
	e2.ActionDigest = sha("lib action")
	rep, at = c.verifyChain(t, c.kp.keys, Policy{}, store(t, prov, c.sealed, sum, mint(t, c.kp, e2)))
	if !rep.OK {
		t.Fatalf("chain with a dependency:\n%s", reportText(rep))
	}
	for _, in := range at.Inputs {
		if in.PredicateType == PredicateSLSAProvenance && (len(in.Dependencies) != 1 || !in.Dependencies[0].OK) {
			t.Errorf("dependency not followed: %+v", in.Dependencies)
		}
	}

	// A provenance input signed by a key the verifier does not trust.
	other := newKeyPair(t, KeyEd25519)
	foreign := mint(t, other, testExecution(c.candidate))
	a = c.admission(foreign, c.sealed)
	a.Keys = append(a.Keys, other.keys...)
	sum = c.summary(t, a)
	rep, at = c.verifyChain(t, c.kp.keys, Policy{}, store(t, foreign, c.sealed, sum))
	if rep.OK {
		t.Fatal("verified with an untrusted provenance")
	}
	wantLink(t, rep, at, "inputs", false, CodeInputRefused)
	wantLink(t, rep, at, "provenance", false, CodeNoProvenance)
}

func TestChainSignerRules(t *testing.T) {
	c := newChain(t)
	sum := c.summary(t, c.admission(c.prov, c.sealed))
	dir := store(t, c.prov, c.sealed, sum)
	builder, _ := BuilderID("containerd", IsolationContainer)
	id := c.kp.keys[0].KeyID
	// The key may vouch for the builder only: the test result and the summary do not count.
	rep, at := c.verifyChain(t, c.kp.keys, Policy{Signers: []SignerRule{{KeyID: id, Builders: []string{builder}}}}, dir)
	if rep.OK {
		t.Fatal("summary counted without a signer rule for its verifier")
	}
	if c := check(at, "signer"); c == nil || c.Code != CodeSignerBuilder {
		t.Fatalf("report:\n%s", reportText(rep))
	}
	rep, at = c.verifyChain(t, c.kp.keys, Policy{Signers: []SignerRule{{KeyID: id, Builders: []string{builder, VerifierIDAdmission}}}}, dir)
	if rep.OK {
		t.Fatal("test result counted without a signer rule for its evaluator")
	}
	wantLink(t, rep, at, "sealed-evaluation", false, CodeNoSealedPass)
	rep, _ = c.verifyChain(t, c.kp.keys, Policy{Signers: []SignerRule{{KeyID: id, Builders: []string{builder, VerifierIDAdmission, testEvaluatorID(t)}}}}, dir)
	if !rep.OK {
		t.Fatalf("full signer rules:\n%s", reportText(rep))
	}
}

func TestDirSourceByEnvelopeDigest(t *testing.T) {
	c := newChain(t)
	dir := store(t, c.sealed)
	// Any file name works: the index is by the bytes' digest.
	if err := os.WriteFile(filepath.Join(dir, "renamed.json"), c.prov, 0o644); err != nil {
		t.Fatal(err)
	}
	src := mustDirSource(t, dir)
	for _, env := range [][]byte{c.sealed, c.prov} {
		got, err := src.LookupEnvelope(context.Background(), EnvelopeDigest(env))
		if err != nil || len(got) != 1 || string(got[0].Envelope) != string(env) {
			t.Fatalf("LookupEnvelope: %v %v", got, err)
		}
	}
	if got, _ := src.LookupEnvelope(context.Background(), EnvelopeDigest(c.dev)); len(got) != 0 {
		t.Fatalf("found an envelope that is not there: %v", got)
	}
	var _ EnvelopeSource = src
	var _ EnvelopeSource = MultiSource{src}
	got, err := MultiSource{failingSource{}, src}.LookupEnvelope(context.Background(), EnvelopeDigest(c.prov))
	if err != nil || len(got) != 1 {
		t.Fatalf("MultiSource.LookupEnvelope: %v %v", got, err)
	}
}

// A provenance input whose subject is not the candidate (a step output inside the packaged
// tree) is reachable only by its envelope digest, and is bound by the summary listing it.
func TestChainProvenanceBoundBySummary(t *testing.T) {
	c := newChain(t)
	prov := mint(t, c.kp, testExecution(sha("/bin/int-sort inside the tree")))
	self, err := c.kp.signer.Verifier("self")
	if err != nil {
		t.Fatal(err)
	}
	a := c.admission(prov, c.sealed)
	a.Keys = []*Verifier{self}
	sum := c.summary(t, a)
	rep, at := c.verifyChain(t, c.kp.keys, Policy{}, store(t, prov, c.sealed, sum))
	if !rep.OK {
		t.Fatalf("not verified:\n%s", reportText(rep))
	}
	wantLink(t, rep, at, "provenance", true, "")
	for _, in := range at.Inputs {
		if in.PredicateType == PredicateSLSAProvenance {
			if sc := check(in, "subject"); sc == nil || !strings.Contains(sc.Detail, "bound to "+c.candidate+" by the summary") {
				t.Errorf("subject check %+v", sc)
			}
		}
	}
	// Without the envelope in the store, nothing else finds it.
	rep, at = c.verifyChain(t, c.kp.keys, Policy{}, store(t, c.sealed, sum))
	if rep.OK {
		t.Fatal("verified without the listed provenance")
	}
	wantLink(t, rep, at, "inputs", false, CodeInputMissing)
	wantLink(t, rep, at, "provenance", false, CodeNoProvenance)
}

func TestLoadPolicyAllowlists(t *testing.T) {
	dir := t.TempDir()
	for body, ok := range map[string]bool{
		`{"evaluators":["https://foundry.dev/evaluator/runc@v1?isolation=container"],"verifiers":["https://foundry.dev/verifier/admission@v1"]}`: true,
		`{"evaluators":[""]}`: false,
		`{"verifiers":[""]}`:  false,
		`{"verifier":["x"]}`:  false,
	} {
		p := filepath.Join(dir, "p.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		pol, err := LoadPolicy(p)
		if (err == nil) != ok {
			t.Errorf("%s: %v", body, err)
		}
		if ok && (len(pol.Evaluators) != 1 || len(pol.Verifiers) != 1) {
			t.Errorf("%s: %+v", body, pol)
		}
	}
}

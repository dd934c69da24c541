package provenance

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// FuzzVerifyEnvelope feeds mutated envelopes to Verify. Whatever the bytes, it must not
// panic, and if it accepts them the verified payload must be exactly the one that was
// signed: re-encodings (base64 alphabet, JSON whitespace) may pass, changed content may not.
func FuzzVerifyEnvelope(f *testing.F) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	signer, err := NewSigner(priv)
	if err != nil {
		f.Fatal(err)
	}
	key, err := NewVerifier("fuzz.pub", priv.Public())
	if err != nil {
		f.Fatal(err)
	}
	digest := sha("artifact")
	st, err := NewProvenance(testExecution(digest))
	if err != nil {
		f.Fatal(err)
	}
	signed, err := st.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	env, err := Sign(signer, st)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env)
	f.Add(env[:len(env)/3])
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"sig":"AAAA"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		rep, err := Verify(context.Background(), Options{
			Keys:         []*Verifier{key},
			Attestations: []Attestation{{Source: "fuzz", Envelope: raw}},
		}, Subject{Name: "a", Digest: digest})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK {
			return
		}
		e, err := dsse.Parse(raw)
		if err != nil {
			t.Fatalf("verified bytes that do not parse: %v", err)
		}
		if e.PayloadType != PayloadType || !bytes.Equal(e.Payload, signed) {
			t.Fatalf("verified a payload that was never signed: %q", e.Payload)
		}
	})
}

// FuzzParseStatement: ParseStatement never panics and returns only valid v1 statements.
func FuzzParseStatement(f *testing.F) {
	st, err := NewProvenance(testExecution(sha("x")))
	if err != nil {
		f.Fatal(err)
	}
	b, _ := st.MarshalJSON()
	f.Add(b)
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"00"}}],"predicateType":"x","predicate":{}}`))
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v0.1"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		st, err := ParseStatement(payload)
		if err != nil {
			return
		}
		if st.GetType() != intoto.StatementTypeUri || st.Validate() != nil {
			t.Fatalf("accepted an invalid statement: %q", payload)
		}
		if st.GetPredicateType() == PredicateSLSAProvenance {
			_, _ = ParseProvenance(st) // must not panic
		}
	})
}

// FuzzParsePredicates: the test-result and verification-summary parsers never panic, and
// what they accept keeps the properties the chain relies on: a test result counts as a pass
// only if it says PASSED with no failed test and at least one passed one; a summary has the
// fields SLSA requires and a sha256 digest on every input attestation.
func FuzzParsePredicates(f *testing.F) {
	cand := sha("candidate")
	for _, e := range []*Evaluation{
		testEvaluation(f, cand, SuiteSealed),
		testEvaluation(f, cand, SuiteDev, CaseResult{Name: "a", Pass: true}, CaseResult{Name: "b"}),
	} {
		st, err := NewTestResult(e)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := st.MarshalJSON()
		f.Add(b)
	}
	summary := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"int-sort","digest":{"sha256":"` +
		strings.TrimPrefix(cand, "sha256:") + `"},"annotations":{"foundry_contract":"` + testContract + `"}}],` +
		`"predicateType":"https://slsa.dev/verification_summary/v1","predicate":{"verifier":{"id":"` + VerifierIDAdmission +
		`"},"timeVerified":"2026-11-29T19:01:00Z","resourceUri":"foundry:capability/int-sort","policy":{"uri":"https://foundry.dev/policy/admission/v1"},` +
		`"inputAttestations":[{"digest":{"sha256":"` + strings.TrimPrefix(sha("env"), "sha256:") + `"}}],` +
		`"verificationResult":"PASSED","verifiedLevels":["FOUNDRY_SEALED_EVALUATION_PASSED"]}}`
	f.Add([]byte(summary))
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"00"}}],"predicateType":"https://in-toto.io/attestation/test-result/v0.1","predicate":{"result":"PASSED","configuration":[]}}`))
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"00"}}],"predicateType":"https://slsa.dev/verification_summary/v1","predicate":{"verificationResult":"PASSED","timeVerified":"x"}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		st, err := ParseStatement(payload)
		if err != nil {
			return
		}
		switch st.GetPredicateType() {
		case PredicateTestResult:
			tr, err := ParseTestResult(st)
			if err != nil {
				return
			}
			p := tr.Predicate
			if tr.Passed() != (p.GetResult() == ResultPassed) {
				t.Fatalf("accepted an inconsistent result: %s with %d failed, %d passed", p.GetResult(), len(p.GetFailedTests()), len(p.GetPassedTests()))
			}
			if tr.Passed() && (len(p.GetFailedTests()) != 0 || len(p.GetPassedTests()) == 0) {
				t.Fatalf("pass with failures or no cases: %q", payload)
			}
			switch tr.Suite {
			case SuiteDev, SuiteRepair, SuiteSealed:
			default:
				t.Fatalf("accepted suite %q", tr.Suite)
			}
			if !digestRE().MatchString(tr.ContractDigest) || !digestRE().MatchString(tr.SuiteDigest) || checkURI(tr.Evaluator) != nil {
				t.Fatalf("accepted incomplete configuration: %+v", tr)
			}
		case PredicateVSA:
			p, err := ParseVerificationSummary(st)
			if err != nil {
				return
			}
			if p.GetVerifier().GetId() == "" || p.GetTimeVerified().CheckValid() != nil || p.GetResourceUri() == "" || p.GetPolicy().GetUri() == "" {
				t.Fatalf("accepted a summary without required fields: %q", payload)
			}
			if r := p.GetVerificationResult(); r != ResultPassed && r != ResultFailed {
				t.Fatalf("accepted verificationResult %q", r)
			}
			for _, in := range p.GetInputAttestations() {
				if !digestRE().MatchString("sha256:" + in.GetDigest()["sha256"]) {
					t.Fatalf("accepted an input attestation without a sha256 digest")
				}
			}
		}
	})
}

package provenance

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/types/known/structpb"
)

// A summary counts for a pin only when it binds the contract being resolved and the manifest
// being fetched: the same signed summary, asked about another contract or manifest, is
// refused.
func TestSummaryBindsContractAndManifest(t *testing.T) {
	c := newChain(t)
	manifest := sha("manifest")
	a := c.admission(c.prov, c.dev, c.sealed)
	a.Manifest = manifest
	sum := c.summary(t, a)
	unbound := c.summary(t, c.admission(c.prov, c.dev, c.sealed)) // names no manifest
	dir := store(t, c.prov, c.dev, c.sealed)
	verify := func(env []byte, s Subject) (*Report, *AttestationReport) {
		t.Helper()
		rep, err := Verify(context.Background(), Options{Keys: c.kp.keys, Policy: Policy{PredicateTypes: []string{PredicateVSA}},
			Source: mustDirSource(t, dir), Attestations: []Attestation{{Source: "summary", Envelope: env}}}, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range rep.Artifacts[0].Attestations {
			if at.PredicateType == PredicateVSA {
				return rep, at
			}
		}
		t.Fatalf("no summary examined:\n%s", reportText(rep))
		return nil, nil
	}
	for _, tc := range []struct {
		name string
		env  []byte
		s    Subject
		ok   bool
		code string
	}{
		{"bound", sum, Subject{Name: "x", Digest: c.candidate, Contract: testContract, Manifest: manifest}, true, ""},
		{"another contract", sum, Subject{Name: "x", Digest: c.candidate, Contract: sha("other contract"), Manifest: manifest}, false, CodeContract},
		{"another manifest", sum, Subject{Name: "x", Digest: c.candidate, Contract: testContract, Manifest: sha("other manifest")}, false, CodeManifest},
		{"summary without manifest", unbound, Subject{Name: "x", Digest: c.candidate, Contract: testContract, Manifest: manifest}, false, CodeManifest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, at := verify(tc.env, tc.s)
			if rep.OK != tc.ok {
				t.Fatalf("ok=%v, want %v:\n%s", rep.OK, tc.ok, reportText(rep))
			}
			if !tc.ok && !slices.ContainsFunc(at.Checks, func(ch Check) bool { return ch.Code == tc.code }) {
				t.Fatalf("no %s refusal:\n%s", tc.code, reportText(rep))
			}
		})
	}
	// The manifest is a subject of its own: cosign, asked about the manifest, finds it.
	subjects, _ := ClaimedSubjects(sum)
	if !slices.Contains(subjects, manifest) || !slices.Contains(subjects, c.candidate) {
		t.Fatalf("summary subjects %v lack the manifest or the tree", subjects)
	}
}

// A sealed test result records which failed case it disclosed, and refuses to disclose a
// case that did not fail.
func TestTestResultRecordsDisclosure(t *testing.T) {
	c := newChain(t)
	bad, good := sha("case bad"), sha("case good")
	e := testEvaluation(t, c.candidate, SuiteSealed, CaseResult{Name: bad}, CaseResult{Name: good, Pass: true})
	e.Disclosed = []string{bad}
	env := mintTR(t, c.kp, e)
	st, err := openVerified(env, []signature.Verifier{c.kp.keys[0].v})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ParseTestResult(st)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.Disclosed, []string{bad}) || tr.Configuration["runner"] != sha("runner") {
		t.Fatalf("disclosed %v, configuration %v", tr.Disclosed, tr.Configuration)
	}
	e.Disclosed = []string{good}
	if _, err := NewTestResult(e); err == nil {
		t.Fatal("a passing case was recorded as disclosed")
	}
}

// An admission binds the image its sealed suite passed on (issue 29: what is admitted is
// what is called): the summary carries the sealed pass's candidate-image on its subjects,
// and verification reports it; a summary re-signed to bind another image than the one its
// sealed pass ran on is refused, and sealed passes on two images are not one admission.
func TestSummaryBindsTheImage(t *testing.T) {
	c := newChain(t)
	image, other := sha("candidate image"), sha("another image")
	on := func(img string) []byte {
		e := testEvaluation(t, c.candidate, SuiteSealed)
		e.Configuration = append(e.Configuration, Dependency{Name: ConfigCandidateImage, URI: "foundry:capability.int-sort", Digest: img})
		return mintTR(t, c.kp, e)
	}
	sealed := on(image)
	manifest := sha("manifest")
	a := c.admission(c.prov, c.dev, sealed)
	a.Manifest = manifest
	sum := c.summary(t, a)
	dir := store(t, c.prov, c.dev, sealed)
	subject := Subject{Name: "x", Digest: c.candidate, Contract: testContract, Manifest: manifest}
	verify := func(env []byte) *Report {
		t.Helper()
		rep, err := Verify(context.Background(), Options{Keys: c.kp.keys, Policy: Policy{PredicateTypes: []string{PredicateVSA}},
			Source: mustDirSource(t, dir), Attestations: []Attestation{{Source: "summary", Envelope: env}}}, subject)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := verify(sum)
	if got, ok := rep.AdmittedImage(); !rep.OK || !ok || got != image {
		t.Fatalf("the summary binds image %q (ok %v, verified %v), want %s:\n%s", got, ok, rep.OK, image, reportText(rep))
	}

	// Forged: the same summary, its image annotations changed and signed again.
	forge := func(img string) []byte {
		st, err := ParseStatement(decodePayload(t, sum))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.GetSubject() {
			s.GetAnnotations().GetFields()[AnnotationImage] = structpb.NewStringValue(img)
		}
		env, err := Sign(c.kp.signer, &Statement{st: st})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	rep = verify(forge(other))
	if got, _ := rep.AdmittedImage(); rep.OK || got != "" {
		t.Fatalf("a summary binding an image its sealed pass did not run on verified (image %q):\n%s", got, reportText(rep))
	}
	if !strings.Contains(reportText(rep), "it ran on image") {
		t.Errorf("the refusal does not say which image the sealed pass ran on:\n%s", reportText(rep))
	}

	// Two sealed passes on two images are not one admission.
	if _, err := NewVerificationSummary(c.admission(c.prov, sealed, on(other))); err == nil || !strings.Contains(err.Error(), "an admission binds one image") {
		t.Errorf("a summary over sealed passes on two images: %v", err)
	}
}

// decodePayload is the payload of a DSSE envelope.
func decodePayload(t *testing.T, env []byte) []byte {
	t.Helper()
	var e struct{ Payload []byte }
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	return e.Payload
}

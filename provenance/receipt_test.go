package provenance

import (
	"context"
	"strings"
	"testing"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
)

// A receipt names only acceptance evidence that verifies; it verifies for its artifact and
// release, and is refused for another release, or when its evidence is missing.
func TestDeliveryReceipt(t *testing.T) {
	kp, other := newKeyPair(t, KeyECDSAP256), newKeyPair(t, KeyECDSAP256)
	check := mint(t, kp, testExecution(sha("check result")))
	d := &Delivery{Project: "shop", Product: "product.app", Revision: sha("rev"), Source: sha("plan"),
		Release: sha("release.json"), Artifact: sha("files"), Destination: "dir:/srv", Location: "dir:/srv/x",
		Acceptance: []Attestation{{Source: "product.app.check.serves", Envelope: check}}, Keys: kp.keys, DeliveredOn: time.Now()}
	st, err := NewDeliveryReceipt(d)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Sign(kp.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(manifest string, atts ...[]byte) *Report {
		t.Helper()
		opts := Options{Keys: kp.keys, Policy: Policy{PredicateTypes: []string{PredicateDeliveryReceipt}}}
		for _, a := range atts {
			opts.Attestations = append(opts.Attestations, Attestation{Source: "x", Envelope: a})
		}
		rep, err := Verify(context.Background(), opts, Subject{Name: "files", Digest: sha("files"), Manifest: manifest})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := verify(sha("release.json"), env, check); !rep.OK {
		t.Fatalf("the receipt does not verify: %+v", firstRefusal(rep))
	}
	if rep := verify(sha("another release"), env, check); rep.OK || firstRefusal(rep) != CodeManifest {
		t.Errorf("a receipt for another release: ok %v, %s", rep.OK, firstRefusal(rep))
	}
	if rep := verify(sha("release.json"), env); rep.OK || firstRefusal(rep) != CodeInputMissing {
		t.Errorf("a receipt without its evidence: ok %v, %s", rep.OK, firstRefusal(rep))
	}

	// Minting refuses evidence signed by another key, and a statement that is not evidence.
	d.Keys = other.keys
	if _, err := NewDeliveryReceipt(d); err == nil || !strings.Contains(err.Error(), "no signature verifies") {
		t.Errorf("evidence under another key: %v", err)
	}
	d.Keys, d.Acceptance = kp.keys, []Attestation{{Source: "product.app.check.serves", Envelope: env}}
	if _, err := NewDeliveryReceipt(d); err == nil || !strings.Contains(err.Error(), "not provenance or a test result") {
		t.Errorf("a receipt as evidence: %v", err)
	}
	d.Acceptance, d.Release = nil, "sha256:nope"
	if _, err := NewDeliveryReceipt(d); err == nil {
		t.Error("a malformed release digest was minted")
	}
}

// A receipt needs acceptance evidence, and a test result it names must be the acceptance
// of the product delivered, at its revision, on the delivered artifact: minting refuses any
// other, and verify refuses a receipt forged around it with the same key.
func TestDeliveryReceiptBindsAcceptance(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	accept := func(product, revision, tree, suite string) []byte {
		e := testEvaluation(t, tree, suite)
		e.Capability, e.ContractDigest = product, revision
		return mintTR(t, kp, e)
	}
	good := accept("product.app", sha("rev"), sha("files"), SuiteAcceptance)
	d := &Delivery{Project: "shop", Product: "product.app", Revision: sha("rev"), Source: sha("plan"),
		Release: sha("release.json"), Artifact: sha("files"), Destination: "dir:/srv", Location: "dir:/srv/x",
		Keys: kp.keys, DeliveredOn: time.Now()}
	// forge signs a receipt of d naming evidence, as NewDeliveryReceipt would without its checks.
	forge := func(evidence ...[]byte) []byte {
		t.Helper()
		rc := Receipt{Project: d.Project, Product: d.Product, Revision: d.Revision, Source: d.Source, Release: d.Release,
			Artifact: d.Artifact, Destination: d.Destination, Location: d.Location, Acceptance: []Evidence{},
			DeliveredOn: d.DeliveredOn.UTC().Format(time.RFC3339Nano)}
		for _, env := range evidence {
			rc.Acceptance = append(rc.Acceptance, Evidence{Name: "product.app.accept", Digest: EnvelopeDigest(env), PredicateType: PredicateTestResult})
		}
		subj, err := artifactRDs([]Artifact{{Name: ReceiptSubjectRelease, Digest: d.Release}, {Name: ReceiptSubjectArtifact, Digest: d.Artifact}}, "subject")
		if err != nil {
			t.Fatal(err)
		}
		pred, err := toStruct(rc)
		if err != nil {
			t.Fatal(err)
		}
		env, err := Sign(kp.signer, &Statement{st: &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subj,
			PredicateType: PredicateDeliveryReceipt, Predicate: pred}})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	verify := func(atts ...[]byte) *Report {
		t.Helper()
		opts := Options{Keys: kp.keys, Policy: Policy{PredicateTypes: []string{PredicateDeliveryReceipt}}}
		for _, a := range atts {
			opts.Attestations = append(opts.Attestations, Attestation{Source: "x", Envelope: a})
		}
		rep, err := Verify(context.Background(), opts, Subject{Name: "files", Digest: d.Artifact, Manifest: d.Release})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	inputRefused := func(rep *Report, code string) bool {
		for _, at := range rep.Artifacts[0].Attestations {
			for _, in := range at.Inputs {
				for _, c := range in.Checks {
					if !c.OK && c.Code == code {
						return true
					}
				}
			}
		}
		return false
	}

	d.Acceptance = []Attestation{{Source: "product.app.accept", Envelope: good}}
	st, err := NewDeliveryReceipt(d)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Sign(kp.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify(env, good); !rep.OK {
		t.Fatalf("the receipt of an accepted delivery does not verify: %s", firstRefusal(rep))
	}
	if rep := verify(forge(good), good); !rep.OK {
		t.Fatalf("forge does not make a receipt verify accepts: %s", firstRefusal(rep))
	}

	for name, ev := range map[string][]byte{
		"another tree":         accept("product.app", sha("rev"), sha("other files"), SuiteAcceptance),
		"another revision":     accept("product.app", sha("rev 2"), sha("files"), SuiteAcceptance),
		"another product":      accept("product.shop", sha("rev"), sha("files"), SuiteAcceptance),
		"a capability's suite": accept("product.app", sha("rev"), sha("files"), SuiteSealed),
	} {
		d.Acceptance = []Attestation{{Source: "product.app.accept", Envelope: ev}}
		if _, err := NewDeliveryReceipt(d); err == nil || !strings.Contains(err.Error(), "acceptance evidence of product.app.accept: ") {
			t.Errorf("%s: minted, or not refused for it: %v", name, err)
		}
		if rep := verify(forge(ev), ev); rep.OK || !inputRefused(rep, CodeSubject) {
			t.Errorf("%s: a forged receipt naming it: ok %v, %s", name, rep.OK, firstRefusal(rep))
		}
	}
	// No acceptance at all: nothing is minted, and a receipt forged without any is refused.
	d.Acceptance = nil
	if _, err := NewDeliveryReceipt(d); err == nil || !strings.Contains(err.Error(), "no acceptance evidence") {
		t.Errorf("a delivery without acceptance: %v", err)
	}
	if rep := verify(forge()); rep.OK || firstRefusal(rep) != CodePredicate {
		t.Errorf("a receipt naming no acceptance: ok %v, %s", rep.OK, firstRefusal(rep))
	}
}

package provenance

import (
	"context"
	"strings"
	"testing"
	"time"
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

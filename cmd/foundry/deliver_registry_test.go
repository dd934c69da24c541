package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/deliver"
	"github.com/foundry-build/foundry/engine/outbox"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
	"github.com/foundry-build/foundry/registry/registrytest"
)

// A product delivered to a registry repository (oci:HOST:PORT/REPO, Debian's
// docker-registry): an apply killed once the release and its receipt are in the registry
// reconciles by finding the release by its digest there, without delivering again; foundry
// verify checks the release in the registry by its receipt, by digest, by its release tag
// and with the destination's oci: prefix; a tag moved to another release manifest (with
// the genuine receipt and evidence attached to it) and a receipt replaced in the referrers
// index are both refused.
func TestDeliverToRegistry(t *testing.T) {
	needSandbox(t)
	repo := registrytest.StartDistribution(t) + "/releases/app"
	dir := deliverFixture(t, "oci:"+repo, true)
	key := filepath.Join(dir, ".foundry", "keys", "signing.pub")

	r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + deliver.FaultBeforeRecord + ":product.app"})
	if r.code != -1 {
		t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", r.code, r.stderr)
	}
	r = apply(t, dir, nil)
	if r.code != 0 || !strings.Contains(r.stdout, "Delivered product.app to "+repo+"@sha256:") ||
		!strings.Contains(r.stderr, `"effect_reconciled"`) || !strings.Contains(r.stderr, "it is at the destination ("+repo+"@sha256:") {
		t.Fatalf("apply after the kill: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if effs := deliverEffects(t, dir); len(effs) != 1 || effs[0].Status != state.EffectSucceeded || effs[0].Destination != "oci:"+repo {
		t.Fatalf("want one succeeded deliver effect to oci:%s, have %+v", repo, effs)
	}
	loc := r.stdout[strings.Index(r.stdout, repo+"@sha256:"):]
	loc = strings.TrimSuffix(strings.Fields(loc)[0], ".")

	ctx := context.Background()
	s, err := registry.Open(repo)
	if err != nil {
		t.Fatal(err)
	}
	_, ref, _ := strings.Cut(loc, "@")
	m := digest.Digest(ref)
	raw, _, err := s.Manifest(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	man, err := registry.ParseRelease(raw)
	if err != nil {
		t.Fatal(err)
	}
	tag := deliver.ReleaseTag(man.Config.Digest)
	if got, err := s.Resolve(ctx, tag); err != nil || got != m {
		t.Fatalf("tag %s: %s, %v; want %s", tag, got, err, m)
	}
	atts, _, err := registry.Referrers(ctx, s, m)
	if err != nil {
		t.Fatal(err)
	}
	var receipt registry.Attestation
	receipts := 0
	for _, a := range atts {
		if a.PredicateType == provenance.PredicateDeliveryReceipt {
			receipt, receipts = a, receipts+1
		}
	}
	if receipts != 1 || len(atts) < 2 {
		t.Fatalf("want the evidence and one receipt attached, have %+v", atts)
	}

	verify := func(ref string, ok bool, want string) {
		t.Helper()
		code, out, errs := foundry(t, dir, "verify", "-key", key, ref)
		if (code == 0) != ok || !strings.Contains(out, want) {
			t.Fatalf("verify %s: exit %d, want ok=%v and %q\n%s\n%s", ref, code, ok, want, out, errs)
		}
	}
	verify(loc, true, "VERIFIED")
	verify(repo+":"+tag, true, "PASS acceptance")
	verify("oci:"+loc, true, "VERIFIED")

	// Retagged: the release tag names another release manifest (its start changed), and
	// the genuine receipt and evidence are attached to it too. The receipt is for the
	// genuine release, so verify refuses.
	rc, err := s.Blob(ctx, man.Config.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || digest.FromBytes(cfg) != man.Config.Digest {
		t.Fatalf("release manifest %s: %v", man.Config.Digest, err)
	}
	forged := bytes.Replace(cfg, []byte(`"start":["/bin/app"`), []byte(`"start":["/bin/evil"`), 1)
	if bytes.Equal(forged, cfg) {
		t.Fatalf("the release manifest has no start to change: %s", cfg)
	}
	if _, err := pushBlob(ctx, s, forged); err != nil {
		t.Fatal(err)
	}
	fm := *man
	fm.Config = registry.Descriptor{MediaType: man.Config.MediaType, Digest: digest.FromBytes(forged), Size: int64(len(forged))}
	fraw, _ := json.Marshal(fm)
	fd, err := s.PutManifest(ctx, fraw, registry.MediaTypeManifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range atts {
		if _, err := registry.Attach(ctx, s, fd, a.Envelope, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Tag(ctx, tag, fd); err != nil {
		t.Fatal(err)
	}
	verify(repo+":"+tag, false, "FAIL release")
	if err := s.Tag(ctx, tag, m); err != nil {
		t.Fatal(err)
	}
	verify(repo+":"+tag, true, "VERIFIED")

	// The receipt replaced: the referrers index of the release lists a receipt whose signed
	// payload was changed instead of the genuine one.
	var env struct {
		PayloadType string            `json:"payloadType"`
		Payload     []byte            `json:"payload"`
		Signatures  []json.RawMessage `json:"signatures"`
	}
	if err := json.Unmarshal(receipt.Envelope, &env); err != nil {
		t.Fatal(err)
	}
	env.Payload = bytes.Replace(env.Payload, []byte(`"location":"`), []byte(`"location":"x`), 1)
	tampered, _ := json.Marshal(env)
	if _, err := registry.Attach(ctx, s, m, tampered, ""); err != nil {
		t.Fatal(err)
	}
	// The genuine one is dropped from both places a registry without the referrers API
	// lists attachments: the referrers tag index and cosign's .att image.
	for _, drop := range []struct{ tag, list, digest string }{
		{"sha256-" + m.Hex(), "manifests", string(receipt.Manifest)},
		{"sha256-" + m.Hex() + ".att", "layers", string(receipt.Digest)},
	} {
		d, err := s.Resolve(ctx, drop.tag)
		if err != nil {
			t.Fatal(err)
		}
		raw, mt, err := s.Manifest(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]json.RawMessage
		var entries []map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil || json.Unmarshal(doc[drop.list], &entries) != nil {
			t.Fatalf("%s: %v\n%s", drop.tag, err, raw)
		}
		kept := entries[:0]
		for _, e := range entries {
			if e["digest"] != drop.digest {
				kept = append(kept, e)
			}
		}
		if len(kept) != len(entries)-1 {
			t.Fatalf("the genuine receipt %s is not in %s:\n%s", drop.digest, drop.tag, raw)
		}
		doc[drop.list], _ = json.Marshal(kept)
		raw, _ = json.Marshal(doc)
		nd, err := s.PutManifest(ctx, raw, mt)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Tag(ctx, drop.tag, nd); err != nil {
			t.Fatal(err)
		}
	}
	verify(loc, false, "NOT VERIFIED")
	verify(loc, false, "FAIL signature [signature-invalid]")
}

// A delivery to a registry whose outcome a kill lost, and which the registry cannot be
// asked about (nothing listens there), stays unknown: the next apply is refused with what to
// do, and nothing is recorded as delivered.
func TestDeliverToUnreachableRegistryStaysUnknown(t *testing.T) {
	needSandbox(t)
	repo := fmt.Sprintf("127.0.0.1:%d/releases/app", registrytest.FreePort(t))
	dir := deliverFixture(t, "oci:"+repo, true)
	if r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + outbox.FaultAfterDispatch + ":product.app"}); r.code != -1 {
		t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", r.code, r.stderr)
	}
	for i := 0; i < 2; i++ {
		r := apply(t, dir, nil)
		if r.code != exitError || strings.Contains(r.stdout, "Delivered") || !strings.Contains(r.stderr, "looking for release") ||
			!strings.Contains(r.stderr, "foundry effects resolve") {
			t.Fatalf("apply %d with the registry unreachable: exit %d\n%s\n%s", i+1, r.code, r.stdout, r.stderr)
		}
		if effs := deliverEffects(t, dir); len(effs) != 1 || effs[0].Status != state.EffectUnknown {
			t.Fatalf("apply %d: want the deliver effect still unknown, have %+v", i+1, effs)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/deliver"
	"github.com/foundry-build/foundry/engine/outbox"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
	"github.com/sigstore/sigstore/pkg/signature"
	ssdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
)

// deliverProject is a product with a step, a check and a deliver block to DEST (a
// placeholder the tests fill in).
const deliverProject = `
project "shop" {}

seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/test" = "busybox", "/bin/grep" = "busybox" }
  }
  env = { PATH = "/bin" }
}

product "app" {
  step "make" {
    image   = seed.bb
    run     = ["sh", "-c", "echo 'echo serving' > /out/app && chmod +x /out/app"]
    outputs = ["/out/app"]
  }
  check "serves" {
    image  = seed.bb
    mounts = { "/app" = step.make.output["/out/app"] }
    run    = ["grep", "-q", "serving", "/app"]
  }
  deliver {
    to    = "DEST"
    files = { "/bin/app" = step.make.output["/out/app"] }
    start = ["/bin/app", "-data", "/var/lib/app"]
  }
}
`

// operatorGrants writes the operator's grants file, outside any project, and names it in
// $FOUNDRY_GRANTS for the rest of the test (the foundry commands it runs inherit it).
func operatorGrants(t *testing.T, src string) string {
	t.Helper()
	gf := filepath.Join(t.TempDir(), "grants.hcl")
	if err := os.WriteFile(gf, []byte(src+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(grantsEnv, gf)
	return gf
}

// deliverFixture writes the project delivering to dest and, when granted, the operator's
// grants file that allows it (operatorGrants); it returns the project directory.
func deliverFixture(t *testing.T, dest string, granted bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(strings.Replace(deliverProject, "DEST", dest, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if granted {
		operatorGrants(t, `grant "deliver" { to = ["`+dest+`"] }`)
	}
	return dir
}

// releases lists the releases under a dir: destination (temporary directories excluded).
func releases(t *testing.T, dest string) []string {
	t.Helper()
	ents, err := os.ReadDir(dest)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// deliverEffects are the project's deliver effects.
func deliverEffects(t *testing.T, dir string) []state.Effect {
	t.Helper()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	all, err := ws.State.Effects(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []state.Effect
	for _, e := range all {
		if e.Kind == "deliver" {
			out = append(out, e)
		}
	}
	return out
}

// A destination no grant allows is shown as needs-grant by the plan and refused by apply
// before anything runs: nothing is written there, and the message names the grant to add.
func TestDeliverUngrantedIsRefused(t *testing.T) {
	needSandbox(t)
	dest := filepath.Join(t.TempDir(), "releases")
	dir := deliverFixture(t, "dir:"+dest, false)

	code, out, errs := foundry(t, dir, "plan", "-json")
	p := decodePlan(t, out)
	var prod *plan.Node
	for _, n := range p.Nodes {
		if n.Address == "product.app" {
			prod = n
		}
	}
	if code != 0 || prod == nil || prod.Status != plan.StatusNeedsGrant || prod.Deliver == nil || prod.Deliver.Granted || p.Summary.NeedsGrant != 1 {
		t.Fatalf("plan: exit %d, product %+v, summary %+v\n%s", code, prod, p.Summary, errs)
	}
	_, out, _ = foundry(t, dir, "plan")
	if !strings.Contains(out, "# product.app") || !strings.Contains(out, "needs-grant") || !strings.Contains(out, "1 needs grant") {
		t.Errorf("the text plan does not show the product as needing a grant:\n%s", out)
	}

	r := apply(t, dir, nil)
	if r.code != 1 || len(r.executed) != 0 {
		t.Fatalf("apply of an ungranted delivery: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	for _, want := range []string{"product.app delivers to dir:" + dest + ", which no grant allows", "Nothing was run, fetched or written", `grant "deliver" {`, `to = ["dir:` + dest + `"]`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
		}
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("something was written at the ungranted destination: %v", err)
	}
	if effs := deliverEffects(t, dir); len(effs) != 0 {
		t.Errorf("an ungranted delivery left effects: %+v", effs)
	}

	// A grant of a directory above it, in a file named by -grants, allows it.
	gf := filepath.Join(t.TempDir(), "grants.hcl")
	os.WriteFile(gf, []byte(`grant "deliver" { to = ["dir:`+filepath.Dir(dest)+`"] }`), 0o644)
	if r = apply(t, dir, nil, "-grants", gf); r.code != 0 || len(releases(t, dest)) != 1 {
		t.Fatalf("apply with -grants: exit %d, releases %v\n%s", r.code, releases(t, dest), r.stderr)
	}
	// A grants file that is not well formed is an error, never no grant.
	os.WriteFile(gf, []byte(`grant "delivr" { to = ["dir:/x"] }`), 0o644)
	if code, _, errs := foundry(t, dir, "plan", "-grants", gf); code != 1 || !strings.Contains(errs, "Unknown grant") {
		t.Errorf("a misspelt grant: exit %d\n%s", code, errs)
	}
}

// A granted delivery writes the release (manifest, files, evidence, receipt) once its check
// passed; verify accepts it, and refuses it once a byte of a delivered file, of the
// manifest or of the receipt changes. A second apply delivers nothing new.
func TestDeliverReleaseAndReceiptVerify(t *testing.T) {
	needSandbox(t)
	dest := filepath.Join(t.TempDir(), "releases")
	dir := deliverFixture(t, "dir:"+dest, true)
	r := apply(t, dir, nil)
	if r.code != 0 || !sameSet(r.executed, "product.app.step.make", "product.app.check.serves") || !strings.Contains(r.stdout, "Delivered product.app to dir:"+dest+"/") {
		t.Fatalf("apply: exit %d, executed %v\n%s\n%s", r.code, r.executed, r.stdout, r.stderr)
	}
	rels := releases(t, dest)
	if len(rels) != 1 {
		t.Fatalf("want one release under %s, have %v", dest, rels)
	}
	rel := filepath.Join(dest, rels[0])
	// The channel's current release has its data directory from the start (current/data).
	if fi, err := os.Stat(filepath.Join(dest, deliver.CurrentLink, deliver.DataDir)); err != nil || !fi.IsDir() {
		t.Errorf("current/data is not a directory after the first delivery: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(rel, deliver.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m deliver.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Product != "product.app" || len(m.Start) != 3 || m.Target == "" || !strings.HasPrefix(m.Source, "sha256:") ||
		len(m.Acceptance) != 1 || m.Acceptance[0].Check != "product.app.check.serves" || len(m.Acceptance[0].Attestations) == 0 ||
		!strings.Contains(m.Restart, "./bin/app -data /var/lib/app") {
		t.Errorf("release manifest: %s", b)
	}
	if got, _ := os.ReadFile(filepath.Join(rel, "files", "bin", "app")); string(got) != "echo serving\n" {
		t.Errorf("delivered file: %q", got)
	}
	key := filepath.Join(dir, ".foundry", "keys", "signing.pub")
	code, out, errs := foundry(t, dir, "verify", "-key", key, rel)
	if code != 0 || !strings.Contains(out, "acceptance") {
		t.Fatalf("verify of the release: exit %d\n%s\n%s", code, out, errs)
	}
	// The receipt is in the project's attestations too.
	if code, out, errs := foundry(t, dir, "verify", "-key", key, "-attestations", ".foundry/attestations",
		"-type", "https://foundry.dev/delivery-receipt/v1", filepath.Join(rel, "files")); code != 0 {
		t.Errorf("verify of the files against .foundry/attestations: exit %d\n%s\n%s", code, out, errs)
	}

	if r = apply(t, dir, nil); r.code != 0 || len(r.executed) != 0 || len(releases(t, dest)) != 1 {
		t.Fatalf("a second apply: exit %d, executed %v, releases %v\n%s", r.code, r.executed, releases(t, dest), r.stderr)
	}
	if effs := deliverEffects(t, dir); len(effs) != 1 || effs[0].Status != state.EffectSucceeded {
		t.Fatalf("want one succeeded deliver effect, have %+v", effs)
	}

	tamper := func(name, path string, edit func([]byte) []byte) {
		t.Helper()
		cp := filepath.Join(t.TempDir(), "rel")
		copyTree(t, rel, cp)
		p := filepath.Join(cp, path)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, edit(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := foundry(t, dir, "verify", "-key", key, cp); code != 1 || !strings.Contains(out, "FAIL") {
			t.Errorf("verify of a release with a tampered %s: exit %d\n%s\n%s", name, code, out, errs)
		}
	}
	tamper("file", "files/bin/app", func(b []byte) []byte { return append(b, '#') })
	tamper("manifest", deliver.ManifestFile, func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"target":"`, `"target":"x`, 1))
	})
	tamper("receipt", deliver.ReceiptFile, func(b []byte) []byte {
		var env map[string]any
		json.Unmarshal(b, &env)
		p := env["payload"].(string)
		env["payload"] = p[:len(p)-8] + "AAAAAAA=" // a changed byte of the signed statement
		out, _ := json.Marshal(env)
		return out
	})
}

// A kill at each point of a delivery — before its dispatch, after the dispatch, after the
// release is committed at the destination, before the outcome is recorded — and an apply
// again leave exactly one release and one succeeded deliver effect.
func TestDeliverCrashLeavesOneDelivery(t *testing.T) {
	needSandbox(t)
	for _, point := range []string{outbox.FaultBeforeDispatch, outbox.FaultAfterDispatch, deliver.FaultAfterCommit, deliver.FaultBeforeRecord} {
		t.Run(point, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "releases")
			dir := deliverFixture(t, "dir:"+dest, true)
			r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + point + ":product.app"})
			if r.code != -1 {
				t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", r.code, r.stderr)
			}
			r = apply(t, dir, nil, "-progress", "plain")
			if r.code != 0 {
				t.Fatalf("the resumed apply: exit %d\n%s", r.code, r.stderr)
			}
			if rels := releases(t, dest); len(rels) != 1 {
				t.Fatalf("want one release, have %v", rels)
			}
			effs := deliverEffects(t, dir)
			if len(effs) != 1 || effs[0].Status != state.EffectSucceeded {
				t.Fatalf("want one succeeded deliver effect, have %+v", effs)
			}
			unknownAfter := point != outbox.FaultBeforeDispatch
			if got := strings.Contains(r.stderr, "REC product.app"); got != unknownAfter {
				t.Errorf("reconciled = %v, want %v\n%s", got, unknownAfter, r.stderr)
			}
			if point == deliver.FaultBeforeRecord && !strings.Contains(r.stderr, "so it is not performed again") {
				t.Errorf("a committed delivery must be found at its destination, not performed again:\n%s", r.stderr)
			}
			ents, _ := os.ReadDir(dest)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".tmp-") {
					t.Errorf("a temporary directory is left at the destination: %s", e.Name())
				}
			}
			key := filepath.Join(dir, ".foundry", "keys", "signing.pub")
			if code, out, errs := foundry(t, dir, "verify", "-key", key, filepath.Join(dest, releases(t, dest)[0])); code != 0 {
				t.Errorf("verify of the release after the crash: exit %d\n%s\n%s", code, out, errs)
			}
		})
	}
}

// An oci-layout: destination holds the release as an artifact: the release manifest as its
// config, the files as its layer, the evidence and the receipt attached, tagged by the
// release's digest. A kill at each point of the delivery — before its dispatch, after it,
// after the artifact and its evidence are stored (no receipt, no tag), after the tag (the
// outcome not recorded) — and an apply again leave that one artifact with one receipt and
// one succeeded deliver effect.
func TestDeliverToOCILayout(t *testing.T) {
	needSandbox(t)
	for _, point := range []string{outbox.FaultBeforeDispatch, outbox.FaultAfterDispatch, deliver.FaultAfterCommit, deliver.FaultBeforeRecord} {
		t.Run(point, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "oci")
			dir := deliverFixture(t, "oci-layout:"+dest, true)
			r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + point + ":product.app"})
			if r.code != -1 {
				t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", r.code, r.stderr)
			}
			if point == deliver.FaultAfterCommit {
				// Committed: the artifact and its evidence are stored; no receipt, no tag.
				tags, receipts, evidence := layoutReleases(t, dest, "")
				if len(tags) != 0 || receipts != 0 || evidence == 0 {
					t.Fatalf("at %s the layout has tags %v, %d receipts and %d evidence envelopes; want the evidence only", point, tags, receipts, evidence)
				}
			}
			if r = apply(t, dir, nil, "-progress", "plain"); r.code != 0 || !strings.Contains(r.stdout, "Delivered product.app to oci-layout:"+dest+"@sha256:") {
				t.Fatalf("apply: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if got, want := strings.Contains(r.stderr, "REC product.app"), point != outbox.FaultBeforeDispatch; got != want {
				t.Errorf("reconciled = %v, want %v\n%s", got, want, r.stderr)
			}
			if point == deliver.FaultBeforeRecord && !strings.Contains(r.stderr, "so it is not performed again") {
				t.Errorf("a tagged release must be found in the layout, not delivered again:\n%s", r.stderr)
			}
			ref := regexp.MustCompile(`oci-layout:\S+@sha256:[0-9a-f]{64}`).FindString(r.stdout)
			if r = apply(t, dir, nil); r.code != 0 {
				t.Fatalf("apply again: exit %d\n%s", r.code, r.stderr)
			}
			tags, receipts, evidence := layoutReleases(t, dest, "")
			if len(tags) != 1 || receipts != 1 || evidence == 0 {
				t.Fatalf("want one release tagged in the layout with its evidence and one receipt, have tags %v, %d receipts, %d evidence", tags, receipts, evidence)
			}
			if effs := deliverEffects(t, dir); len(effs) != 1 || effs[0].Status != state.EffectSucceeded {
				t.Fatalf("want one succeeded deliver effect, have %+v", effs)
			}
			// The receipt attached is the one kept with the project's attestations.
			_, _, _ = layoutReleases(t, dest, filepath.Join(dir, ".foundry", "attestations"))
			// foundry verify checks the release in the layout by its attached receipt.
			key := filepath.Join(dir, ".foundry", "keys", "signing.pub")
			if code, out, errs := foundry(t, dir, "verify", "-key", key, ref); code != 0 || !strings.Contains(out, "PASS release") {
				t.Fatalf("verify %s: exit %d\n%s\n%s", ref, code, out, errs)
			}
		})
	}
}

// A delivery a kill left unknown, at a layout whose index cannot be read, cannot be told: the
// apply fails naming 'foundry effects resolve', writes nothing and leaves the effect unknown.
// Once the index reads again, the next apply finds the release and does not deliver again.
func TestDeliverUnknownWaitsForAReadableDestination(t *testing.T) {
	needSandbox(t)
	dest := filepath.Join(t.TempDir(), "oci")
	dir := deliverFixture(t, "oci-layout:"+dest, true)
	if r := apply(t, dir, []string{"FOUNDRY_TEST_FAULT=" + deliver.FaultBeforeRecord + ":product.app"}); r.code != -1 {
		t.Fatalf("the faulted apply should die by SIGKILL: exit %d\n%s", r.code, r.stderr)
	}
	index := filepath.Join(dest, "index.json")
	good, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(index, good[:len(good)/2], 0o644) // a torn index: neither there nor not there
	r := apply(t, dir, nil, "-progress", "plain")
	effs := deliverEffects(t, dir)
	if r.code != 1 || len(effs) != 1 || effs[0].Status != state.EffectUnknown {
		t.Fatalf("apply with the layout unreadable: exit %d, effects %+v\n%s", r.code, effs, r.stderr)
	}
	for _, want := range []string{"has an unknown outcome", "its destination cannot tell whether it happened", "'foundry effects resolve " + effs[0].ID + " -status succeeded|failed -reason TEXT'"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
		}
	}
	if got, _ := os.ReadFile(index); string(got) != string(good[:len(good)/2]) {
		t.Errorf("the blocked apply wrote to the layout's index")
	}
	os.WriteFile(index, good, 0o644)
	r = apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 || !strings.Contains(r.stderr, "so it is not performed again") {
		t.Fatalf("apply once the layout reads again: exit %d\n%s", r.code, r.stderr)
	}
	if tags, receipts, _ := layoutReleases(t, dest, ""); len(tags) != 1 || receipts != 1 {
		t.Errorf("want one release with one receipt, have tags %v and %d receipts", tags, receipts)
	}
}

// layoutReleases lists the release tags in the layout at dest and counts the receipts and
// other envelopes attached to the releases it holds (tagged or not). With attestations
// set, it also requires every receipt to be stored there.
func layoutReleases(t *testing.T, dest, attestations string) (tags []string, receipts, evidence int) {
	t.Helper()
	l, err := registry.OpenLayout(dest)
	if err != nil {
		t.Fatal(err)
	}
	descs, err := l.Descriptors()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[digest.Digest]bool{} // a tagged manifest is listed under its tag and without
	for _, d := range descs {
		tag := d.Annotations["org.opencontainers.image.ref.name"]
		if strings.HasPrefix(tag, "release-") {
			tags = append(tags, tag)
		}
		if d.ArtifactType != "application/vnd.foundry.release.v1" || seen[digest.Digest(d.Digest)] {
			continue
		}
		seen[digest.Digest(d.Digest)] = true
		atts, _, err := registry.Referrers(context.Background(), l, digest.Digest(d.Digest))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range atts {
			if a.PredicateType != provenance.PredicateDeliveryReceipt {
				evidence++
				continue
			}
			receipts++
			if attestations != "" {
				p := filepath.Join(attestations, "sha256-"+strings.TrimPrefix(string(a.Digest), "sha256:")+".intoto.json")
				if _, err := os.Stat(p); err != nil {
					t.Errorf("the receipt %s attached to the release is not in %s: %v", a.Digest, attestations, err)
				}
			}
		}
	}
	return tags, receipts, evidence
}

// A product with an accept block is delivered only once its acceptance passed, and its
// release names the signed acceptance result, which verify checks; a product whose
// acceptance fails is not delivered.
func TestDeliverAfterAcceptance(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "accept"), dir)
	dest := filepath.Join(t.TempDir(), "releases")
	b, err := os.ReadFile(filepath.Join(dir, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for _, p := range []string{"forgetful", "careless"} {
		prev := map[string]string{"forgetful": "durable", "careless": "forgetful"}[p]
		src = strings.Replace(src, "  }\n}\n\nproduct \""+p+"\"", `  }
  deliver {
    to    = "dir:`+dest+"/"+prev+`"
    files = { "/srv" = step.server.output["/out/srv"] }
    start = ["/srv/start"]
  }
}

product "`+p+`"`, 1)
	}
	if strings.Count(src, "deliver {") != 2 {
		t.Fatalf("the fixture changed: %s", src)
	}
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644)
	operatorGrants(t, `grant "deliver" { to = ["dir:`+dest+`"] }`)

	r := apply(t, dir, nil)
	if r.code == 0 {
		t.Fatalf("forgetful's acceptance should fail the apply:\n%s", r.stderr)
	}
	if rels := releases(t, filepath.Join(dest, "forgetful")); len(rels) != 0 {
		t.Errorf("a product whose acceptance failed was delivered: %v", rels)
	}
	rels := releases(t, filepath.Join(dest, "durable"))
	if len(rels) != 1 {
		t.Fatalf("want one release of durable, have %v\n%s", rels, r.stderr)
	}
	rel := filepath.Join(dest, "durable", rels[0])
	b, _ = os.ReadFile(filepath.Join(rel, deliver.ManifestFile))
	var m deliver.Manifest
	json.Unmarshal(b, &m)
	if len(m.Acceptance) != 1 || m.Acceptance[0].Check != "product.durable.accept" || len(m.Acceptance[0].Attestations) != 1 ||
		m.Acceptance[0].Attestations[0] != m.Acceptance[0].Result {
		t.Errorf("the release does not name the acceptance evidence: %s", b)
	}
	key := filepath.Join(dir, ".foundry", "keys", "signing.pub")
	code, out, errs := foundry(t, dir, "verify", "-key", key, rel)
	if code != 0 || !strings.Contains(out, "predicateType https://in-toto.io/attestation/test-result/v0.1") {
		t.Fatalf("verify of the accepted release: exit %d\n%s\n%s", code, out, errs)
	}
	deliveryReportShowsReceipt(t, dir, rel, key)
}

// deliveryReportShowsReceipt checks the report of the run that delivered product.durable to
// release rel (and failed forgetful's acceptance): the product events are in its JSON, its
// "Delivery receipts" section, opened in Chromium, shows the release verified with the
// receipt and the acceptance result it names, each signed by the project's key; once a
// delivered byte changes, the receipt no longer verifies.
func deliveryReportShowsReceipt(t *testing.T, dir, rel, key string) {
	keys, err := provenance.LoadVerifiers(key)
	if err != nil {
		t.Fatal(err)
	}
	keyID := keys[0].KeyID
	readReport := func() runReport {
		t.Helper()
		code, out, errs := foundry(t, dir, "report", "-json")
		var rep runReport
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("report -json: exit %d: %s", code, errs)
		}
		return rep
	}
	rep := readReport()
	types := map[string]string{}
	for _, e := range rep.CapabilityEvents {
		types[e.Capability+" "+e.Type] = e.Ref
	}
	for _, want := range []string{"product.durable product_accepted", "product.forgetful acceptance_failed", "product.durable product_delivered"} {
		if _, ok := types[want]; !ok {
			t.Errorf("report -json: no event %s in %v", want, types)
		}
	}
	if len(rep.Receipts) != 1 || rep.Receipts[0].Product != "product.durable" || rep.Receipts[0].Location != "dir:"+rel || !rep.Receipts[0].Verified {
		t.Fatalf("report -json receipts: %+v, want product.durable at %s verified", rep.Receipts, rel)
	}
	signed := map[string]string{}
	for _, e := range rep.Receipts[0].Evidence {
		if e.Verified && len(e.SignedBy) == 1 {
			signed[e.What] = e.SignedBy[0].KeyID
		}
	}
	if signed[provenance.PredicateDeliveryReceipt] != keyID || signed[provenance.PredicateTestResult] != keyID {
		t.Errorf("report -json: receipt and acceptance signed by %v, want both by %s", signed, keyID)
	}

	p := openReport(t, dir)
	var receipts []string
	shown := map[string]string{}
	for _, it := range p.items {
		switch it["class"] {
		case "receipt":
			receipts = append(receipts, it["product"]+" "+it["verified"])
		case "evidence":
			if it["verified"] == "true" {
				shown[it["what"]] = it["signers"]
			}
		}
	}
	if !slices.Equal(receipts, []string{"product.durable true"}) {
		t.Errorf("the report's delivery receipts: %v, want product.durable verified", receipts)
	}
	if shown[provenance.PredicateDeliveryReceipt] != keyID || shown[provenance.PredicateTestResult] != keyID {
		t.Errorf("the report shows the receipt's evidence signed by %v, want by %s", shown, keyID)
	}
	notBlank(t, p.shot)

	files := filepath.Join(rel, deliver.FilesDir, "srv", "start")
	b, err := os.ReadFile(files)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files, append(b, '#'), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := readReport().Receipts; len(r) != 1 || r[0].Verified || r[0].Why == "" {
		t.Errorf("a changed delivered file: receipts %+v, want it not verified, saying why", r)
	}
}

// A deliver.files key that climbs out of the release ("/../../…/ESCAPED", as an attacker
// would write it to land the files anywhere on the host) is refused by validate, plan and
// apply at its file:line, with nothing written at the escaping path or the destination.
// A key that is clean but reached through a symlink an earlier file of the release put
// there (srv/x -> OUTSIDE, then /srv/x/pwn) is refused where the release is assembled,
// with nothing written outside either.
func TestDeliverKeyEscapingTheReleaseIsRefused(t *testing.T) {
	outside := t.TempDir()
	escaped := filepath.Join(outside, "escaped")
	dest := filepath.Join(t.TempDir(), "releases")
	dir := deliverFixture(t, "dir:"+dest, true)
	os.MkdirAll(filepath.Join(dir, "payload"), 0o755)
	os.WriteFile(filepath.Join(dir, "payload", "x"), []byte("owned\n"), 0o644)
	main := filepath.Join(dir, "main.hcl")
	b, _ := os.ReadFile(main)
	const files = `files = { "/bin/app" = step.make.output["/out/app"] }`
	key := "/../../../../../../../../../.." + escaped
	src := strings.Replace(string(b), files, `files = { "/bin/app" = step.make.output["/out/app"], "`+key+`" = dir("payload") }`, 1)
	if src == string(b) {
		t.Fatal("the fixture changed")
	}
	os.WriteFile(main, []byte(src), 0o644)
	line := strings.Count(src[:strings.Index(src, "files = {")], "\n") + 1
	at := fmt.Sprintf("on main.hcl line %d:", line)
	for _, args := range [][]string{{"validate"}, {"plan"}, {"apply", "-auto-approve", "-executor", "runc"}} {
		code, out, errs := foundry(t, dir, args...)
		if code != 1 || !strings.Contains(errs, "Invalid artifact path") || !strings.Contains(errs, at) || !strings.Contains(errs, strconv.Quote(key)) {
			t.Errorf("%s of an escaping deliver key: exit %d, want 1 with «Invalid artifact path» at %s\n%s\n%s", args[0], code, at, out, errs)
		}
	}
	for _, p := range []string{escaped, dest} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was written: %v", p, err)
		}
	}

	needSandbox(t)
	// The check mounts what is delivered: a check-only product delivers only what its checks saw.
	os.Remove(filepath.Join(dir, "payload", "x"))
	os.Symlink(outside, filepath.Join(dir, "payload", "x"))
	src = strings.Replace(string(b), files, `files = { "/bin/app" = step.make.output["/out/app"], "/srv" = dir("payload"), "/srv/x/pwn" = "owned" }`, 1)
	src = strings.Replace(src, `mounts = { "/app" = step.make.output["/out/app"] }`, `mounts = { "/app" = step.make.output["/out/app"], "/p" = dir("payload"), "/o" = "owned" }`, 1)
	os.WriteFile(main, []byte(src), 0o644)
	r := apply(t, dir, nil)
	if r.code != 1 || !strings.Contains(r.stderr, `assembling the release of product.app: file "/srv/x/pwn": /srv/x is a symlink`) {
		t.Errorf("apply of a release written through a symlink: exit %d\n%s", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the release wrote outside itself: %v", ents)
	}
	if rels := releases(t, dest); len(rels) != 0 {
		t.Errorf("a release was delivered: %v", rels)
	}
}

// resignReceipt rewrites the statement of a receipt envelope with edit and signs it again
// with the project's own signing key, as someone holding that key could: a receipt forged
// without Foundry's checks.
func resignReceipt(t *testing.T, project string, env []byte, edit func(st map[string]any)) []byte {
	t.Helper()
	var e struct{ Payload string }
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	edit(st)
	if payload, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(project, ".foundry", "keys", "signing.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.LoadSigner(key, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ssdsse.WrapSigner(s, provenance.PayloadType).SignMessage(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A product is delivered only after its acceptance passes, never vacuously: one with a
// deliver block and neither a check nor an accept block is refused by validate, plan and
// apply at the block's file:line, with nothing written; and a receipt that names no
// acceptance evidence, forged with the project's own key, is refused by foundry verify.
func TestDeliveryRequiresAcceptance(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "releases")
	dir := deliverFixture(t, "dir:"+dest, true)
	os.MkdirAll(filepath.Join(dir, "payload"), 0o755)
	os.WriteFile(filepath.Join(dir, "payload", "x"), []byte("x\n"), 0o644)
	bare := "project \"bare\" {}\nproduct \"app\" {\n  deliver {\n    to    = \"dir:" + dest + "\"\n    files = { \"/srv\" = dir(\"payload\") }\n  }\n}\n"
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(bare), 0o644)
	for _, args := range [][]string{{"validate"}, {"plan"}, {"apply", "-auto-approve", "-executor", "runc"}} {
		code, out, errs := foundry(t, dir, args...)
		if code != 1 || !strings.Contains(errs, "Delivery without acceptance") || !strings.Contains(errs, "on main.hcl line 3:") ||
			!strings.Contains(errs, `product "app" is delivered only after its acceptance passes, and it has none`) {
			t.Errorf("%s of a product without acceptance: exit %d, want 1 with «Delivery without acceptance» at main.hcl line 3\n%s\n%s", args[0], code, out, errs)
		}
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("something was delivered: %v", err)
	}

	needSandbox(t)
	dir = deliverFixture(t, "dir:"+dest, true)
	if r := apply(t, dir, nil); r.code != 0 || len(releases(t, dest)) != 1 {
		t.Fatalf("apply: exit %d, releases %v\n%s", r.code, releases(t, dest), r.stderr)
	}
	rel := filepath.Join(dest, releases(t, dest)[0])
	env, err := os.ReadFile(filepath.Join(rel, deliver.ReceiptFile))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, ".foundry", "keys", "signing.pub")
	forged := func(edit func(map[string]any)) (int, string) {
		t.Helper()
		cp := filepath.Join(t.TempDir(), "rel")
		copyTree(t, rel, cp)
		os.Chmod(filepath.Join(cp, deliver.ReceiptFile), 0o644)
		if err := os.WriteFile(filepath.Join(cp, deliver.ReceiptFile), resignReceipt(t, dir, env, edit), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := foundry(t, dir, "verify", "-key", key, cp)
		return code, out + errs
	}
	// Signed again unchanged, the receipt verifies: the forgery below differs only in what it says.
	if code, out := forged(func(map[string]any) {}); code != 0 {
		t.Fatalf("the receipt signed again unchanged: exit %d\n%s", code, out)
	}
	code, out := forged(func(st map[string]any) { st["predicate"].(map[string]any)["acceptance"] = []any{} })
	if code != 1 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "no acceptance evidence") {
		t.Errorf("verify of a receipt naming no acceptance: exit %d\n%s", code, out)
	}
}

// A product accepted through its service delivers the tree its acceptance ran on: deliver
// files that differ from the accept block's (here, a file more) are refused once the
// acceptance passed, with a message that says so, and nothing is delivered.
func TestDeliverOfFilesNotAcceptedIsRefused(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "accept"), dir)
	dest := filepath.Join(t.TempDir(), "releases")
	b, err := os.ReadFile(filepath.Join(dir, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(b), "  }\n}\n\nproduct \"forgetful\"", `  }
  deliver {
    to    = "dir:`+dest+`"
    files = { "/srv" = step.server.output["/out/srv"], "/NOTES" = "not accepted" }
  }
}

product "forgetful"`, 1)
	if src == string(b) {
		t.Fatal("the fixture changed")
	}
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644)
	operatorGrants(t, `grant "deliver" { to = ["dir:`+dest+`"] }`)
	r := apply(t, dir, nil, "-target", "product.durable")
	if r.code != 1 || !strings.Contains(r.stderr, "product.durable: its deliver files (tree sha256:") ||
		!strings.Contains(r.stderr, "are not the files its acceptance ran on (its accept block's files, tree sha256:") ||
		!strings.Contains(r.stderr, "nothing was delivered") {
		t.Fatalf("apply of a product delivering files it was not accepted on: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `"type":"product_accepted","node":"product.durable"`) {
		t.Errorf("the acceptance should have run and passed first:\n%s", r.stderr)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("something was delivered: %v", err)
	}
	if effs := deliverEffects(t, dir); len(effs) != 0 {
		t.Errorf("a refused delivery left effects: %+v", effs)
	}
}

// linkerProject delivers to DEST a directory holding a symbolic link it made to OUTSIDE.
const linkerProject = `
project "linker" {}

seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/ln" = "busybox", "/bin/mkdir" = "busybox" }
  }
  env = { PATH = "/bin" }
}

product "links" {
  step "make" {
    image   = seed.bb
    run     = ["sh", "-c", "mkdir -p /out/d && ln -s OUTSIDE /out/d/esc"]
    outputs = ["/out/d"]
  }
  check "made" {
    image  = seed.bb
    mounts = { "/d" = step.make.output["/out/d"] }
    run    = ["sh", "-c", "test -L /d/esc"]
  }
  deliver {
    to    = "DEST"
    files = { "/d" = step.make.output["/out/d"] }
  }
}
`

// A delivery never escapes its grant (issue 29): a product delivers a directory holding a
// link to OUTSIDE it made; a later apply of another project delivering to
// GRANTED/RELEASE/files/d/esc/pwn, which the grant of GRANTED seems to cover, is refused
// by the plan and by apply, and nothing is written OUTSIDE. So is a destination through a
// link below the grant that no release made (GRANTED/via, a link to OUTSIDE), and one inside
// the earlier release that passes no link.
func TestDeliveryCannotEscapeItsGrant(t *testing.T) {
	needSandbox(t)
	granted := filepath.Join(t.TempDir(), "granted")
	outside := t.TempDir()
	gf := filepath.Join(t.TempDir(), "grants.hcl")
	if err := os.WriteFile(gf, []byte(`grant "deliver" { to = ["dir:`+granted+`"] }`), 0o644); err != nil {
		t.Fatal(err)
	}
	first := t.TempDir()
	src := strings.NewReplacer("DEST", "dir:"+granted, "OUTSIDE", outside).Replace(linkerProject)
	if err := os.WriteFile(filepath.Join(first, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := apply(t, first, nil, "-grants", gf); r.code != 0 {
		t.Fatalf("the first delivery: exit %d\n%s", r.code, r.stderr)
	}
	rels := releases(t, granted)
	if len(rels) != 1 {
		t.Fatalf("releases %v", rels)
	}
	if tgt, err := os.Readlink(filepath.Join(granted, rels[0], "files", "d", "esc")); err != nil || tgt != outside {
		t.Fatalf("the release does not hold the link the product made: %q, %v", tgt, err)
	}
	if err := os.Symlink(outside, filepath.Join(granted, "via")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ dest, why string }{
		{filepath.Join(granted, rels[0], "files", "d", "esc", "pwn"), "is a delivered release"},
		{filepath.Join(granted, rels[0], "files", "d", "pwn"), "is a delivered release"},
		{filepath.Join(granted, "via", "pwn"), "is a symbolic link"},
	} {
		second := deliverFixture(t, "dir:"+tc.dest, false)
		code, out, errs := foundry(t, second, "plan", "-json", "-grants", gf)
		var prod *plan.Node
		for _, n := range decodePlan(t, out).Nodes {
			if n.Address == "product.app" {
				prod = n
			}
		}
		if code != 0 || prod == nil || prod.Status != plan.StatusNeedsGrant || prod.Deliver == nil || prod.Deliver.Granted || !strings.Contains(prod.Deliver.Refused, tc.why) {
			t.Errorf("plan of a delivery to %s: exit %d, product %+v\n%s", tc.dest, code, prod, errs)
		}
		r := apply(t, second, nil, "-grants", gf)
		if r.code != 1 || len(r.executed) != 0 || !strings.Contains(r.stderr, "which no grant can allow") || !strings.Contains(r.stderr, tc.why) {
			t.Errorf("apply of a delivery to %s: exit %d, executed %v\n%s", tc.dest, r.code, r.executed, r.stderr)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("a delivery to %s wrote %d entries outside its grant", tc.dest, len(ents))
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(granted, rels[0], "files", "d")); len(ents) != 1 {
		t.Errorf("the earlier release was written into: %d entries in its files/d", len(ents))
	}
}

// A project cannot grant itself (issue 29): a .foundry/grants.hcl its author ships is
// ignored, with a warning that says where grants belong, for deliveries and network alike;
// the operator's grants come from -grants, $FOUNDRY_GRANTS or the per-user file, and a
// -grants file inside the project is read, with a warning, because the operator named it.
func TestProjectCannotGrantItself(t *testing.T) {
	needSandbox(t)
	dest := filepath.Join(t.TempDir(), "releases")
	dir := deliverFixture(t, "dir:"+dest, false)
	self := `grant "deliver" { to = ["dir:` + dest + `"] }` + "\n" + `grant "network" { hosts = ["downloads.example:443"] }` + "\n"
	if err := os.MkdirAll(filepath.Join(dir, ".foundry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".foundry", "grants.hcl"), []byte(self), 0o644); err != nil {
		t.Fatal(err)
	}
	warning := "warning: ignoring " + filepath.Join(dir, ".foundry", "grants.hcl") + ": grants are the operator's"

	code, out, errs := foundry(t, dir, "plan", "-json")
	p := decodePlan(t, out)
	if code != 0 || p.Summary.NeedsGrant != 1 || !strings.Contains(errs, warning) || !strings.Contains(errs, "FOUNDRY_GRANTS") {
		t.Fatalf("plan with a self-issued grant: exit %d, summary %+v\n%s", code, p.Summary, errs)
	}
	r := apply(t, dir, nil)
	if r.code != 1 || len(r.executed) != 0 || !strings.Contains(r.stderr, warning) || !strings.Contains(r.stderr, "which no grant allows") {
		t.Fatalf("apply with a self-issued grant: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Fatalf("a self-granted delivery wrote its destination: %v", err)
	}

	// The network grant of the same file is ignored too: a source from that host needs one.
	src := `
project "fetcher" {}
source "zlib" {
  url    = "https://downloads.example/zlib.tar.gz"
  sha256 = "` + strings.Repeat("0", 64) + `"
}
`
	net := t.TempDir()
	os.WriteFile(filepath.Join(net, "main.hcl"), []byte(src), 0o644)
	os.MkdirAll(filepath.Join(net, ".foundry"), 0o755)
	os.WriteFile(filepath.Join(net, ".foundry", "grants.hcl"), []byte(self), 0o644)
	if code, out, errs := foundry(t, net, "plan", "-json"); code != 0 || decodePlan(t, out).Summary.NeedsGrant != 1 || !strings.Contains(errs, "warning: ignoring") {
		t.Errorf("a self-issued network grant: exit %d\n%s\n%s", code, out, errs)
	}

	// The per-user file grants it, as the operator's.
	cfg := t.TempDir()
	os.MkdirAll(filepath.Join(cfg, "foundry"), 0o755)
	os.WriteFile(filepath.Join(cfg, "foundry", "grants.hcl"), []byte(self), 0o644)
	r = apply(t, dir, []string{"XDG_CONFIG_HOME=" + cfg})
	if r.code != 0 || len(releases(t, dest)) != 1 || !strings.Contains(r.stderr, warning) {
		t.Fatalf("apply under the per-user grants: exit %d, releases %v\n%s", r.code, releases(t, dest), r.stderr)
	}
	// -grants naming the project's file is the operator's choice: read, with a warning.
	r = apply(t, dir, nil, "-grants", filepath.Join(dir, ".foundry", "grants.hcl"))
	if r.code != 0 || strings.Contains(r.stderr, "warning: ignoring") || !strings.Contains(r.stderr, "is inside the project, which its author controls; it is read because the operator named it") {
		t.Errorf("apply -grants inside the project: exit %d\n%s", r.code, r.stderr)
	}
}

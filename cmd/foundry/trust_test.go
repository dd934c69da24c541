package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/registry"
	"github.com/foundry-build/foundry/registry/registrytest"
)

// The attacks on admission below play someone with push rights on the project's registry or
// write access to .foundry/: they forge tags, manifests, referrers and state rows with the
// project's own registry package, against the embedded OCI layout and against Debian's
// docker-registry, and show each forgery refused through the CLI.

// trustFixture is a copy of testdata/trust whose project registry is addr, applied once:
// the cheap recipe was rejected by the sealed case dup.json, the good one admitted.
type trustFixture struct {
	dir, registry string
	store         registry.Store
	genuine       digest.Digest // the admitted manifest
	ref           string        // its reference
	first         applyRun
}

// registryKinds are the registries each attack runs against.
func registryKinds(t *testing.T) map[string]func() string {
	return map[string]func() string{
		"layout":       func() string { return "oci-layout:.foundry/registry" },
		"distribution": func() string { return registrytest.StartDistribution(t) + "/trust" },
	}
}

func newTrustFixture(t *testing.T, addr string) *trustFixture {
	t.Helper()
	needSandbox(t)
	f := &trustFixture{dir: t.TempDir(), registry: addr}
	copyTree(t, filepath.Join("testdata", "trust"), f.dir)
	tmpl, err := os.ReadFile(filepath.Join(f.dir, "main.hcl.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "main.hcl"), []byte(strings.ReplaceAll(string(tmpl), "REGISTRY", addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	f.first = apply(t, f.dir, nil, "-progress", "plain")
	if f.first.code != 0 || !strings.Contains(f.first.stderr, "recipe.cheap: failed the sealed suite") ||
		!strings.Contains(f.first.stderr, "ADM capability.sorter: recipe.good admitted as") {
		t.Fatalf("fixture apply: exit %d\n%s", f.first.code, f.first.stderr)
	}
	open := addr
	if p, ok := strings.CutPrefix(addr, registry.LayoutScheme); ok && !filepath.IsAbs(p) {
		open = registry.LayoutScheme + filepath.Join(f.dir, p)
	}
	if f.store, err = registry.Open(open); err != nil {
		t.Fatal(err)
	}
	p := f.plan(t)
	c := f.capability(t, p, "capability.sorter")
	if c.Status != plan.StatusRegistry {
		t.Fatalf("the admitted version is not pinned: %+v", c)
	}
	f.genuine, f.ref = c.Pinned.Digest, c.Pinned.Ref
	return f
}

func (f *trustFixture) plan(t *testing.T) *plan.Plan {
	t.Helper()
	code, out, errs := foundry(t, f.dir, "plan", "-json")
	if code != 0 {
		t.Fatalf("plan -json: exit %d\n%s", code, errs)
	}
	return decodePlan(t, out)
}

func (f *trustFixture) capability(t *testing.T, p *plan.Plan, addr string) *plan.Capability {
	t.Helper()
	for _, c := range p.Capabilities {
		if c.Address == addr {
			return c
		}
	}
	t.Fatalf("%s is not in the plan", addr)
	return nil
}

// addOther adds capability "other" (another contract, no recipe) and, with use, a step
// that mounts it.
func (f *trustFixture) addOther(t *testing.T, use bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "other.hcl.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if !use {
		src = src[:strings.Index(src, "step \"use-other\"")]
	}
	if err := os.WriteFile(filepath.Join(f.dir, "other.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *trustFixture) pub() string { return filepath.Join(f.dir, ".foundry", "keys", "signing.pub") }

// capabilitiesSay returns what `foundry capabilities` prints for one capability.
func (f *trustFixture) capabilitiesSay(t *testing.T, addr string) string {
	t.Helper()
	code, out, errs := foundry(t, f.dir, "capabilities")
	if code != 0 {
		t.Fatalf("capabilities: exit %d\n%s%s", code, out, errs)
	}
	i := strings.Index(out, addr+"\n")
	if i < 0 {
		t.Fatalf("capabilities does not list %s:\n%s", addr, out)
	}
	rest := out[i+len(addr)+1:]
	if j := strings.Index(rest, "\ncapability."); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// Item 1: the genuine admitted artifact of one capability, tagged under another
// capability's contract tag, is not admitted for that contract: not pinned, not reported as
// verified, not pulled, not mounted.
func TestForeignAdmissionIsNotAdmittedForAnotherContract(t *testing.T) {
	for name, addr := range registryKinds(t) {
		t.Run(name, func(t *testing.T) {
			f := newTrustFixture(t, addr())
			f.addOther(t, true)
			other := f.capability(t, f.plan(t), "capability.other")
			if err := f.store.Tag(context.Background(), admit.ContractTag(other.ContractDigest), f.genuine); err != nil {
				t.Fatal(err)
			}

			p := f.plan(t)
			c := f.capability(t, p, "capability.other")
			if c.Status == plan.StatusRegistry || !strings.Contains(c.Registry, "not admitted for this contract") {
				t.Fatalf("another contract's artifact was taken for capability.other: %+v", c)
			}
			if s := f.capabilitiesSay(t, "capability.other"); !strings.Contains(s, "NOT ADMITTED") || strings.Contains(s, "evidence verified") {
				t.Errorf("capabilities on the forged tag:\n%s", s)
			}
			r := apply(t, f.dir, nil, "-progress", "plain")
			if r.code == 0 || contains(r.executed, "step.use-other") || strings.Contains(r.stderr, "PIN capability.other") {
				t.Fatalf("apply used another contract's artifact: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
			}
		})
	}
}

// Item 2: a manifest whose layers are the rejected candidate's files, annotated with the
// admitted tree and carrying the admitted chain's attestations, is not verified, pinned or
// listed as verified; apply falls back to the recipes and admits the good one again.
func TestForgedLayersUnderAdmittedAnnotationsAreRefused(t *testing.T) {
	for name, addr := range registryKinds(t) {
		t.Run(name, func(t *testing.T) {
			f := newTrustFixture(t, addr())
			ctx := context.Background()
			ws, err := workspace.Open(f.dir)
			if err != nil {
				t.Fatal(err)
			}
			files := filepath.Join(t.TempDir(), "files")
			os.MkdirAll(filepath.Join(files, "bin"), 0o755)
			cheap, _ := os.ReadFile(filepath.Join(f.dir, "src", "cheap.sh"))
			os.WriteFile(filepath.Join(files, "bin", "sorter"), cheap, 0o755)
			cheapTree, _, err := ws.Store.PutDir(files)
			if err != nil {
				t.Fatal(err)
			}
			raw, _, err := f.store.Manifest(ctx, f.genuine)
			if err != nil {
				t.Fatal(err)
			}
			var genuine registry.Manifest
			if err := json.Unmarshal(raw, &genuine); err != nil {
				t.Fatal(err)
			}
			contract, err := registry.Pull(ctx, f.store, string(f.genuine), filepath.Join(t.TempDir(), "x"), registry.PullOptions{NoVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			cheapMd, err := registry.Publish(ctx, f.store, ws.Store, registry.Capability{Contract: contract.ContractJSON, Tree: cheapTree,
				Name: "sorter", Version: "cheap", Target: "linux/amd64"})
			ws.Close()
			if err != nil {
				t.Fatal(err)
			}
			craw, _, _ := f.store.Manifest(ctx, cheapMd)
			var cheapMan registry.Manifest
			json.Unmarshal(craw, &cheapMan)
			forged := genuine
			forged.Layers = cheapMan.Layers
			fraw, _ := json.Marshal(forged)
			fmd, err := f.store.PutManifest(ctx, fraw, registry.MediaTypeManifest)
			if err != nil {
				t.Fatal(err)
			}
			atts, _, err := registry.Referrers(ctx, f.store, f.genuine)
			if err != nil || len(atts) == 0 {
				t.Fatalf("referrers of the genuine artifact: %v %v", atts, err)
			}
			for _, a := range atts {
				if _, err := registry.Attach(ctx, f.store, fmd, a.Envelope, ""); err != nil {
					t.Fatal(err)
				}
			}
			c := f.capability(t, f.plan(t), "capability.sorter")
			if err := f.store.Tag(ctx, admit.ContractTag(c.ContractDigest), fmd); err != nil {
				t.Fatal(err)
			}
			forgedRef := strings.TrimSuffix(f.ref, string(f.genuine)) + string(fmd)
			if !strings.HasPrefix(forgedRef, registry.LayoutScheme+"/") && strings.HasPrefix(forgedRef, registry.LayoutScheme) {
				forgedRef = registry.LayoutScheme + filepath.Join(f.dir, strings.TrimPrefix(forgedRef, registry.LayoutScheme))
			}
			if code, out, errs := foundry(t, f.dir, "verify", "-key", f.pub(), forgedRef); code == 0 || strings.Contains(out, "VERIFIED: 1 of 1") {
				t.Errorf("verify accepted the forged manifest: exit %d\n%s%s", code, out, errs)
			}
			c = f.capability(t, f.plan(t), "capability.sorter")
			if c.Status == plan.StatusRegistry || !strings.Contains(c.Registry, "not admitted for this contract") {
				t.Fatalf("the forged manifest was pinned: %+v", c)
			}
			if s := f.capabilitiesSay(t, "capability.sorter"); !strings.Contains(s, "NOT ADMITTED") {
				t.Errorf("capabilities on the forged manifest:\n%s", s)
			}
			r := apply(t, f.dir, nil, "-progress", "plain")
			if r.code != 0 || !strings.Contains(r.stderr, "recipe.good admitted as") || !strings.Contains(r.stderr, string(f.genuine)) {
				t.Fatalf("apply did not fall back to the recipes: exit %d\n%s", r.code, r.stderr)
			}
			if c := f.capability(t, f.plan(t), "capability.sorter"); c.Status != plan.StatusRegistry || c.Pinned.Digest != f.genuine {
				t.Fatalf("after the fallback the genuine version is not pinned: %+v", c)
			}
		})
	}
}

// Item 3: a sealed case disclosed as a counterexample keeps guarding as a repair case: a
// new candidate from the rejected recipe (a comment added to its source) fails repair, and
// so it does with every state row that recorded the disclosure deleted, since the signed
// FAILED test result in .foundry/attestations is the evidence.
func TestDisclosedCaseKeepsGuarding(t *testing.T) {
	f := newTrustFixture(t, "oci-layout:.foundry/registry")
	for i, forge := range []string{"", "DELETE FROM evaluations; DELETE FROM verdicts; DELETE FROM retired_cases"} {
		os.RemoveAll(filepath.Join(f.dir, ".foundry", "registry")) // nothing pinned: the recipes are evaluated
		src := filepath.Join(f.dir, "src", "cheap.sh")
		b, _ := os.ReadFile(src)
		os.WriteFile(src, append(b, []byte("# a new candidate "+string(rune('a'+i))+"\n")...), 0o755)
		if forge != "" {
			ws, err := workspace.Open(f.dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range strings.Split(forge, "; ") {
				ws.SQLForTest(t, q)
			}
			ws.Close()
		}
		r := apply(t, f.dir, nil, "-progress", "plain")
		if r.code != 0 || !strings.Contains(r.stderr, "ok  recipe.cheap.step.build") {
			t.Fatalf("apply %d: exit %d, executed %v\n%s", i, r.code, r.executed, r.stderr)
		}
		if !strings.Contains(r.stderr, "recipe.cheap: failed the repair suite") || strings.Contains(r.stderr, "recipe.cheap admitted") ||
			!strings.Contains(r.stderr, "recipe.good admitted") {
			t.Fatalf("apply %d (%q): the disclosed case did not guard the new candidate:\n%s", i, forge, r.stderr)
		}
	}
}

// Item 5: a state row is not a fact to repeat: a succeeded publish whose recorded result
// names another manifest does not make apply report that manifest.
func TestForgedEffectRowIsNotEchoed(t *testing.T) {
	f := newTrustFixture(t, "oci-layout:.foundry/registry")
	ws, err := workspace.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	forged := "oci-layout:/elsewhere@sha256:" + strings.Repeat("0", 64)
	ws.SQLForTest(t, `UPDATE effects SET result = ? WHERE kind = 'publish'`, forged)
	ws.Close()
	os.RemoveAll(filepath.Join(f.dir, ".foundry", "registry"))
	r := apply(t, f.dir, nil, "-progress", "plain")
	if r.code != 0 || strings.Contains(r.stderr, forged) || !strings.Contains(r.stderr, "admitted as "+f.ref) {
		t.Fatalf("apply echoed the forged row or lost the genuine manifest %s: exit %d\n%s", f.ref, r.code, r.stderr)
	}
}

// Item 6: bad referrers — oversized, corrupted in place, more than the listing limit — and
// a manifest of another kind under a contract tag are skipped and reported; the genuine
// admitted artifact still verifies, is pinned and listed as verified, and plan and apply
// treat the junk under the other contract's tag as "not admitted".
func TestBadReferrersDoNotSpoilTheArtifact(t *testing.T) {
	for name, addr := range registryKinds(t) {
		t.Run(name, func(t *testing.T) {
			f := newTrustFixture(t, addr())
			ctx := context.Background()
			empty, err := pushBlob(ctx, f.store, []byte("{}"))
			if err != nil {
				t.Fatal(err)
			}
			referrer := func(layer registry.Descriptor, note string) []byte {
				m := registry.Manifest{SchemaVersion: 2, MediaType: registry.MediaTypeManifest, ArtifactType: registry.ArtifactTypeDSSE,
					Config: registry.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Digest: empty, Size: 2},
					Layers: []registry.Descriptor{layer}, Subject: &registry.Descriptor{MediaType: registry.MediaTypeManifest, Digest: f.genuine, Size: manifestSize(t, f)},
					Annotations: map[string]string{"note": note}}
				b, _ := json.Marshal(m)
				return b
			}
			// An envelope of 9 MiB, over the limit: refused by its descriptor before it is read.
			bigBytes := bytes.Repeat([]byte(" "), 9<<20)
			bd, err := pushBlob(ctx, f.store, bigBytes)
			if err != nil {
				t.Fatal(err)
			}
			big := registry.Descriptor{MediaType: registry.ArtifactTypeDSSE, Digest: bd, Size: int64(len(bigBytes))}
			if _, err := f.store.PushReferrer(ctx, referrer(big, "oversized"), registry.MediaTypeManifest); err != nil {
				t.Fatal(err)
			}
			// A blob whose bytes do not hash to its digest (corrupted in place, or served so).
			junk := []byte(`{"payloadType":"x","payload":"","signatures":[]}`)
			jd, err := pushBlob(ctx, f.store, junk)
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := strings.CutPrefix(f.store.String(), registry.LayoutScheme); ok {
				blob := filepath.Join(p, "blobs", "sha256", jd.Hex())
				os.Chmod(blob, 0o644)
				if err := os.WriteFile(blob, []byte(strings.Repeat("x", len(junk))), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			size := int64(len(junk))
			if name != "layout" {
				size += 5 // a registry serves what it stored; the descriptor lies about it instead
			}
			if _, err := f.store.PushReferrer(ctx, referrer(registry.Descriptor{MediaType: registry.ArtifactTypeDSSE, Digest: jd, Size: size}, "corrupt"), registry.MediaTypeManifest); err != nil {
				t.Fatal(err)
			}
			if name == "layout" {
				// More referrers than are read: the excess is skipped, the rest still counts.
				for i := 0; i <= registry.MaxReferrers; i++ {
					if _, err := f.store.PushReferrer(ctx, referrer(big, "excess "+string(rune('a'+i%26))+time.Now().String()), registry.MediaTypeManifest); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Something that is not a capability, under the other capability's contract tag.
			f.addOther(t, false)
			other := f.capability(t, f.plan(t), "capability.other")
			if err := f.store.Tag(ctx, admit.ContractTag(other.ContractDigest), mustManifest(t, f, referrer(big, "not a capability"))); err != nil {
				t.Fatal(err)
			}

			ref := f.ref
			if p, ok := strings.CutPrefix(ref, registry.LayoutScheme); ok && !filepath.IsAbs(p) {
				ref = registry.LayoutScheme + filepath.Join(f.dir, p)
			}
			code, out, errs := foundry(t, f.dir, "verify", "-key", f.pub(), ref)
			if code != 0 || !strings.Contains(errs, "skipped referrer") {
				t.Fatalf("verify of the genuine artifact: exit %d\n%s%s", code, out, errs)
			}
			code, out, errs = foundry(t, f.dir, "plan", "-json")
			if code != 0 {
				t.Fatalf("plan: exit %d\n%s", code, errs)
			}
			p := decodePlan(t, out)
			if c := f.capability(t, p, "capability.sorter"); c.Status != plan.StatusRegistry || c.Pinned.Digest != f.genuine {
				t.Fatalf("the genuine version is not pinned: %+v", c)
			}
			if c := f.capability(t, p, "capability.other"); c.Status == plan.StatusRegistry || !strings.Contains(c.Registry, "not a Foundry capability") {
				t.Fatalf("the junk manifest under capability.other's tag: %+v", c)
			}
			if s := f.capabilitiesSay(t, "capability.sorter"); !strings.Contains(s, "evidence verified") {
				t.Errorf("capabilities:\n%s", s)
			}
			// capability.other has no recipe: apply says it is missing, nothing worse.
			if r := apply(t, f.dir, nil, "-progress", "plain"); r.code != exitError || !strings.Contains(r.stderr, "missing") || strings.Contains(r.stderr, "Error") {
				t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
			}
		})
	}
}

// Item 7: cosign verifies the verification summary of an artifact that apply itself
// published to Debian's docker-registry, against the registry, as an auditor would.
func TestCosignVerifiesPublishedAdmission(t *testing.T) {
	cosign := findCosign(t)
	f := newTrustFixture(t, registrytest.StartDistribution(t)+"/trust")
	for _, tc := range []struct {
		typ string
		ok  bool
	}{{"https://slsa.dev/verification_summary/v1", true}, {"https://in-toto.io/attestation/test-result/v0.1", false}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, cosign, "verify-attestation", "--key", f.pub(), "--type", tc.typ,
			"--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry", f.ref).CombinedOutput()
		cancel()
		if (err == nil) != tc.ok {
			t.Errorf("cosign verify-attestation --type %s %s: err=%v, want ok=%v\n%s", tc.typ, f.ref, err, tc.ok, out)
		}
	}
	// And foundry's own pull, with its default requirement (the admission).
	code, out, errs := foundry(t, f.dir, "pull", f.ref, "-o", filepath.Join(t.TempDir(), "out"), "-key", f.pub())
	if code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("pull without -type: exit %d\n%s%s", code, out, errs)
	}
	// A passing verify shows what it relied on and, apart, what it did not need.
	code, out, errs = foundry(t, f.dir, "verify", "-key", f.pub(), f.ref)
	if code != 0 || !strings.Contains(out, "PASS sealed-evaluation") || !strings.Contains(out, "not needed (") || strings.Contains(out, "FAIL ") {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
}

func pushBlob(ctx context.Context, s registry.Store, b []byte) (digest.Digest, error) {
	d := digest.FromBytes(b)
	err := s.PutBlob(ctx, d, int64(len(b)), func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	return d, err
}

func manifestSize(t *testing.T, f *trustFixture) int64 {
	raw, _, err := f.store.Manifest(context.Background(), f.genuine)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(raw))
}

func mustManifest(t *testing.T, f *trustFixture, raw []byte) digest.Digest {
	d, err := f.store.PutManifest(context.Background(), raw, registry.MediaTypeManifest)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Item 4: verdicts are keyed by the sealed suite they were judged on. A sealed case added
// with a wrong expectation makes the plan say the admitted version passed an earlier suite
// (pinned only with keep_pins); apply evaluates the recipe's candidate on the current suite,
// where the wrong case rejects it. Once the case is corrected, the old rejection is not
// reused (nor quoted): the candidate is evaluated again and admitted. `foundry verdicts`
// lists what the evidence says, and a withdrawn verdict is evaluated afresh.
func TestVerdictsFollowTheSealedSuite(t *testing.T) {
	f := newTrustFixture(t, "oci-layout:.foundry/registry")
	wrong := filepath.Join(f.dir, "sealed", "wrong.json")
	os.WriteFile(wrong, []byte(`{"input":[7,6],"output":[6,8]}`), 0o644)

	c := f.capability(t, f.plan(t), "capability.sorter")
	if c.Status == plan.StatusRegistry || !strings.Contains(c.Registry, "passed an earlier sealed suite") {
		t.Fatalf("plan after a sealed case was added: %+v", c)
	}
	main := filepath.Join(f.dir, "main.hcl")
	orig, _ := os.ReadFile(main)
	os.WriteFile(main, []byte(strings.Replace(string(orig), "project \"trust\" {", "project \"trust\" {\n  keep_pins = true", 1)), 0o644)
	if c := f.capability(t, f.plan(t), "capability.sorter"); c.Status != plan.StatusRegistry || !strings.Contains(c.Registry, "keep_pins") {
		t.Fatalf("keep_pins did not keep the pin: %+v", c)
	}
	os.WriteFile(main, orig, 0o644)

	r := apply(t, f.dir, nil, "-progress", "plain")
	if r.code == 0 || !strings.Contains(r.stderr, "recipe.good: failed the sealed suite") || !strings.Contains(r.stderr, "expected: [6,8]") {
		t.Fatalf("apply with the wrong case: exit %d\n%s", r.code, r.stderr)
	}
	os.WriteFile(wrong, []byte(`{"input":[7,6],"output":[6,7]}`), 0o644)
	r = apply(t, f.dir, nil, "-progress", "plain")
	if r.code != 0 || strings.Contains(r.stderr, "[6,8]") || strings.Contains(r.stderr, "recorded sealed evaluation") ||
		!strings.Contains(r.stderr, "recipe.good admitted") {
		t.Fatalf("apply after the correction reused or quoted the old verdict: exit %d\n%s", r.code, r.stderr)
	}

	code, out, errs := foundry(t, f.dir, "verdicts", "-json")
	if code != 0 {
		t.Fatalf("verdicts: exit %d\n%s", code, errs)
	}
	var vs []evaluate.VerdictView
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatal(err)
	}
	var passed []evaluate.VerdictView
	disclosed := map[string]bool{}
	for _, v := range vs {
		if v.Evidence == "" {
			t.Errorf("a verdict without evidence: %+v", v)
		}
		if v.Passed {
			passed = append(passed, v)
		}
		disclosed[v.Disclosed] = true
	}
	if len(vs) != 4 || len(passed) != 2 || !disclosed["sealed/dup.json"] || !disclosed["sealed/wrong.json"] {
		t.Fatalf("verdicts: %+v", vs)
	}
	code, out, _ = foundry(t, f.dir, "verdicts")
	if code != 0 || !strings.Contains(out, "disclosed sealed/wrong.json") {
		t.Errorf("verdicts:\n%s", out)
	}

	// Withdraw the standing pass; without the registry copy, the candidate meets the sealed
	// suite again instead of reusing it.
	latest := passed[0]
	for _, v := range passed {
		if v.Evaluated.After(latest.Evaluated) {
			latest = v
		}
	}
	if code, out, errs := foundry(t, f.dir, "verdicts", "withdraw", string(latest.Envelope)[:20], "-reason", "the evaluator's sandbox was faulty"); code != 0 || !strings.Contains(out, "Withdrew") {
		t.Fatalf("withdraw: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := foundry(t, f.dir, "verdicts", "withdraw", string(latest.Envelope), "-reason", "again"); code != exitError || !strings.Contains(errs, "already withdrawn") {
		t.Errorf("withdrawing twice: exit %d %s", code, errs)
	}
	os.RemoveAll(filepath.Join(f.dir, ".foundry", "registry"))
	r = apply(t, f.dir, nil, "-progress", "plain")
	if r.code != 0 || strings.Contains(r.stderr, "sealed suite: passed (recorded") || !strings.Contains(r.stderr, "sealed suite: 2 of 2 cases passed") {
		t.Fatalf("apply after the withdrawal: exit %d\n%s", r.code, r.stderr)
	}
}

// Item 9: after the admitted manifest is quarantined, the plan does not pin it, and apply
// tries each recipe in turn: the good recipe's rebuild is the quarantined artifact again
// and is refused, so the next recipe's candidate is evaluated and admitted.
func TestQuarantinedAdmissionFallsThroughToTheNextRecipe(t *testing.T) {
	f := newTrustFixture(t, "oci-layout:.foundry/registry")
	alt := `
recipe "alt" {
  provides = capability.sorter
  cost     = 3
  step "build" {
    image   = seed.bb
    mounts  = { "/src" = dir("src") }
    run     = ["sh", "-c", "cp /src/good.sh /out/sorter && echo '# alt' >> /out/sorter"]
    outputs = ["/out/sorter"]
  }
  package {
    base  = seed.bb
    files = { "/bin/sorter" = step.build.output["/out/sorter"] }
  }
}
`
	os.WriteFile(filepath.Join(f.dir, "alt.hcl"), []byte(alt), 0o644)
	user := func(p *plan.Plan) *plan.Node {
		for _, n := range p.Nodes {
			if n.Address == "step.use-sorter" {
				return n
			}
		}
		t.Fatal("no step.use-sorter in the plan")
		return nil
	}
	// Pinned, the capability's files are known: the step that mounts them is keyed by them.
	if n := user(f.plan(t)); n.Status != plan.StatusCached {
		t.Fatalf("the user of the pinned capability is %s (%s), want cached", n.Status, n.Reason)
	}
	if code, out, errs := foundry(t, f.dir, "quarantine", "add", string(f.genuine), "-reason", "a bad build host"); code != 0 {
		t.Fatalf("quarantine: exit %d\n%s%s", code, out, errs)
	}
	p := f.plan(t)
	if c := f.capability(t, p, "capability.sorter"); c.Status == plan.StatusRegistry || !strings.Contains(c.Registry, "quarantined") {
		t.Fatalf("a quarantined version was pinned: %+v", c)
	}
	if n := user(p); n.Status != plan.StatusRun || !strings.Contains(n.Reason, "runs unless its inputs come out unchanged: it mounts what capability.sorter makes") {
		t.Fatalf("the user of a capability to build: %s (%s)", n.Status, n.Reason)
	}
	r := apply(t, f.dir, nil, "-progress", "plain")
	if r.code != 0 || !strings.Contains(r.stderr, "recipe.good: refused: its manifest "+string(f.genuine)+" is quarantined") ||
		!strings.Contains(r.stderr, "recipe.alt admitted") {
		t.Fatalf("apply did not fall through to the next recipe: exit %d\n%s", r.code, r.stderr)
	}
	// Another version's files: the step that mounts the capability runs again (keyed by
	// the contract digest, it was a cache hit over different bytes).
	if !strings.Contains(r.stderr, "  ok  step.use-sorter") {
		t.Fatalf("the user of the newly admitted version did not run again:\n%s", r.stderr)
	}
}

// Item 8: what is published names sealed cases by content digest only; the operator's local
// record keeps the mapping (foundry verdicts shows the file).
func TestPublishedEvidenceNamesNoSealedFile(t *testing.T) {
	f := newTrustFixture(t, "oci-layout:.foundry/registry")
	atts, _, err := registry.Referrers(context.Background(), f.store, f.genuine)
	if err != nil || len(atts) < 3 {
		t.Fatalf("referrers: %d, %v", len(atts), err)
	}
	for _, a := range atts {
		var env struct{ Payload []byte }
		if err := json.Unmarshal(a.Envelope, &env); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"dup.json", "pair.json", "sealed/"} {
			if bytes.Contains(env.Payload, []byte(name)) || bytes.Contains(a.Envelope, []byte(name)) {
				t.Errorf("published %s names %q:\n%s", a.PredicateType, name, env.Payload)
			}
		}
	}
	if code, out, _ := foundry(t, f.dir, "verdicts"); code != 0 || !strings.Contains(out, "disclosed sealed/dup.json") {
		t.Errorf("the local record lost the mapping:\n%s", out)
	}
}

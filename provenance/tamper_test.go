package provenance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// rawEnvelope is the wire form, for tests that tamper with it.
type rawEnvelope struct {
	PayloadType string   `json:"payloadType"`
	Payload     string   `json:"payload"`
	Signatures  []rawSig `json:"signatures"`
}

type rawSig struct {
	KeyID string `json:"keyid,omitempty"`
	Sig   string `json:"sig"`
}

func decodeRaw(t *testing.T, env []byte) rawEnvelope {
	t.Helper()
	var r rawEnvelope
	if err := json.Unmarshal(env, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r rawEnvelope) bytes(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTamperRefused checks that every kind of tampering is refused, each with its own
// reason code.
func TestTamperRefused(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	other := newKeyPair(t, KeyECDSAP256)
	digestA, digestB := sha("artifact A"), sha("artifact B")
	envA := mint(t, kp, testExecution(digestA))
	envB := mint(t, kp, testExecution(digestB))

	flipPayload := func(t *testing.T) []byte {
		r := decodeRaw(t, envA)
		p := mustB64(t, r.Payload)
		p[len(p)/2] ^= 0x01
		r.Payload = base64.StdEncoding.EncodeToString(p)
		return r.bytes(t)
	}
	flipSig := func(t *testing.T) []byte {
		r := decodeRaw(t, envA)
		s := mustB64(t, r.Signatures[0].Sig)
		s[len(s)-1] ^= 0x01
		r.Signatures[0].Sig = base64.StdEncoding.EncodeToString(s)
		return r.bytes(t)
	}
	changeType := func(t *testing.T) []byte {
		r := decodeRaw(t, envA)
		r.PayloadType = "application/json"
		return r.bytes(t)
	}
	changeTypeInToto := func(t *testing.T) []byte {
		// Another spelling in-toto allows is still not what was signed: the signature
		// covers payloadType, so this must fail there.
		r := decodeRaw(t, envA)
		r.PayloadType = "application/vnd.in-toto.provenance+json"
		return r.bytes(t)
	}
	swapSubject := func(t *testing.T) []byte {
		// An attacker rewrites the subject to B's digest and keeps A's signature.
		r := decodeRaw(t, envA)
		p := string(mustB64(t, r.Payload))
		hexA, hexB := strings.TrimPrefix(digestA, "sha256:"), strings.TrimPrefix(digestB, "sha256:")
		if !strings.Contains(p, hexA) {
			t.Fatal("payload does not contain A's digest")
		}
		r.Payload = base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(p, hexA, hexB)))
		return r.bytes(t)
	}
	otherKey := func(t *testing.T) []byte { return mint(t, other, testExecution(digestA)) }
	truncated := func(t *testing.T) []byte { return envA[:len(envA)/2] }
	addKeyID := func(t *testing.T) []byte {
		// keyid is unauthenticated: claiming to be signed by another key changes nothing.
		r := decodeRaw(t, envA)
		r.Signatures[0].KeyID = other.signer.KeyID()
		return r.bytes(t)
	}
	unsignedCopy := func(t *testing.T) []byte {
		r := decodeRaw(t, envA)
		r.Signatures = nil
		return r.bytes(t)
	}

	cases := []struct {
		name     string
		envelope func(*testing.T) []byte
		artifact string
		code     string
	}{
		{"flipped payload byte", flipPayload, digestA, CodeSignature},
		{"flipped signature byte", flipSig, digestA, CodeSignature},
		{"changed payloadType", changeType, digestA, CodePayloadType},
		{"payloadType changed to another in-toto type", changeTypeInToto, digestA, CodePayloadType},
		{"subject swapped for B's digest, presented for B", swapSubject, digestB, CodeSignature},
		{"subject swapped for B's digest, presented for A", swapSubject, digestA, CodeSignature},
		{"signed by a different key", otherKey, digestA, CodeSignature},
		{"valid attestation for A presented for B", func(*testing.T) []byte { return envA }, digestB, CodeSubject},
		{"garbage", func(*testing.T) []byte { return []byte("\x00\x01not an envelope") }, digestA, dsse.CodeNotJSON},
		{"garbage JSON", func(*testing.T) []byte { return []byte(`{"hello": "world"}`) }, digestA, dsse.CodeMalformed},
		{"empty", func(*testing.T) []byte { return nil }, digestA, dsse.CodeEmpty},
		{"whitespace", func(*testing.T) []byte { return []byte(" \n\t") }, digestA, dsse.CodeEmpty},
		{"truncated", truncated, digestA, dsse.CodeTruncated},
		{"no signatures", unsignedCopy, digestA, dsse.CodeMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := c.envelope(t)
			rep := verifyOne(t, kp.keys, env, c.artifact, Policy{})
			if rep.OK {
				t.Fatal("verified a tampered attestation")
			}
			if got := firstRefusal(rep); got != c.code {
				var b strings.Builder
				rep.WriteText(&b)
				t.Fatalf("refused with %q, want %q\n%s", got, c.code, b.String())
			}
			// The artifact-level verdict names the missing type and carries the reason.
			last := rep.Artifacts[0].Checks[len(rep.Artifacts[0].Checks)-1]
			if last.OK || last.Code != CodeTypeMissing || !strings.Contains(last.Detail, c.code) {
				t.Errorf("artifact check %+v does not carry reason %s", last, c.code)
			}
		})
	}

	t.Run("keyid naming another key is ignored", func(t *testing.T) {
		if rep := verifyOne(t, kp.keys, addKeyID(t), digestA, Policy{}); !rep.OK {
			t.Fatal("a keyid hint changed the outcome")
		}
	})
	t.Run("B verifies for B", func(t *testing.T) {
		if rep := verifyOne(t, kp.keys, envB, digestB, Policy{}); !rep.OK {
			t.Fatal("B's own attestation did not verify")
		}
	})
}

// TestBase64Variants checks that standard and URL-safe base64, padded or not, all verify,
// as DSSE requires.
func TestBase64Variants(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	digest := sha("artifact")
	// Keep minting until both payload and signature contain characters that differ between
	// the alphabets, so the test exercises the difference and not just the padding.
	var env []byte
	for i := 0; ; i++ {
		e := testExecution(digest)
		// Base64 of ASCII has '+' or '/' only where a 3-byte group ends in '>', '?' or '~',
		// so put three of them in a row into the payload.
		e.InvocationID = e.InvocationID + strings.Repeat("x", i) + "?~>?~>"
		env = mint(t, kp, e)
		r := decodeRaw(t, env)
		if strings.Count(r.Payload, "+")+strings.Count(r.Payload, "/") >= 2 && strings.ContainsAny(r.Signatures[0].Sig, "+/") {
			break
		}
		if i > 200 {
			t.Fatal("could not produce base64 with + or /")
		}
	}
	r := decodeRaw(t, env)
	p, s := mustB64(t, r.Payload), mustB64(t, r.Signatures[0].Sig)
	for name, enc := range map[string]*base64.Encoding{
		"standard": base64.StdEncoding, "url-safe": base64.URLEncoding,
		"standard unpadded": base64.RawStdEncoding, "url-safe unpadded": base64.RawURLEncoding,
	} {
		t.Run(name, func(t *testing.T) {
			v := r
			v.Payload = enc.EncodeToString(p)
			v.Signatures = []rawSig{{Sig: enc.EncodeToString(s)}}
			if rep := verifyOne(t, kp.keys, v.bytes(t), digest, Policy{}); !rep.OK {
				var b strings.Builder
				rep.WriteText(&b)
				t.Fatalf("%s base64 did not verify:\n%s", name, b.String())
			}
		})
	}
	t.Run("mixed alphabets in one string", func(t *testing.T) {
		std := base64.StdEncoding.EncodeToString(p)
		if strings.Count(std, "+")+strings.Count(std, "/") < 2 {
			t.Fatal("payload base64 needs two of + and / to mix alphabets")
		}
		// One character in the URL-safe alphabet, the others standard: neither decoder
		// accepts it, and it must not be accepted by trying both.
		i := strings.IndexAny(std, "+/")
		v := r
		v.Payload = std[:i] + map[byte]string{'+': "-", '/': "_"}[std[i]] + std[i+1:]
		rep := verifyOne(t, kp.keys, v.bytes(t), digest, Policy{})
		if rep.OK || firstRefusal(rep) != dsse.CodeBase64 {
			t.Fatalf("mixed alphabets: ok=%v code=%s", rep.OK, firstRefusal(rep))
		}
	})
}

func TestRequiredTypeCountsOnlyVerifiedStatements(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	other := newKeyPair(t, KeyECDSAP256)
	digest := sha("artifact")
	good := mint(t, kp, testExecution(digest))
	forged := mint(t, other, testExecution(digest))

	// A type nobody attested: refused even though a valid provenance exists (the
	// cosign CVE-2022-35929 fail-open).
	rep := verifyOne(t, kp.keys, good, digest, Policy{PredicateTypes: []string{"https://example.com/sbom/v1"}})
	if rep.OK {
		t.Fatal("required type met by a statement of another type")
	}
	// The right type, but only in an envelope signed by an untrusted key.
	rep, err := Verify(context.Background(), Options{Keys: kp.keys,
		Attestations: []Attestation{{Source: "forged", Envelope: forged}}},
		Subject{Name: "a", Digest: digest})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK {
		t.Fatal("required type met by an unverified statement")
	}
	// A refused candidate next to a good one does not spoil it (monotonic policy).
	rep, _ = Verify(context.Background(), Options{Keys: kp.keys,
		Attestations: []Attestation{{Source: "forged", Envelope: forged}, {Source: "good", Envelope: good}}},
		Subject{Name: "a", Digest: digest})
	if !rep.OK {
		t.Fatal("a good attestation beside a forged one did not verify")
	}
}

func TestBuilderAllowlist(t *testing.T) {
	kp := newKeyPair(t, KeyEd25519)
	digest := sha("artifact")
	e := testExecution(digest)
	e.Executor, e.Isolation = "local", IsolationNone
	env := mint(t, kp, e)
	rep := verifyOne(t, kp.keys, env, digest, Policy{})
	if rep.OK || firstRefusal(rep) != CodeBuilder {
		t.Fatalf("unsandboxed build accepted by default: ok=%v code=%s", rep.OK, firstRefusal(rep))
	}
	local, _ := BuilderID("local", IsolationNone)
	if rep := verifyOne(t, kp.keys, env, digest, Policy{Builders: []string{local}}); !rep.OK {
		t.Fatal("explicitly allowed builder refused")
	}
	containerd, _ := BuilderID("containerd", IsolationContainer)
	good := mint(t, kp, testExecution(digest))
	if rep := verifyOne(t, kp.keys, good, digest, Policy{Builders: []string{local}}); rep.OK || firstRefusal(rep) != CodeBuilder {
		t.Fatalf("builder %s accepted with allowlist [%s]", containerd, local)
	}
}

// TestSignerBuilderPairs: with signers in the policy, a key vouches only for its builders.
func TestSignerBuilderPairs(t *testing.T) {
	ci := newKeyPair(t, KeyECDSAP256)
	dev := newKeyPair(t, KeyEd25519)
	keys := append(append([]*Verifier{}, ci.keys...), dev.keys...)
	digest := sha("artifact")
	containerd, _ := BuilderID("containerd", IsolationContainer)
	local, _ := BuilderID("local", IsolationNone)
	pol := Policy{
		Builders: []string{containerd, local},
		Signers: []SignerRule{
			{KeyID: ci.signer.KeyID(), Builders: []string{containerd}},
			{KeyID: dev.signer.KeyID(), Builders: []string{local}},
		},
	}
	localExec := testExecution(digest)
	localExec.Executor, localExec.Isolation = "local", IsolationNone

	for _, c := range []struct {
		name string
		kp   keyPair
		e    *Execution
		ok   bool
	}{
		{"ci key, containerd", ci, testExecution(digest), true},
		{"dev key, local", dev, localExec, true},
		{"dev key claims containerd", dev, testExecution(digest), false},
		{"ci key, local", ci, localExec, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := verifyOne(t, keys, mint(t, c.kp, c.e), digest, pol)
			if rep.OK != c.ok {
				t.Fatalf("ok=%v, want %v (refusal %s)", rep.OK, c.ok, firstRefusal(rep))
			}
			if !c.ok && firstRefusal(rep) != CodeSignerBuilder {
				t.Fatalf("refused with %s, want %s", firstRefusal(rep), CodeSignerBuilder)
			}
		})
	}
}

// TestDependencies builds a chain lib → app where app's input /lib is lib's output, stores
// both envelopes in a directory and checks that Verify follows the dependency.
func TestDependencies(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	other := newKeyPair(t, KeyECDSAP256)
	libDigest, appDigest := sha("lib.a"), sha("app")
	libExec := testExecution(libDigest)
	libExec.ActionDigest = sha("lib-action")
	appExec := testExecution(appDigest)
	appExec.Inputs = append(appExec.Inputs, Dependency{Name: "/lib/lib.a", Digest: libDigest, Producer: libExec.ActionDigest})

	write := func(dir, name string, env []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), env, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	verifyDir := func(dir string, pol Policy) *Report {
		src, err := NewDirSource(dir)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(context.Background(), Options{Keys: kp.keys, Source: src, Policy: pol}, Subject{Name: "app", Digest: appDigest})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	t.Run("chain verifies", func(t *testing.T) {
		dir := t.TempDir()
		write(dir, "app.json", mint(t, kp, appExec))
		write(dir, "lib.json", mint(t, kp, libExec))
		write(dir, "junk.txt", []byte("not an envelope"))
		rep := verifyDir(dir, Policy{})
		if !rep.OK {
			var b strings.Builder
			rep.WriteText(&b)
			t.Fatalf("chain not verified:\n%s", b.String())
		}
		deps := rep.Artifacts[0].Attestations[0].Dependencies
		if len(deps) != 1 || !deps[0].OK || deps[0].Digest != libDigest {
			t.Fatalf("dependency not followed: %+v", deps)
		}
	})
	t.Run("explicit envelopes only, routed by subject", func(t *testing.T) {
		libEnv := mint(t, kp, libExec)
		appEnv := mint(t, kp, appExec)
		rep, err := Verify(context.Background(), Options{Keys: kp.keys, Attestations: []Attestation{
			{Source: "app.json", Envelope: appEnv}, {Source: "lib.json", Envelope: libEnv},
		}}, Subject{Name: "app", Digest: appDigest}, Subject{Name: "lib", Digest: libDigest})
		if err != nil || !rep.OK {
			t.Fatalf("not verified: %v", err)
		}
		for _, a := range rep.Artifacts {
			if len(a.Attestations) != 1 {
				t.Errorf("%s: %d candidates tried, want only the one that claims it", a.Name, len(a.Attestations))
			}
		}
		if deps := rep.Artifacts[0].Attestations[0].Dependencies; len(deps) != 1 || len(deps[0].Attestations) != 1 {
			t.Errorf("dependency not routed to lib.json alone: %+v", deps)
		}
	})
	t.Run("missing dependency provenance", func(t *testing.T) {
		dir := t.TempDir()
		write(dir, "app.json", mint(t, kp, appExec))
		rep := verifyDir(dir, Policy{})
		if rep.OK || firstRefusal(rep) != CodeDependency {
			t.Fatalf("ok=%v code=%s, want %s", rep.OK, firstRefusal(rep), CodeDependency)
		}
		if rep := verifyDir(dir, Policy{SkipDependencies: true}); !rep.OK {
			t.Fatal("SkipDependencies did not skip")
		}
	})
	t.Run("dependency signed by an untrusted key", func(t *testing.T) {
		dir := t.TempDir()
		write(dir, "app.json", mint(t, kp, appExec))
		write(dir, "lib.json", mint(t, other, libExec))
		if rep := verifyDir(dir, Policy{}); rep.OK || firstRefusal(rep) != CodeDependency {
			t.Fatalf("ok=%v code=%s, want %s", rep.OK, firstRefusal(rep), CodeDependency)
		}
	})
	t.Run("depth limit", func(t *testing.T) {
		// base → lib → app: two levels of dependencies.
		baseDigest := sha("base.a")
		baseExec := testExecution(baseDigest)
		baseExec.ActionDigest = sha("base-action")
		lib := *libExec
		lib.Inputs = append(slices.Clone(lib.Inputs), Dependency{Name: "/base.a", Digest: baseDigest, Producer: baseExec.ActionDigest})
		dir := t.TempDir()
		write(dir, "app.json", mint(t, kp, appExec))
		write(dir, "lib.json", mint(t, kp, &lib))
		write(dir, "base.json", mint(t, kp, baseExec))
		if rep := verifyDir(dir, Policy{}); !rep.OK {
			t.Fatal("two-level chain refused at default depth")
		}
		rep := verifyDir(dir, Policy{MaxDepth: 1})
		if rep.OK {
			t.Fatal("two-level chain accepted with MaxDepth 1")
		}
		var b strings.Builder
		rep.WriteText(&b)
		if !strings.Contains(b.String(), CodeDependencyDepth) {
			t.Fatalf("no %s in report:\n%s", CodeDependencyDepth, b.String())
		}
	})
}

func TestWriteEnvelope(t *testing.T) {
	kp := newKeyPair(t, KeyEd25519)
	digest := sha("artifact")
	env := mint(t, kp, testExecution(digest))
	dir := filepath.Join(t.TempDir(), "attestations")
	p, err := WriteEnvelope(dir, env)
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha256-" + strings.TrimPrefix(EnvelopeDigest(env), "sha256:") + ".intoto.json"; filepath.Base(p) != want {
		t.Errorf("stored as %s, want %s", filepath.Base(p), want)
	}
	if b, _ := os.ReadFile(p); string(b) != string(env) {
		t.Fatal("stored bytes differ from the signed envelope")
	}
	if p2, err := WriteEnvelope(dir, env); err != nil || p2 != p {
		t.Fatalf("second write: %s, %v", p2, err)
	}
	if _, err := WriteEnvelope(dir, []byte("garbage")); err == nil {
		t.Fatal("stored garbage")
	}
	src, err := NewDirSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(context.Background(), Options{Keys: kp.keys, Source: src}, Subject{Name: "a", Digest: digest})
	if err != nil || !rep.OK {
		t.Fatalf("stored envelope does not verify through DirSource: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the directory, want 1 (no temporaries left)", len(entries))
	}
}

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "policy.json")
	os.WriteFile(p, []byte(`{"builders":["https://foundry.dev/builder/runc@v1?isolation=container"],"predicateTypes":["https://slsa.dev/provenance/v1"]}`), 0o644)
	pol, err := LoadPolicy(p)
	if err != nil || len(pol.Builders) != 1 || len(pol.PredicateTypes) != 1 {
		t.Fatalf("LoadPolicy = %+v, %v", pol, err)
	}
	for name, body := range map[string]string{
		"misspelt key":       `{"builder":["x"]}`,
		"trailing data":      `{} {}`,
		"empty builder":      `{"builders":[""]}`,
		"negative depth":     `{"maxDepth":-1}`,
		"signer key id":      `{"signers":[{"keyId":"foundry.pub","builders":["x"]}]}`,
		"signer no builders": `{"signers":[{"keyId":"sha256:` + strings.Repeat("0", 64) + `"}]}`,
		"not json":           `builders = x`,
	} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := LoadPolicy(p); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
	}
}

func TestReportRendering(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	digest := sha("artifact")
	rep := verifyOne(t, kp.keys, mint(t, kp, testExecution(sha("other"))), digest, Policy{})
	var text, js strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NOT VERIFIED", "FAIL subject [subject-mismatch]", "PASS signature", digest} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil || back.OK || back.Artifacts[0].Digest != digest {
		t.Fatalf("JSON report does not round-trip: %v\n%s", err, js.String())
	}
}

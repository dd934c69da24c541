package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
)

// findCosign returns the cosign binary: $COSIGN, then PATH, then where scripts/cosign.sh
// installs it. With CI=true a missing cosign fails the test: CI must run scripts/cosign.sh,
// and a silently skipped interop test would prove nothing.
func findCosign(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("COSIGN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("cosign"); err == nil {
		return p
	}
	gobin := os.Getenv("GOBIN")
	if gobin == "" {
		gobin = filepath.Join(build.Default.GOPATH, "bin")
	}
	if p := filepath.Join(gobin, "cosign"); fileExists(p) {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("cosign not found (CI=true): run scripts/cosign.sh before the tests")
	}
	t.Skip("cosign not installed: run scripts/cosign.sh to install the pinned version (v3.1.3)")
	return ""
}

// TestCosignVerifiesFoundryAttestation checks interop with the tool auditors already have:
// cosign verify-blob-attestation accepts a Foundry envelope with the public key from
// foundry keygen, and refuses the same tampering foundry verify refuses.
func TestCosignVerifiesFoundryAttestation(t *testing.T) {
	cosign := findCosign(t)
	for _, keyType := range []string{provenance.KeyECDSAP256, provenance.KeyEd25519} {
		t.Run(keyType, func(t *testing.T) {
			dir := t.TempDir()
			if code, _, errOut := runCLI(t, "keygen", "-type", keyType, "-out", filepath.Join(dir, "foundry")); code != exitOK {
				t.Fatalf("keygen: %s", errOut)
			}
			pub := filepath.Join(dir, "foundry.pub")
			signer, err := provenance.LoadSigner(filepath.Join(dir, "foundry.key"))
			if err != nil {
				t.Fatal(err)
			}
			f := &verifyFixture{dir: dir, pub: pub, signer: signer}
			blob := f.write(t, "int-sort", []byte("#!/bin/sh\nsort -n\n"))
			d, _, err := digest.File(blob)
			if err != nil {
				t.Fatal(err)
			}
			env := f.attest(t, "int-sort", string(d), "containerd", provenance.IsolationContainer)
			envPath := f.write(t, "int-sort.intoto.json", env)

			if code, out, errOut := runCLI(t, "verify", "-key", pub, "-attestation", envPath, blob); code != exitOK {
				t.Fatalf("foundry verify: exit %d\n%s%s", code, out, errOut)
			}
			cosignVerify := func(envelope, artifact string) (bool, string) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, cosign, "verify-blob-attestation",
					"--key", pub, "--signature", envelope,
					"--type", provenance.PredicateSLSAProvenance,
					"--insecure-ignore-tlog", artifact)
				// cosign v3 marks --signature deprecated in favour of --bundle (a sigstore
				// bundle); it still verifies a bare DSSE envelope, which is what auditors get.
				// A private HOME: cosign must not read or write the developer's config, and
				// must not need the network for a key-based, tlog-free verification.
				cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
				out, err := cmd.CombinedOutput()
				return err == nil, string(out)
			}
			if ok, out := cosignVerify(envPath, blob); !ok || !strings.Contains(out, "Verified OK") {
				t.Fatalf("cosign refused a Foundry attestation:\n%s", out)
			}

			// Tampering that foundry verify refuses, cosign refuses too.
			other := f.write(t, "other", []byte("not int-sort"))
			// The reasons are checked too, so that a cosign failing for an unrelated cause
			// (network, flags) cannot pass for a refusal.
			if ok, out := cosignVerify(envPath, other); ok || !strings.Contains(out, "no matching subject digest") {
				t.Errorf("cosign did not refuse int-sort's attestation for another blob for its subject:\n%s", out)
			}
			var m map[string]any
			if err := json.Unmarshal(env, &m); err != nil {
				t.Fatal(err)
			}
			p, _ := base64.StdEncoding.DecodeString(m["payload"].(string))
			tampered := strings.Replace(string(p), "containerd@v1", "containerd@v2", 1)
			m["payload"] = base64.StdEncoding.EncodeToString([]byte(tampered))
			tb, _ := json.Marshal(m)
			tamperedPath := f.write(t, "tampered.json", tb)
			if ok, out := cosignVerify(tamperedPath, blob); ok || !strings.Contains(out, "accepted signatures do not match threshold") {
				t.Errorf("cosign did not refuse a tampered payload for its signature:\n%s", out)
			}
			if code, _, _ := runCLI(t, "verify", "-key", pub, "-attestation", tamperedPath, blob); code != exitError {
				t.Errorf("foundry verify accepted a tampered payload: exit %d", code)
			}
		})
	}
}

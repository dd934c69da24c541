package registry

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
)

// remoteKinds are the registries interop tests run against (external tools need a server).
var remoteKinds = []struct {
	name  string
	start func(t testing.TB) string // returns host:port/repo
}{
	{"distribution-tag-fallback", func(t testing.TB) string { return startDistribution(t) + "/foundry/caps" }},
	{"ggcr-referrers-api", func(t testing.TB) string { return startGGCR(t) + "/foundry/caps" }},
	{"foundry-serve", func(t testing.TB) string { a, _ := startServe(t); return a + "/foundry" }},
}

func findCrane(t testing.TB) string {
	return requireTool(t, []string{"crane", goBin("crane")}, "run scripts/crane.sh to install crane v0.22.1")
}

func findCosign(t testing.TB) string {
	return requireTool(t, []string{"cosign", goBin("cosign")}, "run scripts/cosign.sh to install cosign v3.1.3")
}

func run(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "SIGSTORE_NO_CACHE=1", "TUF_ROOT="+t.TempDir())
	err := cmd.Run()
	return out.String(), err
}

// TestCranePullsCapability: an ordinary OCI client fetches a published capability by digest
// and gets the exact manifest and layer bytes.
func TestCranePullsCapability(t *testing.T) {
	crane := findCrane(t)
	for _, k := range remoteKinds {
		t.Run(k.name, func(t *testing.T) {
			addr := k.start(t)
			s, err := Open(addr)
			must(t, err)
			f := newFixture(t)
			md, err := Publish(bg, s, f.src, f.capability("stable"))
			must(t, err)
			ref := addr + "@" + string(md)
			out, err := run(t, crane, "manifest", "--insecure", ref)
			if err != nil {
				t.Fatalf("crane manifest: %v\n%s", err, out)
			}
			if digest.FromBytes([]byte(out)) != md {
				t.Fatalf("crane manifest returned other bytes: %s", out)
			}
			m, err := ParseCapability([]byte(out))
			must(t, err)
			dir := filepath.Join(t.TempDir(), "oci")
			if out, err := run(t, crane, "pull", "--insecure", "--format=oci", ref, dir); err != nil {
				t.Fatalf("crane pull: %v\n%s", err, out)
			}
			layer, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", m.Layers[0].Digest.Hex()))
			if err != nil || digest.FromBytes(layer) != m.Layers[0].Digest {
				t.Fatalf("crane pull: layer blob missing or different: %v", err)
			}
			// crane's copy is an OCI layout: Foundry pulls from it like from any store.
			cs, err := Open(LayoutScheme + dir)
			must(t, err)
			if _, err := Pull(bg, cs, string(md), filepath.Join(t.TempDir(), "out"), PullOptions{NoVerify: true}); err != nil {
				t.Fatalf("pull from crane's layout: %v", err)
			}
		})
	}
}

// TestCosignVerifiesAttachedAttestation: an auditor's cosign finds and verifies the
// attestation Foundry attached, with the public key from foundry keygen, offline. cosign
// v3.1.3 reads attestations two ways: the default (--new-bundle-format=true) lists OCI
// referrers and accepts only Sigstore bundles, and falls back to the legacy way when it
// finds none (cmd/cosign/cli/verify/verify_attestation.go); --new-bundle-format=false reads
// the "sha256-<hex>.att" image, whose layers are raw DSSE envelopes. Foundry keeps
// envelopes as their exact signed bytes, so it writes the second (spec/artifact.md).
func TestCosignVerifiesAttachedAttestation(t *testing.T) {
	cosign := findCosign(t)
	for _, k := range remoteKinds {
		t.Run(k.name, func(t *testing.T) {
			addr := k.start(t)
			s, err := Open(addr)
			must(t, err)
			f := newFixture(t)
			md, err := Publish(bg, s, f.src, f.capability("stable"))
			must(t, err)
			if _, err := Attach(bg, s, md, f.attest(t, "capability", md), ""); err != nil {
				t.Fatal(err)
			}
			ref := addr + "@" + string(md)
			// The auditor's command as written, then with the legacy format asked for
			// explicitly (what cosign falls back to when it finds no Sigstore bundle).
			for _, extra := range [][]string{nil, {"--new-bundle-format=false"}} {
				args := []string{"verify-attestation", "--key", f.pubPath, "--type", "https://slsa.dev/provenance/v1",
					"--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry"}
				args = append(append(args, extra...), ref)
				if out, err := run(t, cosign, args...); err != nil {
					t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			args := []string{"verify-attestation", "--key", f.pubPath, "--type", "https://slsa.dev/provenance/v1",
				"--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry", ref}
			// The wrong key is refused.
			other := newFixture(t)
			args[2] = other.pubPath
			if out, err := run(t, cosign, args...); err == nil {
				t.Fatalf("cosign verified with a key that signed nothing:\n%s", out)
			}
			// A type nobody attested is refused (cosign CVE-2022-35929 is fixed in v3).
			args[2], args[4] = f.pubPath, "https://slsa.dev/verification_summary/v1"
			if out, err := run(t, cosign, args...); err == nil {
				t.Fatalf("cosign verified a predicate type that was never attested:\n%s", out)
			}
		})
	}
}

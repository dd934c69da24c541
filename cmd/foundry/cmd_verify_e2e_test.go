package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
)

// TestKeygenVerifyBinary drives the real foundry binary: keygen, then verify of a good and
// a tampered attestation, checking exit codes and streams as a shell script would see them.
func TestKeygenVerifyBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the foundry binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "foundry")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	foundry := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, out.String(), errb.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), out.String(), errb.String()
		default:
			t.Fatal(err)
			return -1, "", ""
		}
	}

	if code, _, errOut := foundry("keygen"); code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	if code, _, errOut := foundry("keygen"); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("second keygen: exit %d: %s", code, errOut)
	}
	signer, err := provenance.LoadSigner(filepath.Join(dir, "foundry.key"))
	if err != nil {
		t.Fatal(err)
	}
	f := &verifyFixture{dir: dir, pub: filepath.Join(dir, "foundry.pub"), signer: signer}
	artifact := f.write(t, "out/tool", []byte("tool"))
	d, _, err := digest.File(artifact)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provenance.WriteEnvelope(filepath.Join(dir, "attestations"), f.attest(t, "tool", string(d), "runc", provenance.IsolationContainer)); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := foundry("verify", "-key", "foundry.pub", "-attestations", "attestations", "out/tool")
	if code != 0 || !strings.HasPrefix(out, "VERIFIED") || errOut != "" {
		t.Fatalf("verify: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	os.WriteFile(artifact, []byte("tool, patched"), 0o755)
	code, out, _ = foundry("verify", "-key", "foundry.pub", "-attestations", "attestations", "-json", "out/tool")
	if code != 1 || !strings.Contains(out, `"ok": false`) || !strings.Contains(out, `"code": "no-attestation"`) {
		t.Fatalf("patched artifact: exit %d\n%s", code, out)
	}
	if code, _, errOut := foundry("verify", "out/tool"); code != 2 || !strings.Contains(errOut, "-key") {
		t.Fatalf("no key: exit %d: %s", code, errOut)
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/provenance"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "ci")
	code, out, errOut := runCLI(t, "keygen", "-out", prefix)
	if code != exitOK {
		t.Fatalf("keygen: exit %d\n%s%s", code, out, errOut)
	}
	fi, err := os.Stat(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %04o, want 0600", fi.Mode().Perm())
	}
	pub, err := os.ReadFile(prefix + ".pub")
	if err != nil || !strings.HasPrefix(string(pub), "-----BEGIN PUBLIC KEY-----") {
		t.Fatalf("public key is not PKIX PEM: %v\n%s", err, pub)
	}
	priv, _ := os.ReadFile(prefix + ".key")
	if !strings.HasPrefix(string(priv), "-----BEGIN PRIVATE KEY-----") {
		t.Fatalf("private key is not PKCS#8 PEM:\n%s", priv)
	}
	s, err := provenance.LoadSigner(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, s.KeyID()) {
		t.Errorf("output does not name the key id %s:\n%s", s.KeyID(), out)
	}

	// Never overwrite a key by accident.
	code, _, errOut = runCLI(t, "keygen", "-out", prefix)
	if code != exitError || !strings.Contains(errOut, "-force") {
		t.Fatalf("second keygen: exit %d, stderr %q; want exit 1 and a hint about -force", code, errOut)
	}
	if again, _ := os.ReadFile(prefix + ".key"); string(again) != string(priv) {
		t.Fatal("refused keygen still changed the private key")
	}

	// -force replaces both, and -json reports them.
	code, out, errOut = runCLI(t, "keygen", "-out", prefix, "-type", "ed25519", "-force", "-json")
	if code != exitOK {
		t.Fatalf("keygen -force: exit %d: %s", code, errOut)
	}
	var res map[string]string
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out)
	}
	if res["type"] != "ed25519" || res["publicKey"] != prefix+".pub" || !strings.HasPrefix(res["keyId"], "sha256:") {
		t.Errorf("-json output %v", res)
	}
	if again, _ := os.ReadFile(prefix + ".key"); string(again) == string(priv) {
		t.Fatal("-force did not replace the key")
	}
	if fi, _ := os.Stat(prefix + ".key"); fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced private key mode %04o, want 0600", fi.Mode().Perm())
	}
	if _, err := provenance.LoadVerifiers(prefix + ".pub"); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"keygen", "-type", "rsa"}, {"keygen", "extra"}, {"keygen", "-out", ""}} {
		if code, _, _ := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

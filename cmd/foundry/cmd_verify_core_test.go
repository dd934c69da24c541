package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// verifyArtifacts, the core of `foundry verify`, without the CLI: what it needs before it
// reads anything is a usage error (exit 2), and a key file that is not a key a failure (1).
func TestVerifyArtifactsCore(t *testing.T) {
	dir := t.TempDir()
	art := filepath.Join(dir, "artifact")
	notKey := filepath.Join(dir, "key.pem")
	os.WriteFile(art, []byte("bytes"), 0o644)
	os.WriteFile(notKey, []byte("not a key"), 0o644)
	for _, tc := range []struct {
		opt       verifyOptions
		artifacts []string
		code      int
		stderr    string
	}{
		{verifyOptions{}, []string{art}, exitUsage, "no -key"},
		{verifyOptions{Keys: []string{notKey}}, nil, exitUsage, "no ARTIFACT to verify"},
		{verifyOptions{Keys: []string{notKey}}, []string{art}, exitUsage, "no attestations"},
		{verifyOptions{Keys: []string{notKey}, Dir: dir}, []string{art}, exitError, "foundry verify: "},
	} {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: os.Getenv}
		if code := verifyArtifacts(env, tc.opt, tc.artifacts); code != tc.code || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("%+v %q: exit %d, stderr %q; want %d and %q", tc.opt, tc.artifacts, code, errb.String(), tc.code, tc.stderr)
		}
	}
}

// pullCapability, the core of `foundry pull`, without the CLI: its flag checks are usage
// errors, and a reference to a registry that is not there a failure that writes nothing.
func TestPullCapabilityCore(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "dest")
	for _, tc := range []struct {
		opt    pullOptions
		code   int
		stderr string
	}{
		{pullOptions{Project: dir}, exitUsage, "no -o DIR"},
		{pullOptions{Project: dir, Out: dest, NoVerify: true, Keys: []string{"k.pem"}}, exitUsage, "-no-verify together with -key"},
		{pullOptions{Project: dir, Out: dest}, exitUsage, "no -key"},
		{pullOptions{Project: dir, Out: dest, NoVerify: true}, exitError, "foundry pull: "},
	} {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: os.Getenv}
		if code := pullCapability(env, tc.opt, "oci-layout:"+filepath.Join(dir, "no-such-layout")+":v1"); code != tc.code || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("%+v: exit %d, stderr %q; want %d and %q", tc.opt, code, errb.String(), tc.code, tc.stderr)
		}
		if _, err := os.Stat(dest); err == nil {
			t.Fatalf("%+v: %s was written", tc.opt, dest)
		}
	}
}

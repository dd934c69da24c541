package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/deliver"
)

// Releases signed with a key of the operator's (-signing-key), not the project's, are rolled
// back only when that key is trusted with -trust-key, as foundry verify takes -key: without
// it the rollback is refused and nothing changes.
func TestReleaseRollbackTrustKey(t *testing.T) {
	needSandbox(t)
	dest := filepath.Join(t.TempDir(), "releases")
	dir := deliverFixture(t, "dir:"+dest, true)
	keys := t.TempDir()
	if code, out, errs := foundry(t, keys, "keygen", "-out", filepath.Join(keys, "release")); code != 0 {
		t.Fatalf("keygen: exit %d\n%s%s", code, out, errs)
	}
	signing, pub := filepath.Join(keys, "release.key"), filepath.Join(keys, "release.pub")
	if r := apply(t, dir, nil, "-signing-key", signing); r.code != 0 {
		t.Fatalf("apply 1: exit %d\n%s", r.code, r.stderr)
	}
	hex1 := releases(t, dest)[0]
	main := filepath.Join(dir, "main.hcl")
	b, _ := os.ReadFile(main)
	os.WriteFile(main, []byte(strings.Replace(string(b), "echo 'echo serving'", "echo 'echo serving v2'", 1)), 0o644)
	if r := apply(t, dir, nil, "-signing-key", signing); r.code != 0 || len(releases(t, dest)) != 2 {
		t.Fatalf("apply 2: exit %d, releases %v\n%s", r.code, releases(t, dest), r.stderr)
	}
	current := filepath.Join(dest, deliver.CurrentLink)
	before, _ := os.Readlink(current)
	if before == hex1 {
		t.Fatalf("the channel did not move to release 2")
	}

	if code, out, errs := foundry(t, dir, "release", "rollback", "app"); code != 1 || !strings.Contains(errs, "nothing was changed") {
		t.Errorf("rollback of releases signed by an untrusted key: exit %d\n%s%s", code, out, errs)
	}
	if got, _ := os.Readlink(current); got != before {
		t.Fatalf("a refused rollback moved %s to %s", current, got)
	}
	code, out, errs := foundry(t, dir, "release", "rollback", "app", "-trust-key", pub)
	if code != 0 || !strings.Contains(out, "(verified)") {
		t.Fatalf("rollback with -trust-key: exit %d\n%s%s", code, out, errs)
	}
	if got, _ := os.Readlink(current); got != hex1 {
		t.Errorf("%s -> %s after the rollback, want %s", current, got, hex1)
	}
	if code, _, errs := foundry(t, dir, "release", "list", "-trust-key", pub); code != exitUsage {
		t.Errorf("list -trust-key: exit %d, want 2\n%s", code, errs)
	}
}

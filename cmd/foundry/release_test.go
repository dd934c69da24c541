package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/deliver"
)

// Release channels on disk: a product is delivered twice (two revisions, two releases);
// the second's data is corrupted by hand (stage 6 with a real defect in a real service,
// observed through its interface, is exampleScoresRollback); a rollback to a release that
// was tampered with is refused with nothing changed; `release rollback` restores the first
// release — DEST/current points at it, it verifies — and its data; an apply delivering the
// second again does not undo the rollback.
func TestReleaseRollbackRestoresEarlierReleaseAndData(t *testing.T) {
	needSandbox(t)
	dest := filepath.Join(t.TempDir(), "releases")
	dir := deliverFixture(t, "dir:"+dest, true)
	key := filepath.Join(dir, ".foundry", "keys", "signing.pub")
	current := filepath.Join(dest, deliver.CurrentLink)

	channels := func() []channelJSON {
		t.Helper()
		code, out, errs := foundry(t, dir, "release", "-json")
		var v struct{ Channels []channelJSON }
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("release -json: exit %d\n%s\n%s", code, out, errs)
		}
		return v.Channels
	}
	pointsAt := func() string {
		t.Helper()
		l, err := os.Readlink(current)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	readData := func() string {
		t.Helper()
		b, _ := os.ReadFile(filepath.Join(current, deliver.DataDir, "scores"))
		return string(b)
	}
	expectChannel := func(hex string, n int) {
		t.Helper()
		chs := channels()
		if len(chs) != 1 || chs[0].Product != "product.app" || chs[0].Release != "sha256:"+hex || len(chs[0].Releases) != n {
			t.Fatalf("want one channel at %s with %d releases, have %+v", hex, n, chs)
		}
		if got := pointsAt(); got != hex {
			t.Fatalf("%s -> %s, want %s", current, got, hex)
		}
	}

	// Release 1, and the data its service keeps in current/data.
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply 1: exit %d\n%s", r.code, r.stderr)
	}
	rels := releases(t, dest)
	if len(rels) != 1 {
		t.Fatalf("releases: %v", rels)
	}
	hex1 := rels[0]
	expectChannel(hex1, 1)
	if err := os.MkdirAll(filepath.Join(current, deliver.DataDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(current, deliver.DataDir, "scores"), []byte("alice 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Release 2: another file, so another release; it starts with release 1's data.
	main := filepath.Join(dir, "main.hcl")
	b, _ := os.ReadFile(main)
	v2 := strings.Replace(string(b), "echo 'echo serving'", "echo 'echo serving v2'", 1)
	if v2 == string(b) {
		t.Fatal("the fixture changed: no step to edit")
	}
	if err := os.WriteFile(main, []byte(v2), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply 2: exit %d\n%s", r.code, r.stderr)
	}
	var hex2 string
	for _, h := range releases(t, dest) {
		if h != hex1 {
			hex2 = h
		}
	}
	if hex2 == "" {
		t.Fatalf("the second revision made no new release: %v", releases(t, dest))
	}
	expectChannel(hex2, 2)
	if got := readData(); got != "alice 3\n" {
		t.Fatalf("release 2 did not start with release 1's data: %q", got)
	}
	// The known defect: release 2 corrupts the data it was given.
	if err := os.WriteFile(filepath.Join(current, deliver.DataDir, "scores"), []byte("\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Release 1 tampered with: the rollback is refused, nothing changes.
	app1 := filepath.Join(dest, hex1, deliver.FilesDir, "bin", "app")
	fi, err := os.Stat(app1)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(app1)
	os.Chmod(app1, 0o644)
	if err := os.WriteFile(app1, []byte("echo pwned\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := channels()
	code, out, errs := foundry(t, dir, "release", "rollback", "app")
	if code != 1 || !strings.Contains(errs, "does not verify") || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("rollback to a tampered release: exit %d\n%s\n%s", code, out, errs)
	}
	expectChannel(hex2, 2)
	if after := channels(); after[0].Moved != before[0].Moved || after[0].Reason != "delivered" {
		t.Fatalf("the refused rollback changed the channel: %+v -> %+v", before, after)
	}
	os.WriteFile(app1, good, 0o644)
	os.Chmod(app1, fi.Mode().Perm())

	// The rollback: release 1 again, verified, with its data.
	code, out, errs = foundry(t, dir, "release", "rollback", "app")
	if code != 0 || !strings.Contains(out, "Rolled product.app") {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, errs)
	}
	expectChannel(hex1, 2)
	if ch := channels()[0]; ch.Reason != "rollback from sha256:"+hex2 {
		t.Errorf("channel reason: %q", ch.Reason)
	}
	if got := readData(); got != "alice 3\n" {
		t.Fatalf("the rollback did not restore release 1's data: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(current, deliver.FilesDir, "bin", "app")); string(got) != "echo serving\n" {
		t.Fatalf("current/files is not release 1's: %q", got)
	}
	if code, out, errs := foundry(t, dir, "verify", "-key", key, current); code != 0 {
		t.Fatalf("verify of current after the rollback: exit %d\n%s\n%s", code, out, errs)
	}

	// Release 2 tampered with after its delivery: rolling forward to it is refused.
	m2 := filepath.Join(dest, hex2, deliver.ManifestFile)
	os.Chmod(m2, 0o644)
	mb, _ := os.ReadFile(m2)
	os.WriteFile(m2, []byte(strings.Replace(string(mb), `"target":"`, `"target":"x`, 1)), 0o644)
	code, out, errs = foundry(t, dir, "release", "rollback", "app", "-to", "sha256:"+hex2)
	if code != 1 || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("rollback to a tampered release 2: exit %d\n%s\n%s", code, out, errs)
	}
	expectChannel(hex1, 2)
	os.WriteFile(m2, mb, 0o444)

	// An apply that delivers release 2 again (it is at the destination) keeps the rollback.
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply 3: exit %d\n%s", r.code, r.stderr)
	}
	expectChannel(hex1, 2)

	code, out, _ = foundry(t, dir, "release")
	if code != 0 || !strings.Contains(out, "product.app at dir:"+dest+": sha256:"+hex1) || !strings.Contains(out, "* 1  sha256:"+hex1) {
		t.Errorf("release list:\n%s", out)
	}
}

// Without deliveries the list is empty; usage errors are exit 2; a rollback without state
// is refused.
func TestReleaseCommandUsage(t *testing.T) {
	dir := t.TempDir()
	if code, out, _ := foundry(t, dir, "release"); code != exitOK || !strings.Contains(out, "No release is recorded") {
		t.Errorf("release on a fresh project: exit %d\n%s", code, out)
	}
	if code, out, _ := foundry(t, dir, "release", "-json"); code != exitOK || strings.Join(strings.Fields(out), "") != `{"channels":[]}` {
		t.Errorf("release -json on a fresh project: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"release", "bogus"}, {"release", "rollback"}, {"release", "list", "-to", "x"}, {"release", "rollback", "a", "b"}} {
		if code, _, errs := foundry(t, dir, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errs)
		}
	}
	if code, _, errs := foundry(t, dir, "release", "rollback", "app"); code != exitError || !strings.Contains(errs, "no project state") {
		t.Errorf("rollback without state: exit %d\n%s", code, errs)
	}
}

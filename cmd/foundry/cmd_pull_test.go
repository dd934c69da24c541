package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
	"github.com/foundry-build/foundry/store"
)

// pullFixture is a project whose embedded registry holds one capability with its
// provenance attached.
type pullFixture struct {
	*verifyFixture
	project string
	md      digest.Digest
	tree    digest.Digest
}

func newPullFixture(t *testing.T) *pullFixture {
	t.Helper()
	f := &pullFixture{verifyFixture: newVerifyFixture(t), project: t.TempDir()}
	files := filepath.Join(t.TempDir(), "files")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(files, "bin"), 0o755))
	must(os.WriteFile(filepath.Join(files, "bin", "int-sort"), []byte("#!/bin/sh\nsort -n\n"), 0o755))
	src, err := store.Open(filepath.Join(f.project, ".foundry", "blobs"))
	must(err)
	f.tree, _, err = src.PutDir(files)
	must(err)
	s, err := registry.Open("oci-layout:" + filepath.Join(f.project, ".foundry", "registry"))
	must(err)
	f.md, err = registry.Publish(context.Background(), s, src, registry.Capability{
		Contract: []byte(`{"name":"int-sort"}`), Tree: f.tree, Name: "int-sort", Version: "1.0.0", Target: "linux/amd64", Tag: "stable"})
	must(err)
	env := f.attest(t, "int-sort", string(f.md), "runc", provenance.IsolationContainer)
	_, err = registry.Attach(context.Background(), s, f.md, env, "")
	must(err)
	return f
}

func TestPullFromProjectRegistry(t *testing.T) {
	f := newPullFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI(t, "pull", "stable", "-o", out, "-key", f.pub, "-type", provenance.PredicateSLSAProvenance, "-C", f.project)
	if code != exitOK {
		t.Fatalf("pull = %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, string(f.md)) || !strings.Contains(stdout, "verified") || !strings.Contains(stdout, "Pin it: stable@") {
		t.Fatalf("pull output:\n%s", stdout)
	}
	if _, d, err := digest.Dir(out); err != nil || d != f.tree {
		t.Fatalf("pulled tree %s, %v; want %s", d, err, f.tree)
	}

	// -json, by digest, with the full layout reference.
	out2 := filepath.Join(t.TempDir(), "out")
	ref := "oci-layout:" + filepath.Join(f.project, ".foundry", "registry") + "@" + string(f.md)
	code, stdout, stderr = runCLI(t, "pull", ref, "-o", out2, "-key", f.pub, "-type", provenance.PredicateSLSAProvenance, "-json")
	if code != exitOK {
		t.Fatalf("pull -json = %d\n%s%s", code, stdout, stderr)
	}
	var res registry.Pulled
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || !res.Verified || res.Digest != f.md || res.Tree != f.tree {
		t.Fatalf("pull -json: %v\n%s", err, stdout)
	}
}

func TestPullRefusals(t *testing.T) {
	f := newPullFixture(t)
	other := newVerifyFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no -o", []string{"pull", "stable", "-key", f.pub, "-C", f.project}, exitUsage, "no -o"},
		{"no key", []string{"pull", "stable", "-o", out, "-C", f.project}, exitUsage, "-no-verify"},
		{"both", []string{"pull", "stable", "-o", out, "-key", f.pub, "-no-verify", "-C", f.project}, exitUsage, "choose one"},
		{"two refs", []string{"pull", "a", "b", "-o", out, "-key", f.pub}, exitUsage, "exactly one REF"},
		{"no tag", []string{"pull", "127.0.0.1:1/x", "-o", out, "-key", f.pub}, exitError, "no tag or digest"},
		{"unknown tag", []string{"pull", "nope", "-o", out, "-key", f.pub, "-C", f.project}, exitError, "not found"},
		{"untrusted key", []string{"pull", "stable", "-o", out, "-key", other.pub, "-C", f.project}, exitError, "signature-invalid"},
		// The default is Foundry's admission; the message names the type that would fit an
		// artifact that has provenance only.
		{"not admitted", []string{"pull", "stable", "-o", out, "-key", f.pub, "-C", f.project}, exitError, "-type " + provenance.PredicateSLSAProvenance},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(stdout+stderr, c.want) {
				t.Fatalf("%v = %d, want %d with %q\n%s%s", c.args, code, c.code, c.want, stdout, stderr)
			}
			if _, err := os.Lstat(out); err == nil {
				t.Fatal("the destination was written")
			}
		})
	}
	// -no-verify must be explicit, and then works.
	if code, stdout, stderr := runCLI(t, "pull", "stable", "-o", out, "-no-verify", "-C", f.project); code != exitOK || !strings.Contains(stdout, "NOT VERIFIED") {
		t.Fatalf("pull -no-verify = %d\n%s%s", code, stdout, stderr)
	}
}

func TestQuarantineRefusesPull(t *testing.T) {
	f := newPullFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, stderr := runCLI(t, "quarantine", "add", string(f.md), "-C", f.project); code != exitUsage || !strings.Contains(stderr, "-reason") {
		t.Fatalf("add without -reason = %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "quarantine", "add", "sha256:XYZ", "-reason", "r", "-C", f.project); code != exitUsage {
		t.Fatalf("add with a malformed digest = %d: %s", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, "quarantine", "add", string(f.tree), "-reason", "CVE-2026-1234", "-C", f.project); code != exitOK {
		t.Fatalf("add = %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr := runCLI(t, "pull", "stable", "-o", out, "-key", f.pub, "-type", provenance.PredicateSLSAProvenance, "-C", f.project)
	if code != exitError || !strings.Contains(stderr, "quarantined: CVE-2026-1234") {
		t.Fatalf("pull of a quarantined tree = %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Lstat(out); err == nil {
		t.Fatal("a quarantined capability was written")
	}
	code, stdout, _ = runCLI(t, "quarantine", "list", "-json", "-C", f.project)
	var list []struct{ Digest, Reason string }
	if code != exitOK || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != 1 || list[0].Digest != string(f.tree) {
		t.Fatalf("list -json = %d\n%s", code, stdout)
	}
	if code, stdout, _ := runCLI(t, "quarantine", "list", "-C", f.project); code != exitOK || !strings.Contains(stdout, "CVE-2026-1234") {
		t.Fatalf("list = %d\n%s", code, stdout)
	}
	if code, stdout, stderr := runCLI(t, "quarantine", "remove", string(f.tree), "-C", f.project); code != exitOK || !strings.Contains(stdout, "lifted") {
		t.Fatalf("remove = %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runCLI(t, "pull", "stable", "-o", out, "-key", f.pub, "-type", provenance.PredicateSLSAProvenance, "-C", f.project); code != exitOK {
		t.Fatalf("pull after remove = %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "quarantine", "frobnicate"); code != exitUsage || !strings.Contains(stderr, "unknown action") {
		t.Fatalf("unknown action = %d: %s", code, stderr)
	}
}

// TestRegistryServe serves a project's embedded registry and pulls from it over HTTP.
func TestRegistryServe(t *testing.T) {
	f := newPullFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 1)
	oldCtx, oldStarted := serveContext, serveStarted
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	serveStarted = func(addr string) { started <- addr }
	defer func() { serveContext, serveStarted = oldCtx, oldStarted }()

	var wg sync.WaitGroup
	var code int
	var stdout, stderr string
	wg.Add(1)
	go func() {
		defer wg.Done()
		code, stdout, stderr = runCLI(t, "registry", "serve", "-addr", "127.0.0.1:0", "-C", f.project)
	}()
	var addr string
	select {
	case addr = <-started:
	case <-func() chan struct{} { c := make(chan struct{}); go func() { wg.Wait(); close(c) }(); return c }():
		t.Fatalf("serve exited: %d\n%s%s", code, stdout, stderr)
	}
	out := filepath.Join(t.TempDir(), "out")
	if c, o, e := runCLI(t, "pull", addr+"/foundry:stable", "-o", out, "-key", f.pub, "-type", provenance.PredicateSLSAProvenance); c != exitOK {
		t.Fatalf("pull over HTTP = %d\n%s%s", c, o, e)
	}
	cancel()
	wg.Wait()
	if code != exitOK || !strings.Contains(stdout, "serving oci-layout:") {
		t.Fatalf("serve = %d\n%s%s", code, stdout, stderr)
	}
}

func TestRegistryCommandsHelpTeaches(t *testing.T) {
	for _, cmd := range []string{"pull", "quarantine", "registry"} {
		code, stdout, _ := runCLI(t, cmd, "-help")
		if code != exitOK || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "Exit codes:") {
			t.Errorf("%s -help = %d:\n%s", cmd, code, stdout)
		}
	}
	if code, _, stderr := runCLI(t, "registry", "start"); code != exitUsage || !strings.Contains(stderr, "registry serve") {
		t.Errorf("registry start = %d: %s", code, stderr)
	}
}

// Inside a project, pull and verify trust the project's own key without -key, and say so
// (issue 29, as a new user runs them); outside one, no -key is still a usage error.
func TestPullAndVerifyDefaultToTheProjectKey(t *testing.T) {
	f := newPullFixture(t)
	keys := filepath.Join(f.project, ".foundry", "keys")
	if err := os.MkdirAll(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "signing.pub"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := foundry(t, f.project, "pull", "stable", "-o", out, "-type", provenance.PredicateSLSAProvenance)
	if code != exitOK || !strings.Contains(stderr, "trusting the project's own key "+filepath.Join(keys, "signing.pub")) {
		t.Fatalf("pull without -key in the project: exit %d\n%s\n%s", code, stdout, stderr)
	}
	ref := "oci-layout:" + filepath.Join(f.project, ".foundry", "registry") + "@" + string(f.md)
	// (The fixture's provenance names another subject than the manifest, so this verify
	// fails its subject check; what matters here is the key its signatures verified with.)
	code, stdout, stderr = foundry(t, f.project, "verify", "-type", provenance.PredicateSLSAProvenance, ref)
	if code == exitUsage || !strings.Contains(stderr, "trusting the project's own key") || !strings.Contains(stdout, "verified with "+filepath.Join(keys, "signing.pub")) {
		t.Fatalf("verify without -key in the project: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Outside a project there is no default.
	if code, _, stderr := foundry(t, t.TempDir(), "verify", ref); code != exitUsage || !strings.Contains(stderr, "no -key") {
		t.Errorf("verify without -key outside a project: exit %d\n%s", code, stderr)
	}
}

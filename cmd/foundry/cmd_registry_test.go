package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// needTool returns an external program's path; missing, it fails the test under CI=true and
// skips it otherwise.
func needTool(t *testing.T, name, hint string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	home, _ := os.UserHomeDir()
	if p := filepath.Join(home, "go", "bin", name); fileExists(p) {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found and CI=true: %s", name, hint)
	}
	t.Skipf("%s not found: %s", name, hint)
	return ""
}

// TestRegistryServeEndToEnd drives the real binary as an operator and an auditor would:
// serve the project's embedded registry, pull from it with foundry, crane and cosign, stop it.
func TestRegistryServeEndToEnd(t *testing.T) {
	crane := needTool(t, "crane", "run scripts/crane.sh")
	cosign := needTool(t, "cosign", "run scripts/cosign.sh")
	f := newPullFixture(t)

	serve := exec.Command(foundryBin, "registry", "serve", "-addr", "127.0.0.1:0", "-C", f.project)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	serve.Stderr = &stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("registry serve printed nothing: %s", stderr.String())
	}
	m := regexp.MustCompile(` as (127\.0\.0\.1:\d+)/foundry, read-write`).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("registry serve said %q", lines.Text())
	}
	repo := m[1] + "/foundry"
	ref := repo + "@" + string(f.md)

	runTool := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out)
		}
	}
	runTool(foundryBin, "pull", repo+":stable", "-o", filepath.Join(t.TempDir(), "out"), "-key", f.pub, "-type", "https://slsa.dev/provenance/v1")
	runTool(crane, "pull", "--insecure", "--format=oci", ref, filepath.Join(t.TempDir(), "copy"))
	cmd := exec.Command(cosign, "verify-attestation", "--key", f.pub, "--type", "https://slsa.dev/provenance/v1",
		"--insecure-ignore-tlog", "--allow-http-registry", ref)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign verify-attestation: %v\n%s", err, out)
	}

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for lines.Scan() {
		}
		done <- serve.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("registry serve after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("registry serve did not stop on SIGTERM")
	}
}

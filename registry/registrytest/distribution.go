// Package registrytest starts real registries for tests: Debian's docker-registry
// (distribution 2.8.2, which has no referrers API, so attachments use the tag fallback).
// It is imported only by tests.
package registrytest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// RequireTool returns the path of an external program a test needs. Missing, it fails the
// test under CI=true (CI installs it) and skips it otherwise, saying how to install it.
func RequireTool(t testing.TB, names []string, hint string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		if filepath.IsAbs(n) {
			if _, err := os.Stat(n); err == nil {
				return n
			}
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found and CI=true: %s", names[0], hint)
	}
	t.Skipf("%s not found: %s", names[0], hint)
	return ""
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartDistribution starts Debian's docker-registry with filesystem storage on a free
// loopback port, stopped when the test ends, and returns host:port.
func StartDistribution(t testing.TB) string {
	t.Helper()
	bin := RequireTool(t, []string{"/usr/bin/docker-registry", "docker-registry"}, "apt-get install docker-registry (scripts/deps.sh)")
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(dir, "data"), addr)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	logf, _ := os.Create(filepath.Join(dir, "registry.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting docker-registry: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
	t.Fatalf("docker-registry did not start on %s: %s", addr, b)
	return ""
}

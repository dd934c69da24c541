package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The MCP project's own conformance suite (@modelcontextprotocol/conformance from npm,
// installed by scripts/mcp-conformance.sh), run against the real `foundry mcp -http`. It
// tests servers over Streamable HTTP only. The scenarios below are those that apply to a
// server of tools whose names are its own; spec/mcp.md §6 lists the others and why they do
// not apply.
var conformanceScenarios = []string{
	"server-initialize", "ping", "tools-list", "logging-set-level", "resources-list",
	"prompts-list", "dns-rebinding-protection",
}

// conformanceBin is the installed suite, or skips; with CI=true a missing one fails.
func conformanceBin(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join("..", "..", ".test-tools", "mcp-conformance", "node_modules", ".bin", "conformance"))
	if _, err := os.Stat(bin); err == nil {
		if _, err := exec.LookPath("node"); err == nil {
			return bin
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the MCP conformance suite is not installed at %s: CI must install it (make test-tools runs scripts/mcp-conformance.sh)", bin)
	}
	t.Skipf("the MCP conformance suite is not installed (run scripts/mcp-conformance.sh): %s", bin)
	return ""
}

func TestMCPConformance(t *testing.T) {
	bin := conformanceBin(t)
	dir := writeMCPProject(t)
	// The suite opens a session per scenario and never closes one.
	srv := startMCPHTTP(t, dir, "-max-sessions", "64")
	for _, sc := range conformanceScenarios {
		out := t.TempDir()
		cmd := exec.Command(bin, "server", "--url", srv.url, "--scenario", sc, "-o", out)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		report, err := cmd.CombinedOutput()
		files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
		if len(files) != 1 {
			t.Errorf("%s: no checks.json (%v)\n%s", sc, err, report)
			continue
		}
		b, _ := os.ReadFile(files[0])
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		if err := json.Unmarshal(b, &checks); err != nil || len(checks) == 0 {
			t.Errorf("%s: checks %s: %v", sc, b, err)
			continue
		}
		for _, c := range checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				t.Errorf("%s: %s %s: %s", sc, c.ID, c.Status, c.ErrorMessage)
			}
		}
		if err != nil {
			t.Errorf("%s: the suite exited %v\n%s", sc, err, strings.TrimSpace(string(report)))
		}
	}
}

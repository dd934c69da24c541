package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A second host from another ecosystem: the TypeScript SDK's client (scripts/mcp-sdk.sh,
// make test-tools), driven by testdata/mcp-ts-client.cjs over stdio and over Streamable
// HTTP with a bearer token.

// tsClientModules is the installed SDK's node_modules, or skips; with CI=true a missing one
// fails.
func tsClientModules(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "..", ".test-tools", "mcp-sdk", "node_modules"))
	if _, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol", "sdk", "package.json")); err == nil {
		if _, err := exec.LookPath("node"); err == nil {
			return dir
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the MCP TypeScript SDK is not installed in %s: CI must install it (make test-tools runs scripts/mcp-sdk.sh)", dir)
	}
	t.Skipf("the MCP TypeScript SDK is not installed (run scripts/mcp-sdk.sh): %s", dir)
	return ""
}

// tsStep is what the script printed for one step.
type tsStep struct {
	Tools  json.RawMessage `json:"tools"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error string `json:"error"`
}

func (s tsStep) text() string {
	if s.Result == nil || len(s.Result.Content) == 0 {
		return ""
	}
	return s.Result.Content[0].Text
}

// runTSClient runs the script with steps against target (stdio: a command line; http: a
// URL, with token) and returns what it printed per step.
func runTSClient(t *testing.T, modules, token string, steps []map[string]any, mode string, target ...string) []tsStep {
	t.Helper()
	sj, _ := json.Marshal(steps)
	cmd := exec.Command("node", append([]string{filepath.Join("testdata", "mcp-ts-client.cjs"), string(sj), mode}, target...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "MCP_TOKEN="+token, "HOME="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("mcp-ts-client %s: %v\n%s\n%s", mode, err, out.String(), errb.String())
	}
	var res []tsStep
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil || len(res) != len(steps) {
		t.Fatalf("mcp-ts-client %s printed %q: %v", mode, out.String(), err)
	}
	return res
}

// The TypeScript SDK's client, over stdio and over HTTP, discovers the same tools (the
// capability's contract digest in its description, its schemas), gets the same result and
// the same declared error from the capability; over HTTP a call outside its token's scopes is
// refused with insufficient_scope, and a token that expires loses its authority at the next
// call.
func TestMCPTypeScriptClient(t *testing.T) {
	modules := tsClientModules(t)
	dir := appliedMCPProject(t)
	keys := t.TempDir()
	ops := keygenCLI(t, keys, "ops")
	srv := startMCPHTTP(t, dir, "-allow", "apply", "-token-issuer", "ops="+ops+".pub")
	mint := func(args ...string) string {
		return mintCLI(t, append([]string{"-key", ops + ".key", "-issuer", "ops", "-audience", srv.url}, args...)...)
	}
	steps := []map[string]any{
		{"list": true},
		{"call": "cap_echo", "args": map[string]any{"text": "from ts"}},
		{"call": "cap_echo", "args": map[string]any{"text": "boom"}},
	}
	stdio := runTSClient(t, modules, "", steps, "stdio", foundryBin, "mcp", "-C", dir, "-executor", "runc", "-allow", "apply")
	http := runTSClient(t, modules, mint("-scope", "read,call:echo"), append(steps, map[string]any{"call": "apply", "args": map[string]any{}}), "http", srv.url)
	if string(stdio[0].Tools) != string(http[0].Tools) || !strings.Contains(string(http[0].Tools), `"cap_echo"`) {
		t.Errorf("tools over stdio and HTTP differ:\n%s\n%s", stdio[0].Tools, http[0].Tools)
	}
	for i, r := range [][]tsStep{stdio, http} {
		if r[1].Error != "" || r[1].Result.IsError || r[1].text() != `{"text":"from ts"}` {
			t.Errorf("%d: cap_echo: %+v", i, r[1])
		}
		if r[2].Error != "" || !r[2].Result.IsError || !strings.Contains(r[2].text(), `"error":"invalid_input"`) {
			t.Errorf("%d: cap_echo boom: %+v", i, r[2])
		}
	}
	if stdio[2].text() != http[2].text() {
		t.Errorf("the declared error differs:\n%s\n%s", stdio[2].text(), http[2].text())
	}
	if e := http[3].Error; !strings.Contains(e, "insufficient_scope") || !strings.Contains(e, `needs the scope \"apply\"`) {
		t.Errorf("apply outside the token's scopes: %+v", http[3])
	}

	expiring := runTSClient(t, modules, mint("-scope", "call:echo", "-expires", "4s"), []map[string]any{
		{"call": "cap_echo", "args": map[string]any{"text": "in time"}},
		{"sleep": 5000},
		{"call": "cap_echo", "args": map[string]any{"text": "too late"}},
	}, "http", srv.url)
	if expiring[0].text() != `{"text":"in time"}` {
		t.Errorf("before expiry: %+v", expiring[0])
	}
	if e := expiring[2].Error; !strings.Contains(e, "token is expired") || !strings.Contains(e, "foundry mcp token") {
		t.Errorf("after expiry: %+v", expiring[2])
	}
}

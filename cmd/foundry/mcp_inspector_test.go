package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An independent client from another ecosystem: the MCP Inspector's CLI (TypeScript SDK),
// installed by scripts/mcp-inspector.sh (make test-tools). Each of its runs starts the real
// `foundry mcp`, initializes, and makes one request.

// inspectorBin is the installed MCP Inspector, or skips; with CI=true a missing one fails.
func inspectorBin(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join("..", "..", ".test-tools", "mcp-inspector", "node_modules", ".bin", "mcp-inspector"))
	if _, err := os.Stat(bin); err == nil {
		if _, err := exec.LookPath("node"); err == nil {
			return bin
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the MCP Inspector is not installed at %s: CI must install it (make test-tools runs scripts/mcp-inspector.sh)", bin)
	}
	t.Skipf("the MCP Inspector is not installed (run scripts/mcp-inspector.sh): %s", bin)
	return ""
}

// inspect runs the Inspector's CLI against `foundry mcp -C dir` with args (--method …) and
// returns its exit code and the JSON it printed on stdout (nil when it printed none).
func inspect(t *testing.T, bin, dir string, args ...string) (int, map[string]any, string) {
	t.Helper()
	// Its options first, then "--" and the server's command line, which it would otherwise
	// read options from (-executor as -e xecutor).
	full := append(append([]string{"--cli"}, args...), "--", foundryBin, "mcp", "-C", dir, "-executor", "runc")
	return runInspector(t, bin, full, args)
}

// runInspector runs the Inspector's CLI bin with its full command line and returns its exit
// code, the JSON it printed on stdout (nil when none) and its stderr; args, the method's
// part of it, name it in a failure.
func runInspector(t *testing.T, bin string, full, args []string) (int, map[string]any, string) {
	t.Helper()
	cmd := exec.Command(bin, full...)
	// Its catalog and caches go to a home of the test's, never the user's.
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if s := strings.TrimSpace(out.String()); s != "" {
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("inspector %v printed what is not JSON: %v\n%s\n%s", args, err, s, errb.String())
		}
	}
	return code, v, errb.String()
}

// normalized is v through JSON, for comparing the two clients' views as the wire has them.
func normalized(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}

// The Inspector sees the tools the go-sdk client sees, finds no portability error in their
// schemas (--strict), and gets the same results and the same refusals.
func TestMCPInspector(t *testing.T) {
	bin := inspectorBin(t)
	dir := appliedMCPProject(t)
	cs := connectMCP(t, testMCPConfig(t, dir), "")

	code, listed, errs := inspect(t, bin, dir, "--method", "tools/list", "--strict")
	if code != 0 || listed == nil {
		t.Fatalf("inspector tools/list --strict: exit %d\n%s", code, errs)
	}
	if !strings.Contains(errs, "0 errors") {
		t.Errorf("the Inspector's --strict check reports errors:\n%s", errs)
	}
	goTools := map[string]*mcp.Tool{}
	for _, tool := range listTools(t, cs) {
		goTools[tool.Name] = tool
	}
	jsTools, _ := listed["tools"].([]any)
	if len(jsTools) != len(goTools) {
		t.Errorf("the Inspector lists %d tools, go-sdk %d", len(jsTools), len(goTools))
	}
	for _, jt := range jsTools {
		m := jt.(map[string]any)
		name, _ := m["name"].(string)
		gt := goTools[name]
		if gt == nil {
			t.Errorf("the Inspector lists %s, go-sdk does not", name)
			continue
		}
		for _, f := range []string{"description", "inputSchema", "outputSchema", "annotations"} {
			if g, j := normalized(t, gt).(map[string]any)[f], m[f]; !reflect.DeepEqual(g, j) {
				t.Errorf("%s.%s: go-sdk %v, Inspector %v", name, f, g, j)
			}
		}
	}

	// The same calls, the same answers: a project tool, the capability tool, its declared
	// error, invalid input, and arguments outside the schema.
	for _, tc := range []struct {
		tool   string
		args   map[string]string // as the Inspector's --tool-arg key=value
		goArgs map[string]any
	}{
		{"validate", nil, map[string]any{}},
		{"capabilities", map[string]string{"name": "echo"}, map[string]any{"name": "echo"}},
		{"cap_echo", map[string]string{"text": "hi"}, map[string]any{"text": "hi"}},
		{"cap_echo", map[string]string{"text": "boom"}, map[string]any{"text": "boom"}},
		{"cap_echo", map[string]string{"text": "hi", "extra": "1"}, map[string]any{"text": "hi", "extra": 1}},
		{"plan", map[string]string{"executor": "local"}, map[string]any{"executor": "local"}},
	} {
		args := []string{"--method", "tools/call", "--tool-name", tc.tool}
		for k, v := range tc.args {
			args = append(args, "--tool-arg", k+"="+v)
		}
		code, jsRes, errs := inspect(t, bin, dir, args...)
		goRes := normalized(t, callTool(t, cs, tc.tool, tc.goArgs)).(map[string]any)
		if jsRes == nil {
			t.Errorf("%s %v: the Inspector printed no result (exit %d)\n%s", tc.tool, tc.args, code, errs)
			continue
		}
		if goRes["isError"] == true && code == 0 {
			t.Errorf("%s %v: a tool error, and the Inspector exited 0", tc.tool, tc.args)
		}
		for _, f := range []string{"content", "structuredContent", "isError"} {
			if !reflect.DeepEqual(goRes[f], jsRes[f]) {
				t.Errorf("%s %v: %s: go-sdk %v, Inspector %v", tc.tool, tc.args, f, goRes[f], jsRes[f])
			}
		}
	}

	// Refused the same out-of-scope action: apply is not served without -allow apply.
	if code, _, errs := inspect(t, bin, dir, "--method", "tools/call", "--tool-name", "apply"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("the Inspector calling apply: exit %d\n%s", code, errs)
	}
}

// inspectHTTP runs the Inspector's CLI against the server at url over Streamable HTTP, with
// the bearer token when not "", and returns its exit code, the JSON it printed (nil when
// none) and its stderr.
func inspectHTTP(t *testing.T, bin, url, token string, args ...string) (int, map[string]any, string) {
	t.Helper()
	full := append([]string{"--cli", "--transport", "http", "--server-url", url}, args...)
	if token != "" {
		full = append(full, "--header", "Authorization: Bearer "+token)
	}
	return runInspector(t, bin, full, args)
}

// The Inspector as a remote host of foundry mcp -http with authorization: it lists the
// tools go-sdk lists, calls a capability and gets its result and its declared error, is
// refused what its token does not grant (insufficient_scope, no result), and is refused
// everything once its token has expired.
func TestMCPInspectorHTTP(t *testing.T) {
	bin := inspectorBin(t)
	dir := appliedMCPProject(t)
	keys := t.TempDir()
	ops := keygenCLI(t, keys, "ops")
	srv := startMCPHTTP(t, dir, "-token-issuer", "ops="+ops+".pub")
	mint := func(args ...string) string {
		return mintCLI(t, append([]string{"-key", ops + ".key", "-issuer", "ops", "-audience", srv.url}, args...)...)
	}
	host := mint("-scope", "read", "-scope", "call:echo")

	code, listed, errs := inspectHTTP(t, bin, srv.url, host, "--method", "tools/list")
	if code != 0 || listed == nil {
		t.Fatalf("inspector tools/list over HTTP: exit %d\n%s\n%s", code, errs, srv.log())
	}
	cs, err := connectHTTP(t, srv.url, host)
	if err != nil {
		t.Fatal(err)
	}
	var jsNames []string
	for _, jt := range listed["tools"].([]any) {
		jsNames = append(jsNames, jt.(map[string]any)["name"].(string))
	}
	if goNames := toolNames(listTools(t, cs)); !reflect.DeepEqual(jsNames, goNames) || !slices.Contains(jsNames, "cap_echo") {
		t.Errorf("the Inspector lists %v over HTTP, go-sdk %v", jsNames, goNames)
	}

	code, res, errs := inspectHTTP(t, bin, srv.url, host, "--method", "tools/call", "--tool-name", "cap_echo", "--tool-arg", "text=over http")
	if text := inspectorText(res); code != 0 || res["isError"] == true || text != `{"text":"over http"}` {
		t.Errorf("cap_echo over HTTP: exit %d, %v\n%s", code, res, errs)
	}
	code, res, errs = inspectHTTP(t, bin, srv.url, host, "--method", "tools/call", "--tool-name", "cap_echo", "--tool-arg", "text=boom")
	if text := inspectorText(res); code == 0 || res["isError"] != true || !strings.Contains(text, `"error":"invalid_input"`) || !strings.Contains(text, `"exit_code":2`) {
		t.Errorf("cap_echo boom over HTTP: exit %d, %v\n%s", code, res, errs)
	}

	// A token that reads but may not call the capability: refused; no result.
	reader := mint("-scope", "read")
	code, res, errs = inspectHTTP(t, bin, srv.url, reader, "--method", "tools/call", "--tool-name", "cap_echo", "--tool-arg", "text=hi")
	// The Inspector reads the scope from the WWW-Authenticate challenge: "Insufficient scope:
	// required "call:echo"".
	if low := strings.ToLower(errs); code == 0 || res != nil && res["isError"] != true || !strings.Contains(low, "insufficient scope") || !strings.Contains(errs, `call:echo`) {
		t.Errorf("cap_echo with a read token: exit %d, %v\n%s", code, res, errs)
	}

	// An expired token: a 401, which the Inspector takes for a need to authorize anew (it
	// would start OAuth in a terminal; here it says auth_required).
	brief := mint("-scope", "read", "-expires", "1s")
	time.Sleep(2 * time.Second)
	code, res, errs = inspectHTTP(t, bin, srv.url, brief, "--method", "tools/list")
	if code == 0 || res != nil && res["tools"] != nil || !strings.Contains(errs, "auth_required") {
		t.Errorf("tools/list with an expired token: exit %d, %v\n%s", code, res, errs)
	}
}

// inspectorText is the text of the first content item of a tool result the Inspector
// printed.
func inspectorText(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	m, _ := content[0].(map[string]any)
	s, _ := m["text"].(string)
	return s
}

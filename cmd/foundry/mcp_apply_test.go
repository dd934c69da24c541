package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With -allow apply, the apply tool plans and applies under the server's settings: the first
// call runs the step and admits the capability, whose tool then appears; the second finds
// everything cached; a target
// restricts it; a failing step is a tool error whose structured result names it.
func TestMCPApplyTool(t *testing.T) {
	needSandbox(t)
	dir := writeMCPProject(t)
	cs := connectMCP(t, testMCPConfig(t, dir, "apply"), "")

	var a applyOut
	res := callTool(t, cs, "apply", map[string]any{})
	structured(t, res, &a)
	if a.Outcome != "complete" || a.ExitCode != 0 || a.Executed < 2 || a.RunID == "" || len(a.Failed) != 0 {
		t.Fatalf("first apply: %+v", a)
	}
	var c capabilitiesOut
	structured(t, callTool(t, cs, "capabilities", map[string]any{}), &c)
	if len(c.Capabilities) != 1 || c.Capabilities[0].Evidence != "verified" {
		t.Errorf("after apply, capabilities: %+v", c)
	}
	// The version it admitted is a tool now, without restarting the server.
	if res := callTool(t, cs, "cap_echo", map[string]any{"text": "admitted just now"}); res.IsError || resultText(res) != `{"text":"admitted just now"}` {
		t.Errorf("cap_echo after apply: isError %v, %s", res.IsError, resultText(res))
	}

	a = applyOut{}
	structured(t, callTool(t, cs, "apply", map[string]any{"targets": []string{"step.hello"}}), &a)
	if a.Outcome != "complete" || a.Executed != 0 || a.Cached != 1 {
		t.Errorf("second apply of step.hello: %+v", a)
	}

	// A step that fails: a tool error, with the structured result saying what failed.
	if err := appendFile(dir+"/main.hcl", `
step "broken" {
  image = seed.busybox
  run   = ["sh", "-c", "echo broken-step-says-no >&2; exit 7"]
}
`); err != nil {
		t.Fatal(err)
	}
	res = callTool(t, cs, "apply", map[string]any{})
	if !res.IsError {
		t.Fatalf("a failed apply is not a tool error: %s", resultText(res))
	}
	a = applyOut{}
	res.IsError = false // structured content is there all the same
	structured(t, res, &a)
	if a.Outcome != "failed" || a.ExitCode != exitError || len(a.Failed) != 1 || a.Failed[0].Node != "step.broken" || a.Failed[0].ExitCode != 7 ||
		!strings.Contains(a.Report, "broken-step-says-no") {
		t.Errorf("failed apply: %+v", a)
	}
	var l logsOut
	structured(t, callTool(t, cs, "logs", map[string]any{"node": "step.broken"}), &l)
	if l.Stderr != "broken-step-says-no\n" || l.Status != "failed" {
		t.Errorf("logs of the failed step: %+v", l)
	}
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// The apply tool runs under the grants file the operator named with -grants, not the
// project's default: a broken one stops the apply before anything runs, and says where.
func TestMCPApplyUsesTheOperatorsGrants(t *testing.T) {
	dir := writeMCPProject(t)
	grants := filepath.Join(t.TempDir(), "ops-grants.hcl")
	if err := os.WriteFile(grants, []byte("grant \"deliver\" {\n  to = \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testMCPConfig(t, dir, "apply")
	cfg.grants = grants
	cs := connectMCP(t, cfg, "")
	var a applyOut
	res := callTool(t, cs, "apply", map[string]any{})
	json.Unmarshal([]byte(resultText(res)), &a)
	if !res.IsError || a.ExitCode != exitError || a.Outcome != "not_run" || !strings.Contains(a.Report, "the grants file "+grants) {
		t.Fatalf("apply with a broken -grants file: isError %v, %+v", res.IsError, a)
	}
	if _, err := os.Stat(filepath.Join(dir, ".foundry", "runs")); err == nil {
		t.Error("an apply refused for its grants file started a run")
	}
}

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// The read-only tools on an applied project say what the commands of their names say.
func TestMCPReadOnlyTools(t *testing.T) {
	dir := appliedMCPProject(t)
	cs := connectMCP(t, testMCPConfig(t, dir), "")

	var v validateOut
	structured(t, callTool(t, cs, "validate", map[string]any{}), &v)
	if !v.Valid || v.Nodes == 0 {
		t.Errorf("validate: %+v", v)
	}

	var p planOut
	structured(t, callTool(t, cs, "plan", map[string]any{}), &p)
	if p.Project != "mcp-fixture" || p.Summary.Run != 0 || len(p.Capabilities) != 1 || p.Capabilities[0].Status != "registry" || p.Capabilities[0].Pinned == "" {
		t.Errorf("plan after apply: %+v", p)
	}
	found := false
	for _, n := range p.Nodes {
		found = found || (n.Address == "step.hello" && n.Status == "cached")
	}
	if !found {
		t.Errorf("plan: step.hello is not cached: %+v", p.Nodes)
	}
	p = planOut{}
	structured(t, callTool(t, cs, "plan", map[string]any{"targets": []string{"step.hello"}}), &p)
	if len(p.Capabilities) != 0 || len(p.Targets) != 1 {
		t.Errorf("plan -target step.hello: %+v", p)
	}

	var st statusOut
	structured(t, callTool(t, cs, "status", map[string]any{"limit": 5}), &st)
	if len(st.Runs) != 1 || st.Run != st.Runs[0].ID || st.Runs[0].Status != "succeeded" || len(st.Nodes) == 0 || len(st.CapabilityEvents) == 0 {
		t.Errorf("status: %+v", st)
	}
	if res := callTool(t, cs, "status", map[string]any{"run": "20991231T000000-0000"}); !res.IsError || !strings.Contains(resultText(res), "no run") {
		t.Errorf("status of an unknown run: %s", resultText(res))
	}

	// run_summary: the latest run's summary, as foundry report -json gives it.
	var rs runReport
	structured(t, callTool(t, cs, "run_summary", map[string]any{}), &rs)
	outcomes := map[string]string{}
	for _, n := range rs.Nodes {
		outcomes[n.Address] = n.Outcome
	}
	if rs.Run != st.Run || rs.Status != "succeeded" || outcomes["step.hello"] != "executed" || outcomes["capability.echo"] != "built" || len(rs.CapabilityEvents) == 0 || rs.WallUS <= 0 {
		t.Errorf("run_summary: run %s status %s outcomes %v, %d capability events", rs.Run, rs.Status, outcomes, len(rs.CapabilityEvents))
	}
	if res := callTool(t, cs, "run_summary", map[string]any{"run": "20991231T000000-0000"}); !res.IsError || !strings.Contains(resultText(res), "no run") {
		t.Errorf("run_summary of an unknown run: %s", resultText(res))
	}

	var e struct {
		Node   string `json:"node"`
		Cached bool   `json:"cached"`
	}
	structured(t, callTool(t, cs, "explain", map[string]any{"node": "step.hello"}), &e)
	if e.Node != "step.hello" || !e.Cached {
		t.Errorf("explain step.hello: %+v", e)
	}
	if res := callTool(t, cs, "explain", map[string]any{"node": "capability.echo"}); !res.IsError || !strings.Contains(resultText(res), "is a capability") {
		t.Errorf("explain of a capability: %s", resultText(res))
	}

	var l logsOut
	structured(t, callTool(t, cs, "logs", map[string]any{"node": "step.hello"}), &l)
	if l.Stdout != "hello-from-step\n" || l.Stderr != "warn-from-step\n" || l.Status != "done" {
		t.Errorf("logs step.hello: %+v", l)
	}
	l = logsOut{}
	structured(t, callTool(t, cs, "logs", map[string]any{"node": "step.hello", "stream": "stderr"}), &l)
	if l.Stdout != "" || l.Stderr != "warn-from-step\n" {
		t.Errorf("logs -stream stderr: %+v", l)
	}

	var c capabilitiesOut
	structured(t, callTool(t, cs, "capabilities", map[string]any{"name": "ECH"}), &c)
	if len(c.Capabilities) != 1 || c.Capabilities[0].Evidence != "verified" || len(c.Capabilities[0].Admitted) != 1 || c.Capabilities[0].ContractDigest == "" {
		t.Errorf("capabilities: %+v", c)
	}
	c = capabilitiesOut{}
	structured(t, callTool(t, cs, "capabilities", map[string]any{"name": "sort"}), &c)
	if len(c.Capabilities) != 0 {
		t.Errorf("capabilities matching sort: %+v", c)
	}

	var vr verifyOut
	structured(t, callTool(t, cs, "verify", map[string]any{"capability": "echo"}), &vr)
	if !vr.Verified || !strings.Contains(vr.Subject, "@sha256:") {
		t.Errorf("verify capability echo: %+v", vr)
	}
	// The step's output, by digest, against the project's attestations: as foundry verify.
	code, out, errs := foundry(t, dir, "output", "-json", "step.hello")
	if code != 0 {
		t.Fatalf("output: %s%s", out, errs)
	}
	var outputs []struct{ Path, Digest string }
	if err := json.Unmarshal([]byte(out), &outputs); err != nil || len(outputs) != 1 {
		t.Fatalf("output -json: %v\n%s", err, out)
	}
	d := outputs[0].Digest
	vr = verifyOut{}
	structured(t, callTool(t, cs, "verify", map[string]any{"digest": d}), &vr)
	if !vr.Verified || vr.Digest != d {
		t.Errorf("verify digest %s: %+v", d, vr)
	}
}

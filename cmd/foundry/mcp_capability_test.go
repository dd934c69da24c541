package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/invoke"
)

// An admitted capability is a tool: its lowered schemas, its description, and calls
// validated by the invoker against the contract's schemas, the output as structured
// content and text.
func TestMCPCapabilityTools(t *testing.T) {
	dir := appliedMCPProject(t)
	cs := connectMCP(t, testMCPConfig(t, dir), "")
	var echo *struct {
		in, out any
		desc    string
	}
	for _, tool := range listTools(t, cs) {
		if tool.Name == "cap_echo" {
			echo = &struct {
				in, out any
				desc    string
			}{tool.InputSchema, tool.OutputSchema, tool.Description}
			checkPortableSchema(t, tool.Name, tool.InputSchema)
			if a := tool.Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint || *a.DestructiveHint || *a.OpenWorldHint {
				t.Errorf("cap_echo annotations %+v", a)
			}
		}
	}
	if echo == nil {
		t.Fatal("no cap_echo tool")
	}
	want := `{"additionalProperties":false,"properties":{"text":{"maxLength":64,"type":"string"}},"required":["text"],"type":"object"}`
	for what, s := range map[string]any{"input": echo.in, "output": echo.out} {
		if b, _ := json.Marshal(s); string(b) != want {
			t.Errorf("%s schema %s, want the contract's %s", what, b, want)
		}
	}
	if !strings.Contains(echo.desc, "Declared errors: invalid_input (exit 2).") || !strings.Contains(echo.desc, "Contract sha256:") {
		t.Errorf("description: %s", echo.desc)
	}

	res := callTool(t, cs, "cap_echo", map[string]any{"text": "hi"})
	if res.IsError || resultText(res) != `{"text":"hi"}` {
		t.Fatalf("cap_echo {text: hi}: isError %v, %s", res.IsError, resultText(res))
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"text":"hi"}` {
		t.Errorf("structured content %s", b)
	}
	// A declared error exit is a tool error naming it.
	res = callTool(t, cs, "cap_echo", map[string]any{"text": "boom"})
	if !res.IsError || !strings.Contains(resultText(res), `"error":"invalid_input"`) || !strings.Contains(resultText(res), "boom-declared") {
		t.Errorf("cap_echo {text: boom}: isError %v, %s", res.IsError, resultText(res))
	}
	for _, tc := range []struct {
		args any
		want string
	}{
		{map[string]any{"text": 5}, "invalid input"},
		{map[string]any{"text": "x", "extra": 1}, "invalid input"},
		{map[string]any{}, "invalid input"},
		{map[string]any{"text": strings.Repeat("x", 65)}, "invalid input"},
	} {
		res := callTool(t, cs, "cap_echo", tc.args)
		if !res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("cap_echo %v: isError %v, %s", tc.args, res.IsError, resultText(res))
		}
	}
}

// A capability call runs only in a sandbox: a server whose operator allowed the local
// executor (for its apply tool) still refuses to run a call as a host process.
func TestMCPCapabilityCallRefusedUnsandboxed(t *testing.T) {
	dir := appliedMCPProject(t)
	cfg := testMCPConfig(t, dir)
	cfg.ex.name, cfg.ex.allowLocal = "local", true
	cs := connectMCP(t, cfg, "")
	res := callTool(t, cs, "cap_echo", map[string]any{"text": "hi"})
	if !res.IsError || !strings.Contains(resultText(res), "capability calls run only in a sandbox") {
		t.Fatalf("cap_echo on the local executor: isError %v, %s", res.IsError, resultText(res))
	}
}

// A capability whose schema Lower refuses is not offered, and the server says why.
func TestMCPCapabilityRefusedLowering(t *testing.T) {
	c := invoke.Capability{Name: "pick", Address: "capability.pick", Kind: "cli",
		InputSchema: json.RawMessage(`{"oneOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}]}`)}
	if _, _, err := capabilityTool(c); err == nil || !strings.Contains(err.Error(), "input schema") {
		t.Errorf("a root oneOf of different branches is offered: %v", err)
	}
	c = invoke.Capability{Name: strings.Repeat("n", 130), Kind: "cli"}
	if _, _, err := capabilityTool(c); err == nil || !strings.Contains(err.Error(), "not an MCP tool name") {
		t.Errorf("a 134-character tool name is offered: %v", err)
	}
	c = invoke.Capability{Name: "list", Kind: "cli", InputSchema: json.RawMessage(`{"type":"array","items":{"type":"integer","maximum":9223372036854775807}}`)}
	tool, ct, err := capabilityTool(c)
	if err != nil || ct.inWrapped != "input" || ct.outWrapped != "output" {
		t.Fatalf("an array root: %v %+v", err, ct)
	}
	checkPortableSchema(t, tool.Name, tool.InputSchema)
	// The schema served keeps the contract's numbers as written, never as a double.
	if b, _ := json.Marshal(tool.InputSchema); string(b) != `{"additionalProperties":false,"properties":{"input":{"items":{"maximum":9223372036854775807,"type":"integer"},"type":"array"}},"required":["input"],"type":"object"}` {
		t.Errorf("the input schema is served as %s", b)
	}
	if in, err := ct.input(json.RawMessage(`{"input":[9223372036854775807, 3.0]}`)); err != nil || string(in) != `[9223372036854775807, 3.0]` {
		t.Errorf("unwrapped input %s, %v: want the bytes as written", in, err)
	}
	if _, err := ct.input(json.RawMessage(`{"input":[1],"x":2}`)); err == nil {
		t.Error("an extra argument beside input is accepted")
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readTools are the tools every server has; apply needs -allow apply, propose -allow propose.
var readTools = []string{"capabilities", "explain", "job_brief", "jobs", "logs", "plan", "run_summary", "status", "validate", "verify"}

// withTools is readTools and more, sorted as tools/list is.
func withTools(more ...string) []string {
	return slices.Sorted(slices.Values(append(slices.Clone(readTools), more...)))
}

// The lifecycle: the client's initialize names a version; the server answers with it when it
// serves it, else with its newest; its capabilities declare tools, whose list changes when an
// apply admits a capability (and nothing else it does not have), its instructions are its own fixed text; go-sdk's default client, which first
// tries the stateless 2026-07-28 discovery, falls back to the initialize handshake.
func TestMCPLifecycle(t *testing.T) {
	dir := writeMCPProject(t)
	for _, tc := range []struct{ ask, want string }{
		{"2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-06-18"},
		{"", "2025-11-25"},
	} {
		cs := connectMCP(t, testMCPConfig(t, dir), tc.ask)
		ir := cs.InitializeResult()
		if ir.ProtocolVersion != tc.want {
			t.Errorf("asked for %q: negotiated %q, want %q", tc.ask, ir.ProtocolVersion, tc.want)
		}
		if ir.ServerInfo == nil || ir.ServerInfo.Name != "foundry" {
			t.Errorf("serverInfo %+v", ir.ServerInfo)
		}
		caps := ir.Capabilities
		if caps == nil || caps.Tools == nil || !caps.Tools.ListChanged || caps.Prompts != nil || caps.Resources != nil {
			t.Errorf("capabilities %+v: want tools only", caps)
		}
		// Logging is read from the wire: go-sdk deprecates the field (SEP-2577).
		var wire map[string]json.RawMessage
		if b, err := json.Marshal(caps); err != nil || json.Unmarshal(b, &wire) != nil || wire["logging"] != nil {
			t.Errorf("capabilities %s: want no logging (err %v)", b, err)
		}
		if ir.Instructions != mcpInstructions {
			t.Errorf("instructions are not the server's fixed text: %q", ir.Instructions)
		}
	}
}

// tools/list: exactly the read-only tools, each with a flat object schema refusing other
// properties, an output schema, and annotations true to what it does.
func TestMCPToolsListAndAnnotations(t *testing.T) {
	cs := connectMCP(t, testMCPConfig(t, writeMCPProject(t)), "2025-11-25")
	tools := listTools(t, cs)
	if got := toolNames(tools); !slices.Equal(got, readTools) {
		t.Fatalf("tools %v, want %v", got, readTools)
	}
	for _, tool := range tools {
		checkPortableSchema(t, tool.Name, tool.InputSchema)
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
		a := tool.Annotations
		if a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s: annotations %+v, want read-only, idempotent, not destructive, closed world", tool.Name, a)
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", tool.Name)
		}
	}
}

// checkPortableSchema fails unless schema is a flat object (properties, required,
// additionalProperties false) with no root combinators or references.
func checkPortableSchema(t *testing.T, name string, schema any) {
	t.Helper()
	m, ok := schema.(map[string]any)
	if !ok {
		t.Errorf("%s: input schema %T, want an object", name, schema)
		return
	}
	if m["type"] != "object" || m["additionalProperties"] != false {
		t.Errorf("%s: input schema %v: want type object and additionalProperties false", name, m)
	}
	for k := range m {
		switch k {
		case "type", "properties", "required", "additionalProperties", "description":
		default:
			t.Errorf("%s: input schema has root keyword %q, outside the portable subset", name, k)
		}
	}
	props, _ := m["properties"].(map[string]any)
	for p, s := range props {
		ps, _ := s.(map[string]any)
		if _, ok := ps["type"].(string); !ok {
			t.Errorf("%s.%s: property schema %v: want one plain type", name, p, ps)
		}
	}
}

func listTools(t *testing.T, cs *mcp.ClientSession) []*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

func toolNames(tools []*mcp.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// A tool that does not exist is a protocol error (JSON-RPC -32602), not a tool result: the
// host learns that it named something the server never offered.
func TestMCPUnknownToolIsProtocolError(t *testing.T) {
	cs := connectMCP(t, testMCPConfig(t, writeMCPProject(t)), "2025-11-25")
	for _, name := range []string{"nope", "apply", "grant", "mark_suite_passed", "admit", "sign", "cap_other", "propose"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "unknown tool") {
			t.Errorf("tools/call %s: result %+v, error %v; want a -32602 unknown tool error", name, res, err)
		}
	}
}

// Arguments that fail the input schema are a tool execution error (isError) carrying the
// validation message, so that a model can correct its call (SEP-1303; go-sdk issue #450).
func TestMCPInvalidArgumentsAreToolErrors(t *testing.T) {
	cs := connectMCP(t, testMCPConfig(t, writeMCPProject(t)), "2025-11-25")
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"plan", map[string]any{"grants": []string{"network"}}, `unexpected additional properties ["grants"]`},
		{"validate", map[string]any{"dir": "/"}, `unexpected additional properties ["dir"]`},
		{"status", map[string]any{"limit": 0}, "minimum"},
		{"status", map[string]any{"limit": "ten"}, "type"},
		{"logs", map[string]any{}, "node"},
		{"logs", map[string]any{"node": "step.hello", "stream": "stdin"}, "enum"},
		{"explain", map[string]any{"node": 7}, "type"},
		{"verify", map[string]any{"digest": "sha256:xyz"}, "pattern"},
		{"verify", map[string]any{}, "exactly one of capability"},
		{"verify", map[string]any{"capability": "echo", "digest": "sha256:" + strings.Repeat("0", 64)}, "exactly one of capability"},
	} {
		res := callTool(t, cs, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("%s %v: isError %v, %q; want a tool error saying %q", tc.tool, tc.args, res.IsError, resultText(res), tc.want)
		}
	}
}

// apply is served only with -allow apply; -allow refuses what it does not know.
func TestMCPAllowGating(t *testing.T) {
	dir := writeMCPProject(t)
	without := toolNames(listTools(t, connectMCP(t, testMCPConfig(t, dir), "")))
	if slices.Contains(without, "apply") {
		t.Errorf("apply offered without -allow apply: %v", without)
	}
	if slices.Contains(without, "propose") {
		t.Errorf("propose offered without -allow propose: %v", without)
	}
	if got := toolNames(listTools(t, connectMCP(t, testMCPConfig(t, dir, "propose"), ""))); !slices.Equal(got, withTools("propose")) {
		t.Errorf("-allow propose: tools %v", got)
	}
	cs := connectMCP(t, testMCPConfig(t, dir, "apply,propose"), "")
	tools := listTools(t, cs)
	if got := toolNames(tools); !slices.Equal(got, withTools("apply", "propose")) {
		t.Errorf("-allow apply,propose: tools %v", got)
	}
	seen := 0
	for _, tool := range tools {
		a := tool.Annotations
		switch tool.Name {
		case "apply":
			if a.ReadOnlyHint || a.IdempotentHint || a.DestructiveHint == nil || !*a.DestructiveHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
				t.Errorf("apply: annotations %+v: want not read-only, not idempotent, destructive, open world", a)
			}
		case "propose":
			// A proposal adds a round to a job; it overwrites nothing and stays in the project.
			if a.ReadOnlyHint || a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
				t.Errorf("propose: annotations %+v: want not read-only, not idempotent, not destructive, closed world", a)
			}
		default:
			continue
		}
		seen++
		checkPortableSchema(t, tool.Name, tool.InputSchema)
	}
	if seen != 2 {
		t.Errorf("found %d of apply and propose", seen)
	}
	for _, bad := range [][]string{{"-allow", "delete"}, {"-allow", "apply,grant"}, {"-allow", "Apply"}} {
		code, _, errs := runCLI(t, append([]string{"mcp", "-C", dir}, bad...)...)
		if code != exitUsage || !strings.Contains(errs, "unknown; the tools that can be enabled are apply, propose") {
			t.Errorf("foundry mcp %v: exit %d, %s", bad, code, errs)
		}
	}
}

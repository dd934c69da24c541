package main

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The blueprint's measured interface case over MCP stdio: examples/int-sort admitted by an
// apply, then called as the tool cap_int-sort through a real `foundry mcp` process by the
// go-sdk client. The six valid inputs of intSortInterfaceCases (shared with
// TestServeIntSort) give the literal expected values, as text and as structured content;
// its nine invalid ones are tool errors with the validator's message; the tool's lowered
// schemas are the contract's stored schemas, wrapped. The MCP Inspector, a JavaScript
// client, sends the cases a JavaScript number carries exactly and must get what the go-sdk
// client gets.
func TestMCPIntSort(t *testing.T) {
	needSandbox(t)
	needGoToolchain(t)
	bin := inspectorBin(t)
	dir := copyExample(t, "int-sort")
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: %s%s", r.stdout, r.stderr)
	}
	_, capsJSON, _ := foundry(t, dir, "capabilities", "-json")
	var caps []struct {
		Contract string `json:"contract_digest"`
	}
	if json.Unmarshal([]byte(capsJSON), &caps); len(caps) != 1 {
		t.Fatalf("capabilities: %s", capsJSON)
	}
	wire := &recordingTransport{}
	cs := connectStdioVia(t, dir, wire)

	var tool *mcp.Tool
	for _, tl := range listTools(t, cs) {
		if tl.Name == "cap_int-sort" {
			tool = tl
		}
	}
	if tool == nil {
		t.Fatal("no cap_int-sort tool")
	}
	if !strings.Contains(tool.Description, caps[0].Contract) {
		t.Errorf("the description does not name the contract %s: %s", caps[0].Contract, tool.Description)
	}

	// The schemas as the server wrote them (go-sdk's client decodes them into float64s,
	// which would hide a bound of 9223372036854775807 turned into 9223372036854775808).
	// Each wraps the contract's stored schema as the one required property of an object,
	// which is the stored schema without "$schema": Lower drops that metadata, as a
	// function-calling host has no use for it (spec/interfaces.md §4).
	var listed struct {
		Tools []struct {
			Name                      string
			InputSchema, OutputSchema json.RawMessage
		}
	}
	if err := json.Unmarshal(wire.last(t), &listed); err != nil {
		t.Fatal(err)
	}
	storedIn, storedOut, _ := storedSchemas(t, dir)
	for _, tl := range listed.Tools {
		if tl.Name != "cap_int-sort" {
			continue
		}
		for _, s := range []struct {
			what, field string
			lowered     json.RawMessage
			stored      string
		}{{"input", capInputField, tl.InputSchema, storedIn}, {"output", capOutputField, tl.OutputSchema, storedOut}} {
			var root map[string]json.RawMessage
			if err := json.Unmarshal(s.lowered, &root); err != nil {
				t.Fatalf("%s schema: %v: %s", s.what, err, s.lowered)
			}
			var props map[string]json.RawMessage
			json.Unmarshal(root["properties"], &props)
			if got := slices.Sorted(maps.Keys(root)); !slices.Equal(got, []string{"additionalProperties", "properties", "required", "type"}) ||
				string(root["type"]) != `"object"` || string(root["required"]) != `["`+s.field+`"]` || string(root["additionalProperties"]) != "false" ||
				len(props) != 1 || props[s.field] == nil {
				t.Errorf("%s schema %s: want an object of one required property %q", s.what, s.lowered, s.field)
				continue
			}
			if got, want := canonicalSchema(t, props[s.field]), canonicalSchema(t, []byte(s.stored), "$schema"); got != want {
				t.Errorf("%s schema: the wrapped property is\n%s\nthe contract's stored schema (less $schema) is\n%s", s.what, got, want)
			}
		}
	}

	call := func(input string) (*mcp.CallToolResult, json.RawMessage) {
		t.Helper()
		res := callTool(t, cs, "cap_int-sort", map[string]any{"input": json.RawMessage(input)})
		var raw struct{ StructuredContent json.RawMessage }
		json.Unmarshal(wire.last(t), &raw)
		return res, raw.StructuredContent
	}
	for _, c := range intSortInterfaceCases.valid {
		res, structured := call(c.input)
		want := `{"output":` + c.want + `}`
		if res.IsError || resultText(res) != want || string(structured) != want {
			t.Errorf("%s: isError %v, text %.200s, structured %.200s; want %.200s", c.name, res.IsError, resultText(res), structured, want)
		}
	}
	for _, c := range intSortInterfaceCases.invalid {
		res, structured := call(c.input)
		want := "invalid input: the input violates the input schema: " + c.want
		if !res.IsError || resultText(res) != want || structured != nil {
			t.Errorf("%s: isError %v, text %.300s, structured %.100s; want a tool error %q", c.name, res.IsError, resultText(res), structured, want)
		}
	}
	// Arguments that do not wrap the input as the lowered schema says.
	if res := callTool(t, cs, "cap_int-sort", map[string]any{"list": []int{1}}); !res.IsError || !strings.Contains(resultText(res), `exactly one property, "input"`) {
		t.Errorf("arguments without input: %s", resultText(res))
	}

	// The Inspector, from another ecosystem, gets the same results and refusals for the
	// inputs it can send as written (a JavaScript number is a double: not the 64-bit
	// endpoints; 3.0 would arrive as 3).
	sent := 0
	for _, c := range slices.Concat(intSortInterfaceCases.valid, intSortInterfaceCases.invalid) {
		if !jsExact(c.input) {
			continue
		}
		sent++
		goRes, _ := call(c.input)
		code, jsRes, errs := inspect(t, bin, dir, "--method", "tools/call", "--tool-name", "cap_int-sort", "--tool-arg", "input="+c.input)
		if jsRes == nil || (code == 0) == goRes.IsError {
			t.Errorf("Inspector %s: exit %d, %v\n%s", c.name, code, jsRes, errs)
			continue
		}
		g := normalized(t, goRes).(map[string]any)
		for _, f := range []string{"content", "structuredContent", "isError"} {
			if !reflect.DeepEqual(g[f], jsRes[f]) {
				t.Errorf("%s: %s: go-sdk %.300v, Inspector %.300v", c.name, f, g[f], jsRes[f])
			}
		}
	}
	if sent < 8 {
		t.Errorf("the Inspector sent only %d of the cases", sent)
	}
}

// recordingTransport is a client transport that keeps the raw result of each response it
// reads: go-sdk's client decodes results into Go values, numbers as float64, and a test of
// exact numbers needs what the server wrote.
type recordingTransport struct {
	mcp.Transport
	mu      sync.Mutex
	results []json.RawMessage
}

func (r *recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Connection: c, r: r}, nil
}

// last is the result of the latest response read.
func (r *recordingTransport) last(t *testing.T) json.RawMessage {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.results) == 0 {
		t.Fatal("no response read yet")
	}
	return r.results[len(r.results)-1]
}

type recordingConn struct {
	mcp.Connection
	r *recordingTransport
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if resp, ok := m.(*jsonrpc.Response); ok && err == nil && resp.Error == nil {
		c.r.mu.Lock()
		c.r.results = append(c.r.results, append(json.RawMessage(nil), resp.Result...))
		c.r.mu.Unlock()
	}
	return m, err
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectStdio starts the real `foundry mcp -C dir args...` and connects a go-sdk client to
// it over its stdin and stdout, as a host does.
func connectStdio(t *testing.T, dir string, args ...string) *mcp.ClientSession {
	t.Helper()
	return connectStdioVia(t, dir, nil, args...)
}

// connectStdioVia is connectStdio with the client's transport wrapped in rec, which keeps
// what the server wrote (nil: not wrapped).
func connectStdioVia(t *testing.T, dir string, rec *recordingTransport, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(foundryBin, append([]string{"mcp", "-C", dir, "-executor", "runc"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "foundry-test-stdio", Version: "1"}, nil)
	var transport mcp.Transport = &mcp.CommandTransport{Command: cmd}
	if rec != nil {
		rec.Transport = transport
		transport = rec
	}
	cs, err := c.Connect(context.Background(), transport, nil)
	if err != nil {
		t.Fatalf("connecting to foundry mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		// Closing stdin ends the session: the server exits 0 on its own.
		if err := cs.Close(); err != nil {
			t.Errorf("closing the session: %v\n%s", err, stderr.String())
		}
		if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
			t.Errorf("foundry mcp did not exit 0: %v\n%s", cmd.ProcessState, stderr.String())
		}
	})
	return cs
}

// The real server over stdio: what the in-process tests check, through the process's
// streams, with a capability tool called in a sandbox.
func TestMCPStdio(t *testing.T) {
	dir := appliedMCPProject(t)
	cs := connectStdio(t, dir)
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated %s", v)
	}
	want := append([]string{"cap_echo"}, readTools...)
	slices.Sort(want)
	if got := toolNames(listTools(t, cs)); !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	var v validateOut
	structured(t, callTool(t, cs, "validate", map[string]any{}), &v)
	if !v.Valid {
		t.Errorf("validate: %+v", v)
	}
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "apply", Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("apply without -allow apply: %v, want a -32602 unknown tool error", err)
	}
	if res := callTool(t, cs, "plan", map[string]any{"executor": "local"}); !res.IsError || !strings.Contains(resultText(res), "unexpected additional properties") {
		t.Errorf("plan {executor: local}: %s", resultText(res))
	}
	if res := callTool(t, cs, "cap_echo", map[string]any{"text": "over stdio"}); res.IsError || resultText(res) != `{"text":"over stdio"}` {
		t.Errorf("cap_echo: isError %v, %s", res.IsError, resultText(res))
	}
}

// Version negotiation on the wire, without a client library: a version the server serves is
// answered with itself, one it does not with its newest; before initialization completes,
// the server answers nothing but initialize and ping.
func TestMCPStdioVersionNegotiation(t *testing.T) {
	dir := writeMCPProject(t)
	for _, tc := range []struct{ ask, want string }{{"2025-06-18", "2025-06-18"}, {"2024-11-05", "2025-11-25"}, {"2099-01-01", "2025-11-25"}} {
		cmd := exec.Command(foundryBin, "mcp", "-C", dir)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		send := func(m string) {
			if _, err := in.Write([]byte(m + "\n")); err != nil {
				t.Fatal(err)
			}
		}
		recv := func() map[string]any {
			done := make(chan map[string]any, 1)
			go func() {
				line, _ := r.ReadBytes('\n')
				var m map[string]any
				json.Unmarshal(line, &m)
				done <- m
			}()
			select {
			case m := <-done:
				return m
			case <-time.After(20 * time.Second):
				t.Fatal("no answer from foundry mcp")
				return nil
			}
		}
		send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if m := recv(); m["error"] == nil {
			t.Errorf("tools/list before initialize was answered: %v", m)
		}
		send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"` + tc.ask + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		m := recv()
		res, _ := m["result"].(map[string]any)
		if res["protocolVersion"] != tc.want {
			t.Errorf("initialize %s: %v, want protocolVersion %s", tc.ask, m, tc.want)
		}
		send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
		if m := recv(); m["result"] == nil {
			t.Errorf("tools/list after initialization: %v", m)
		}
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("foundry mcp after stdin closed: %v", err)
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A client that writes what is not a JSON-RPC message, through the binary's stdin as raw
// lines: each bad line is answered (-32700 for what is not JSON, nested 100,000 deep or
// longer than a message may be; -32600 for a batch or a message of the wrong version,
// with its id) and the session goes on: the request in flight when they arrived and the
// ones after them are answered, errors quote at most a few hundred bytes of a 10 MB name,
// and the server exits 0 when the client closes stdin.
func TestMCPStdioAnswersBadLines(t *testing.T) {
	dir := writeMCPProject(t)
	cmd := exec.Command(foundryBin, "mcp", "-C", dir, "-executor", "runc")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	type reply struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
		size   int
	}
	replies := make(chan reply, 64)
	go func() {
		defer close(replies)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				var m reply
				if json.Unmarshal(line, &m) != nil {
					t.Errorf("the server wrote what is not JSON: %.200s", line)
				}
				m.size = len(line)
				replies <- m
			}
			if err != nil {
				return
			}
		}
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatalf("writing %.60s: %v\n%s", s, err, stderr.String())
		}
	}
	msg := func(id int, method string, params any) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		return string(b)
	}
	send(msg(1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}))
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(msg(2, "tools/call", map[string]any{"name": "plan", "arguments": map[string]any{}})) // in flight while the bad lines arrive
	send(`{not json`)
	send(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000))
	send(strings.Repeat(" ", 17<<20))
	send(`[` + msg(3, "tools/list", nil) + `]`)
	send(`{"jsonrpc":"1.0","id":4,"method":"tools/list"}`)
	send("")
	send(msg(5, "tools/call", map[string]any{"name": strings.Repeat("x", 10<<20), "arguments": map[string]any{}}))
	send(msg(6, "tools/call", map[string]any{"name": "validate", "arguments": map[string]any{strings.Repeat("y", 10<<20): 1}}))
	send(msg(7, "tools/list", nil))

	want := map[string]func(reply) bool{
		"1": func(r reply) bool { return r.Result != nil },
		"2": func(r reply) bool { return r.Result != nil && bytes.Contains(r.Result, []byte(`"plan_digest"`)) },
		"4": func(r reply) bool { return r.Error != nil && r.Error.Code == jsonrpc.CodeInvalidRequest },
		"5": func(r reply) bool { return r.Error != nil && strings.HasPrefix(r.Error.Message, `unknown tool "xxx`) },
		"6": func(r reply) bool { return bytes.Contains(r.Result, []byte(`"isError":true`)) },
		"7": func(r reply) bool { return bytes.Contains(r.Result, []byte(`"name":"validate"`)) },
	}
	var nulls []string
	deadline := time.After(3 * time.Minute)
	for len(want) > 0 || len(nulls) < 4 {
		var r reply
		var ok bool
		select {
		case r, ok = <-replies:
		case <-deadline:
			t.Fatalf("no answer to %v within 3 minutes (answered with id null: %v)\n%s", want, nulls, stderr.String())
		}
		if !ok {
			t.Fatalf("the server closed stdout before answering %v (id null: %v)\n%s", want, nulls, stderr.String())
		}
		if r.size > 10<<10 && string(r.ID) != "7" {
			t.Errorf("an answer of %d bytes to id %s: errors must not echo what the client sent", r.size, r.ID)
		}
		id := string(r.ID)
		if id == "null" {
			if r.Error == nil {
				t.Errorf("id null without an error: %+v", r)
				continue
			}
			nulls = append(nulls, r.Error.Message)
			continue
		}
		check, ok := want[id]
		if !ok || !check(r) {
			t.Errorf("answer to id %s: %s %+v", id, r.Result, r.Error)
		}
		delete(want, id)
	}
	wantNull := []string{"parse error: the line is not JSON: invalid character 'n'", "parse error: the line is not JSON: invalid character '[' exceeded max depth",
		"parse error: a message longer than", "invalid request: JSON-RPC batches are not supported"}
	for i, w := range wantNull {
		if i >= len(nulls) || !strings.HasPrefix(nulls[i], w) {
			t.Errorf("answers with id null: %q, want them to start %q in order", nulls, wantNull)
			break
		}
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("foundry mcp exited %v after stdin closed\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("foundry mcp did not exit within 30 s of stdin closing")
	}
}

// FuzzMCPLines: whatever a client writes, the line reader never panics, hands the SDK
// only single JSON-RPC messages each on a line of its own, and answers every other
// non-blank line with one JSON-RPC error line of bounded size.
func FuzzMCPLines(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{not json`, `[]`, `[{"jsonrpc":"2.0","id":1,"method":"x"}]`,
		`{"jsonrpc":"1.0","id":"a","method":"x"}`, `{"jsonrpc":"2.0","id":{"x":1},"method":"x"}`, `{"jsonrpc":"2.0","result":1}`,
		"  \r", `{"jsonrpc":"2.0","id":1,"method":"x"} {}`, `"\ud800"`, strings.Repeat("[", 2000) + strings.Repeat("]", 2000),
		`{"jsonrpc":"2.0","id":1,"method":"x"}` + "\n" + `{"a"` + "\n\n" + `7`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		c := &checkedLines{in: bufio.NewReader(bytes.NewReader(in)), out: &out}
		passed, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(passed, []byte("\n")), []byte("\n")) {
			if len(passed) == 0 {
				break
			}
			if _, err := jsonrpc.DecodeMessage(line); err != nil || line[0] == '[' || !json.Valid(line) {
				t.Fatalf("passed on %q: %v", line, err)
			}
		}
		nonBlank := 0
		for _, line := range bytes.Split(in, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				nonBlank++
			}
		}
		passedN := 0
		if len(passed) > 0 {
			passedN = bytes.Count(passed, []byte("\n"))
		}
		replies := 0
		for _, line := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			if out.Len() == 0 {
				break
			}
			replies++
			var r struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *jsonrpc.Error  `json:"error"`
			}
			if err := json.Unmarshal(line, &r); err != nil || r.JSONRPC != "2.0" || r.Error == nil || len(r.ID) == 0 || len(line) > 2*mcpMaxEcho+200 {
				t.Fatalf("reply %q: %v", line, err)
			}
		}
		if passedN+replies != nonBlank {
			t.Fatalf("%d non-blank lines, %d passed on and %d answered", nonBlank, passedN, replies)
		}
	})
}

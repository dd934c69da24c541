package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpMaxLine bounds one line of the protocol (one JSON-RPC message), as go-sdk's own
// stdio transport does by default.
const mcpMaxLine = mcp.DefaultMaxLineLength

// mcpMaxTool bounds the text of a tool error: a declared error's stderr tail (4 KiB) and
// its JSON fit.
const mcpMaxTool = 8 << 10

// mcpMaxEcho bounds what an error says of what the client sent (a method name, a tool
// name, a JSON-RPC version tag): enough to recognize it, never a copy of a large argument.
const mcpMaxEcho = 200

// lineTransport is foundry mcp's stdio transport: go-sdk's IOTransport behind a reader
// that takes the client's stream one line (one message) at a time and answers itself what
// the SDK would end the session over (JSON-RPC 2.0 §5.1): a line that is not JSON,
// including one nested deeper than JSON decoders go, or longer than mcpMaxLine, is a
// -32700 Parse error; JSON that is not one JSON-RPC message (a batch, which MCP 2025-06-18
// removed, a message without "jsonrpc": "2.0", one the SDK cannot decode) is a -32600
// Invalid Request. Both are answered with id null (the id of an Invalid Request when it
// can be read) and the session goes on; the SDK sees only the lines it can decode.
// Blank lines are skipped. Replies and the SDK's messages go out through one lock, so
// that a line is never interleaved with another.
type lineTransport struct {
	r io.Reader
	w io.Writer
}

func (t *lineTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	w := &lockedWriter{w: t.w}
	lines := &checkedLines{in: bufio.NewReaderSize(t.r, 64<<10), out: w}
	// The lines are bounded here, so the SDK's bound (the same) is not needed twice.
	conn, err := (&mcp.IOTransport{Reader: lines, Writer: w, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return boundedErrors{conn}, nil
}

// boundedErrors cuts the message and data of every JSON-RPC error the server sends to
// mcpMaxEcho bytes: the SDK's own quote what the client sent whole (an unknown tool's
// name, an unknown method), which can be megabytes.
type boundedErrors struct{ mcp.Connection }

func (b boundedErrors) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error != nil {
		var wire *jsonrpc.Error
		var code int64
		var data json.RawMessage
		if errors.As(r.Error, &wire) {
			code, data = wire.Code, wire.Data
		}
		if text := r.Error.Error(); len(text) > mcpMaxEcho || len(data) > mcpMaxEcho {
			if len(data) > mcpMaxEcho {
				data = nil
			}
			cut := *r
			cut.Error = &jsonrpc.Error{Code: code, Message: short(text, mcpMaxEcho), Data: data}
			msg = &cut
		}
	}
	return b.Connection.Write(ctx, msg)
}

// boundToolErrors is the server's middleware that cuts a JSON-RPC error's message to
// mcpMaxEcho bytes and the text of a tool error result (isError) to mcpMaxTool bytes: the SDK's validation of a tool's arguments quotes
// property names the client sent, and a message longer than that says nothing more.
func boundToolErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil && len(err.Error()) > mcpMaxEcho {
			// Over HTTP no connection of ours sees the error (boundedErrors does over stdio).
			var wire *jsonrpc.Error
			code := int64(jsonrpc.CodeInternalError)
			if errors.As(err, &wire) {
				code = wire.Code
			}
			err = &jsonrpc.Error{Code: code, Message: short(err.Error(), mcpMaxEcho)}
		}
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok && len(tc.Text) > mcpMaxTool {
					tc.Text = short(tc.Text, mcpMaxTool)
				}
			}
		}
		return res, err
	}
}

// lockedWriter writes whole messages, one at a time; closing it leaves the stream open
// (it is the process's stdout).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// checkedLines is the client's stream as the SDK reads it: only lines that checkLine
// passes, each ending in a newline.
type checkedLines struct {
	in      *bufio.Reader
	out     io.Writer
	pending []byte
	err     error // the stream's end, once reached
}

func (c *checkedLines) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		line, tooLong, err := c.next()
		if err != nil {
			c.err = err
		}
		var reply []byte
		if tooLong {
			reply = rpcError(nil, jsonrpc.CodeParseError, fmt.Sprintf("parse error: a message longer than %d bytes", mcpMaxLine))
		} else {
			c.pending, reply = checkLine(line)
		}
		if reply != nil {
			if _, err := c.out.Write(reply); err != nil {
				return 0, err
			}
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *checkedLines) Close() error { return nil }

// next reads one line, without its newline; a line longer than mcpMaxLine is read to its
// end and dropped (tooLong). err is the stream's end (io.EOF) or failure, after the last
// line.
func (c *checkedLines) next() (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := c.in.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > mcpMaxLine+1 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return buf, tooLong, err
		}
		return bytes.TrimSuffix(buf, []byte("\n")), tooLong, nil
	}
}

// checkLine decides what becomes of one line of the client's: pass is what the SDK reads
// (the message, trimmed, with a newline; nil for none), reply what is answered instead
// (nil for nothing).
func checkLine(line []byte) (pass, reply []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	if !json.Valid(line) {
		err := json.Unmarshal(line, new(json.RawMessage)) // says why
		return nil, rpcError(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON: "+short(fmt.Sprint(err), mcpMaxEcho))
	}
	if line[0] == '[' {
		return nil, rpcError(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 removed them): send one message per line")
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		return nil, rpcError(requestID(line), jsonrpc.CodeInvalidRequest, "invalid request: "+short(err.Error(), mcpMaxEcho))
	}
	return append(line, '\n'), nil
}

// requestID is the id of a message that could not be decoded, when it can be read and is
// short: a string or a number. Otherwise nil (null).
func requestID(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || len(m.ID) > mcpMaxEcho {
		return nil
	}
	var id any
	if json.Unmarshal(m.ID, &id) != nil {
		return nil
	}
	switch id.(type) {
	case string, float64:
		return m.ID
	}
	return nil
}

// rpcError is a JSON-RPC error response, as one line.
func rpcError(id json.RawMessage, code int, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	return append(b, '\n')
}

// short cuts s to at most n bytes on a rune boundary, saying so.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:n], len(s))
}

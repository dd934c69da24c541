package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scopeProbe is go-sdk's server as foundry mcp makes it (newSDKServer), mounted as foundry
// mcp -http mounts it (httpHandler, with authorization), whose tools only record that they
// ran and with which arguments, as go-sdk decoded them.
type scopeProbe struct {
	h        http.Handler
	resource string
	mu       sync.Mutex
	ran      []string // "validate", "apply", "cap_echo", "propose JOB"
}

func (p *scopeProbe) record(what string) {
	p.mu.Lock()
	p.ran = append(p.ran, what)
	p.mu.Unlock()
}

func newScopeProbe(tb testing.TB, issuer crypto.PublicKey) *scopeProbe {
	p := &scopeProbe{resource: "http://127.0.0.1:1/mcp"}
	s := &mcpServer{srv: newSDKServer(io.Discard), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	type none struct{}
	ran := func(name string) func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, none, error) {
		return func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, none, error) {
			p.record(name)
			return nil, none{}, nil
		}
	}
	for _, name := range []string{"validate", "jobs", "apply", capToolPrefix + "echo"} {
		mcp.AddTool(s.srv, &mcp.Tool{Name: name}, ran(name))
	}
	type proposal struct {
		Job string `json:"job"`
	}
	mcp.AddTool(s.srv, &mcp.Tool{Name: "propose"}, func(_ context.Context, _ *mcp.CallToolRequest, in proposal) (*mcp.CallToolResult, none, error) {
		p.record("propose " + in.Job)
		return nil, none{}, nil
	})
	a := &mcpAuth{issuers: map[string][]crypto.PublicKey{"ops": {issuer}}, order: []string{"ops"}}
	h, err := s.httpHandler(&mcpHTTPConfig{addr: "127.0.0.1:1", sessions: 1 << 16, idle: time.Minute, resource: p.resource, auth: a})
	if err != nil {
		tb.Fatal(err)
	}
	p.h = h
	return p
}

// post sends one message with headers to the probe and returns the status and the
// response's headers.
func (p *scopeProbe) post(method string, headers map[string]string, body []byte) (int, http.Header) {
	r := httptest.NewRequest(method, p.resource, strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	p.h.ServeHTTP(w, r)
	return w.Code, w.Header()
}

// scopeOracle is the scope each recorded run needs, written out from spec/mcp.md §6 rather
// than taken from requiredScope: validate and jobs read; apply needs apply; cap_echo needs
// call:echo or call:*; propose JOB needs propose:JOB or propose:*.
func scopeOracle(ran string, scopes []string) bool {
	has := func(s ...string) bool {
		for _, x := range s {
			if slices.Contains(scopes, x) {
				return true
			}
		}
		return false
	}
	switch {
	case ran == "validate", ran == "jobs":
		return has("read")
	case ran == "apply":
		return has("apply")
	case ran == "cap_echo":
		return has("call:echo", "call:*")
	case strings.HasPrefix(ran, "propose "):
		return has("propose:"+strings.TrimPrefix(ran, "propose "), "propose:*")
	}
	return false
}

// FuzzMCPScope: whatever message a host sends over HTTP, with whatever token (valid with
// any scopes, expired, for another audience, signed by another key, garbage, none), within
// a session or not, no tool runs that the request's own token does not grant, and nothing
// panics. The session is opened with a valid token of the same subject, so that a token
// that has expired or lost scopes since is what the call carries.
func FuzzMCPScope(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p := newScopeProbe(f, key.Public())
	call := func(id, params string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`)
	}
	for _, c := range []struct {
		variant uint8
		scope   string
		body    []byte
	}{
		{0, "read", call("1", `{"name":"validate","arguments":{}}`)},
		{0, "read", call("2", `{"name":"apply","arguments":{}}`)},
		{0, "apply", call("3", `{"name":"apply","arguments":{}}`)},
		{0, "call:echo", call("4", `{"name":"cap_echo","arguments":{}}`)},
		{0, "call:*", call("5", `{"name":"cap_echo"}`)},
		{0, "propose:j1", call("6", `{"name":"propose","arguments":{"job":"j2"}}`)},
		{0, "propose:j1", call("7", `{"name":"propose","arguments":{"job":"j1","JOB":"j2"}}`)},
		{0, "read", call("8", `{"NAME":"validate","name":"apply","arguments":{}}`)},
		{0, "read", call("9", `{"name":"validate","name":"apply"}`)},
		{0, "read", []byte(`{"jsonrpc":"2.0","id":10,"method":"ping","method":"tools/call","params":{"name":"apply"}}`)},
		{0, "read", []byte(`[` + string(call("11", `{"name":"apply"}`)) + `]`)},
		{0, "read apply", call(`"x"`, `{"name":"apply","arguments":{}}`)},
		{1, "apply", call("12", `{"name":"apply","arguments":{}}`)},
		{2, "apply", call("13", `{"name":"apply","arguments":{}}`)},
		{3, "apply", call("14", `{"name":"apply","arguments":{}}`)},
		{4, "apply", call("15", `{"name":"apply","arguments":{}}`)},
		{5, "apply", call("16", `{"name":"apply","arguments":{}}`)},
		{0, "call:echo", []byte(initializeBody)},
		{0, "read", call("17", `{"name":"cap_\u0065cho","arguments":{}}`)},
	} {
		f.Add(c.variant, c.scope, c.body, true)
		f.Add(c.variant, c.scope, c.body, false)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, variant uint8, scope string, body []byte, inSession bool) {
		mint := func(k crypto.Signer, aud string, ttl time.Duration, at time.Time) string {
			tok, err := mintToken(k, "ops", "host", aud, []string{scope}, ttl, at)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		valid := mint(key, p.resource, time.Hour, now)
		var tok string
		switch variant % 6 {
		case 0:
			tok = valid
		case 1: // expired an hour ago
			tok = mint(key, p.resource, time.Hour, now.Add(-2*time.Hour))
		case 2:
			tok = mint(key, "http://127.0.0.1:2/mcp", time.Hour, now)
		case 3:
			tok = mint(other, p.resource, time.Hour, now)
		case 4:
			tok = scope // not a JWT
		case 5: // no token
		}
		headers := map[string]string{}
		if tok != "" {
			headers["Authorization"] = "Bearer " + tok
		}
		if inSession {
			own := map[string]string{"Authorization": "Bearer " + valid}
			code, h := p.post("POST", own, []byte(initializeBody))
			sid := h.Get("Mcp-Session-Id")
			if code != 200 || sid == "" {
				t.Fatalf("initialize with a valid token: %d", code)
			}
			own["Mcp-Session-Id"], own["Mcp-Protocol-Version"] = sid, "2025-11-25"
			if code, _ := p.post("POST", own, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); code != 202 {
				t.Fatalf("initialized: %d", code)
			}
			defer func() {
				if code, _ := p.post("DELETE", own, nil); code != 204 {
					t.Fatalf("closing the session: %d", code)
				}
			}()
			headers["Mcp-Session-Id"], headers["Mcp-Protocol-Version"] = sid, "2025-11-25"
		}
		p.mu.Lock()
		p.ran = nil
		p.mu.Unlock()
		p.post("POST", headers, body)
		p.mu.Lock()
		ran := slices.Clone(p.ran)
		p.mu.Unlock()
		for _, r := range ran {
			if variant%6 != 0 {
				t.Fatalf("%s ran with token variant %d (not a valid one), body %q", r, variant%6, body)
			}
			if !scopeOracle(r, strings.Fields(scope)) {
				t.Fatalf("%s ran with scopes %q, body %q", r, scope, body)
			}
		}
	})
}

// The probe is not vacuous: a call its token grants runs, with the arguments go-sdk decoded.
func TestMCPScopeProbe(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p := newScopeProbe(t, key.Public())
	tok, err := mintToken(key, "ops", "host", p.resource, []string{"read", "propose:j1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"Authorization": "Bearer " + tok}
	code, hdr := p.post("POST", h, []byte(initializeBody))
	if code != 200 {
		t.Fatalf("initialize: %d", code)
	}
	h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = hdr.Get("Mcp-Session-Id"), "2025-11-25"
	p.post("POST", h, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	for _, c := range []string{`{"name":"validate"}`, `{"name":"propose","arguments":{"job":"j1"}}`, `{"name":"apply"}`, `{"name":"propose","arguments":{"job":"j2"}}`} {
		p.post("POST", h, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+c+`}`))
	}
	if want := []string{"validate", "propose j1"}; !slices.Equal(p.ran, want) {
		t.Errorf("ran %q, want %q", p.ran, want)
	}
}

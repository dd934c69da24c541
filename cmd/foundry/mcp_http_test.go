package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpHTTPServer is a running `foundry mcp -http` process.
type mcpHTTPServer struct {
	url  string // http://HOST:PORT/mcp
	mu   sync.Mutex
	logs strings.Builder // its stderr
}

func (s *mcpHTTPServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// startMCPHTTP starts the real `foundry mcp -C dir -http 127.0.0.1:0 args...` and waits
// until it listens; the test's end stops it with SIGTERM and checks that it stopped cleanly.
func startMCPHTTP(t *testing.T, dir string, args ...string) *mcpHTTPServer {
	t.Helper()
	cmd := exec.Command(foundryBin, append([]string{"mcp", "-C", dir, "-executor", "runc", "-http", "127.0.0.1:0"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &mcpHTTPServer{}
	listening := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan error, 1)
		go func() { <-done; waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil || !strings.Contains(s.log(), "foundry mcp: stopped") {
				t.Errorf("foundry mcp -http did not stop cleanly on SIGTERM: %v\n%s", err, s.log())
			}
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("foundry mcp -http did not stop within 30s of SIGTERM:\n%s", s.log())
		}
	})
	select {
	case u := <-listening:
		s.url = u
		return s
	case <-done:
		t.Fatalf("foundry mcp -http exited before listening:\n%s", s.log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("foundry mcp -http did not listen within 2 minutes:\n%s", s.log())
	}
	return nil
}

// bearer adds a bearer token to every request a client sends.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP connects a go-sdk client to the server at url, with token when not "".
func connectHTTP(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{}
	if token != "" {
		hc.Transport = bearer{token}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "foundry-test-http", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// rawPost sends one request to the server as the test writes it: method, headers (a
// value "" removes the header), body; it returns the status, the headers and the body.
func rawPost(t *testing.T, method, url string, headers map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	// An SSE stream of a request's answer ends with it; read what came within a second.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// openSession initializes a session by hand and returns its id.
func openSession(t *testing.T, url string, headers map[string]string) string {
	t.Helper()
	code, h, body := rawPost(t, "POST", url, headers, initializeBody)
	if code != 200 || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	sid := h.Get("Mcp-Session-Id")
	hs := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	for k, v := range headers {
		hs[k] = v
	}
	if code, _, body := rawPost(t, "POST", url, hs, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != 202 {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

// The real server over HTTP serves what it serves over stdio: the same tools, the same
// results, the same declared error of a capability called in a sandbox.
func TestMCPHTTP(t *testing.T) {
	dir := appliedMCPProject(t)
	srv := startMCPHTTP(t, dir)
	cs, err := connectHTTP(t, srv.url, "")
	if err != nil {
		t.Fatalf("connecting: %v\n%s", err, srv.log())
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated %s", v)
	}
	overHTTP := listTools(t, cs)
	overStdio := listTools(t, connectStdio(t, dir))
	a, _ := json.Marshal(overHTTP)
	b, _ := json.Marshal(overStdio)
	if string(a) != string(b) {
		t.Errorf("tools over HTTP differ from stdio:\n%s\n%s", a, b)
	}
	if !slices.Contains(toolNames(overHTTP), "cap_echo") {
		t.Errorf("no cap_echo over HTTP: %v", toolNames(overHTTP))
	}
	if res := callTool(t, cs, "cap_echo", map[string]any{"text": "over http"}); res.IsError || resultText(res) != `{"text":"over http"}` {
		t.Errorf("cap_echo: %s", resultText(res))
	}
	if res := callTool(t, cs, "cap_echo", map[string]any{"text": "boom"}); !res.IsError || !strings.Contains(resultText(res), `"error":"invalid_input"`) || !strings.Contains(resultText(res), `"exit_code":2`) {
		t.Errorf("cap_echo boom: %s", resultText(res))
	}
}

// What foundry mcp -http refuses at its start: plain HTTP on an address that is not
// loopback without -allow-remote, half a TLS configuration, HTTP flags without -http.
func TestMCPHTTPRefusesToExpose(t *testing.T) {
	dir := writeMCPProject(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-http", "0.0.0.0:0"}, "is not a loopback address"},
		{[]string{"-http", "192.0.2.1:8080"}, "add -allow-remote"},
		{[]string{"-http", "127.0.0.1:0", "-tls-cert", "x.pem"}, "go together"},
		{[]string{"-token-issuer", "a=b"}, "go with -http"},
		{[]string{"-http", "127.0.0.1:0", "-max-sessions", "0"}, "-max-sessions"},
		{[]string{"-http", "127.0.0.1:0", "-token-issuer", "ops"}, "ISSUER=PUBLIC-KEY-PEM"},
	} {
		code, _, stderr := runCLI(t, append([]string{"mcp", "-C", dir}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// Attacks on the transport, through the binary: DNS rebinding (Host, Origin), requests of
// a session without or with an unsupported MCP-Protocol-Version, unknown and closed
// session ids, oversized and malformed bodies, more sessions than the bound.
func TestMCPHTTPAttacks(t *testing.T) {
	dir := writeMCPProject(t)
	srv := startMCPHTTP(t, dir, "-max-sessions", "3")
	port := strings.TrimPrefix(strings.TrimSuffix(srv.url, "/mcp"), "http://127.0.0.1:")
	expect := func(what string, code int, body string, want int, wantBody string) {
		t.Helper()
		if code != want || !strings.Contains(body, wantBody) {
			t.Errorf("%s: %d %q, want %d with %q", what, code, short(body, 300), want, wantBody)
		}
	}
	code, _, body := rawPost(t, "POST", srv.url, map[string]string{"Origin": "http://evil.example"}, initializeBody)
	expect("a foreign Origin", code, body, 403, "may not use this server")
	code, _, body = rawPost(t, "POST", srv.url, map[string]string{"Host": "evil.example:" + port, "Origin": ""}, initializeBody)
	expect("a rebound Host", code, body, 403, "invalid Host")
	code, _, body = rawPost(t, "POST", srv.url, map[string]string{"Origin": "http://localhost:" + port}, initializeBody)
	expect("the server's own origin under another loopback name", code, body, 200, `"protocolVersion":"2025-11-25"`)

	sid := openSession(t, srv.url, nil)
	session := func(more map[string]string) map[string]string {
		h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
		for k, v := range more {
			h[k] = v
		}
		return h
	}
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	code, _, body = rawPost(t, "POST", srv.url, session(nil), ping)
	expect("ping", code, body, 200, `"id":7`)
	code, _, body = rawPost(t, "POST", srv.url, session(map[string]string{"Mcp-Protocol-Version": ""}), ping)
	expect("no MCP-Protocol-Version", code, body, 400, "MCP-Protocol-Version header is required")
	code, _, body = rawPost(t, "POST", srv.url, session(map[string]string{"Mcp-Protocol-Version": "2024-11-05"}), ping)
	expect("an unsupported MCP-Protocol-Version", code, body, 400, "Unsupported protocol version")
	code, _, body = rawPost(t, "POST", srv.url, session(nil), `{"jsonrpc":"2.0","id":8,`)
	expect("malformed JSON", code, body, 400, `"code":-32700`)
	code, _, body = rawPost(t, "POST", srv.url, session(nil), `[`+ping+`]`)
	expect("a batch", code, body, 400, `"code":-32600`)
	code, _, body = rawPost(t, "POST", srv.url, session(nil), `{"jsonrpc":"1.0","id":9,"method":"ping"}`)
	expect("a wrong JSON-RPC version", code, body, 400, `"code":-32600`)
	big := `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"validate","arguments":{"x":"` + strings.Repeat("a", mcpMaxLine) + `"}}}`
	code, _, body = rawPost(t, "POST", srv.url, session(nil), big)
	expect("a body over 16 MiB", code, body, 413, "exceeds")
	code, _, body = rawPost(t, "POST", srv.url, session(nil), `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"`+strings.Repeat("n", 1<<20)+`","arguments":{}}}`)
	if code != 200 || len(body) > 4096 || !strings.Contains(body, "unknown tool") {
		t.Errorf("a 1 MiB tool name: %d, %d bytes answered", code, len(body))
	}
	code, _, body = rawPost(t, "POST", srv.url, session(map[string]string{"Mcp-Session-Id": "FORGED"}), ping)
	expect("an unknown session id", code, body, 404, "session not found")

	// A session ends with DELETE; its id is not accepted again.
	code, _, body = rawPost(t, "DELETE", srv.url, session(nil), "")
	expect("DELETE", code, body, 204, "")
	code, _, body = rawPost(t, "POST", srv.url, session(nil), ping)
	expect("a replayed session id", code, body, 404, "session not found")

	// At most -max-sessions at once (3): the first of the attacks above opened one too.
	openSession(t, srv.url, nil)
	openSession(t, srv.url, nil)
	code, h, body := rawPost(t, "POST", srv.url, nil, initializeBody)
	expect("a fourth session", code, body, 503, "3 sessions are open")
	if h.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
}

// A host that loses its stream mid-call reconnects with Last-Event-ID and gets the answer it
// missed from the event store.
func TestMCPHTTPResumesStreams(t *testing.T) {
	dir := writeMCPProject(t)
	srv := startMCPHTTP(t, dir)
	sid := openSession(t, srv.url, nil)
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	code, _, body := rawPost(t, "POST", srv.url, h, `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"validate","arguments":{}}}`)
	if code != 200 {
		t.Fatalf("validate: %d %s", code, body)
	}
	// The stream's first event (the priming one) is where a host that lost everything after
	// it resumes from.
	first := regexp.MustCompile(`(?m)^id: (\S+)`).FindStringSubmatch(body)
	if first == nil || !strings.Contains(body, `"id":21`) {
		t.Fatalf("validate's stream: %s", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", first[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	replay, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(replay), `"id":21`) || !strings.Contains(string(replay), `"valid":true`) {
		t.Errorf("resuming after %s: %d %s", first[1], resp.StatusCode, replay)
	}
}

// mintCLI runs `foundry mcp token` and returns the token.
func mintCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := runCLI(t, append([]string{"mcp", "token"}, args...)...)
	if code != 0 {
		t.Fatalf("mcp token %v: %d %s", args, code, stderr)
	}
	return strings.TrimSpace(out)
}

// keygenCLI makes a key pair PREFIX.key, PREFIX.pub in dir.
func keygenCLI(t *testing.T, dir, name string) string {
	t.Helper()
	prefix := filepath.Join(dir, name)
	if code, _, stderr := runCLI(t, "keygen", "-out", prefix); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	return prefix
}

// Authorization, attacked through the binary: a request without a token, or with one of the
// wrong audience, signature, issuer, or expired, is 401 naming the protected resource
// metadata; a call outside the token's scopes is 403 insufficient_scope and nothing runs; a
// session is bound to the token's subject; a token that expires mid-session loses its
// authority at the next call; no token reaches the log or the project's files.
func TestMCPHTTPAuthorization(t *testing.T) {
	dir := writeMCPProject(t)
	keys := t.TempDir()
	ops, evil := keygenCLI(t, keys, "ops"), keygenCLI(t, keys, "evil")
	srv := startMCPHTTP(t, dir, "-token-issuer", "ops="+ops+".pub", "-allow", "apply")
	aud := srv.url
	mint := func(args ...string) string {
		return mintCLI(t, append([]string{"-key", ops + ".key", "-issuer", "ops", "-audience", aud}, args...)...)
	}
	metadata := strings.TrimSuffix(srv.url, "/mcp") + "/.well-known/oauth-protected-resource/mcp"

	code, h, body := rawPost(t, "POST", srv.url, nil, initializeBody)
	if code != 401 || h.Get("WWW-Authenticate") != `Bearer resource_metadata="`+metadata+`"` {
		t.Errorf("no token: %d %q %s", code, h.Get("WWW-Authenticate"), body)
	}
	code, _, body = rawPost(t, "GET", metadata, nil, "")
	var md struct {
		Resource string   `json:"resource"`
		Scopes   []string `json:"scopes_supported"`
	}
	if json.Unmarshal([]byte(body), &md); code != 200 || md.Resource != srv.url || !slices.Contains(md.Scopes, "read") {
		t.Errorf("protected resource metadata: %d %s", code, body)
	}

	read := mint("-scope", "read")
	var tokens []string
	for what, tok := range map[string]string{
		"wrong audience":  mintCLI(t, "-key", ops+".key", "-issuer", "ops", "-audience", "http://127.0.0.1:1/mcp", "-scope", "read"),
		"wrong signature": mintCLI(t, "-key", evil+".key", "-issuer", "ops", "-audience", aud, "-scope", "read"),
		"wrong issuer":    mintCLI(t, "-key", ops+".key", "-issuer", "evil", "-audience", aud, "-scope", "read"),
		"tampered scope":  tamper(t, read, `"scope":"read"`, `"scope":"apply"`),
		"not a JWT":       "not-a-token",
	} {
		tokens = append(tokens, tok)
		code, h, body := rawPost(t, "POST", srv.url, map[string]string{"Authorization": "Bearer " + tok}, initializeBody)
		if code != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Errorf("%s: %d %q %s", what, code, h.Get("WWW-Authenticate"), body)
		}
	}

	// Scopes: read may read and not apply, nor call a capability; nothing runs.
	cs, err := connectHTTP(t, srv.url, read)
	if err != nil {
		t.Fatalf("connecting with a read token: %v\n%s", err, srv.log())
	}
	if res := callTool(t, cs, "validate", map[string]any{}); res.IsError {
		t.Errorf("validate with read: %s", resultText(res))
	}
	for tool, scope := range map[string]string{"apply": "apply", "cap_echo": "call:echo"} {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), "insufficient_scope") || !strings.Contains(err.Error(), scope) {
			t.Errorf("%s with read: %v, want insufficient_scope naming %s", tool, err, scope)
		}
	}
	sid := openSession(t, srv.url, map[string]string{"Authorization": "Bearer " + read})
	code, h, body = rawPost(t, "POST", srv.url, map[string]string{"Authorization": "Bearer " + read, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"apply","arguments":{}}}`)
	if code != 403 || !strings.Contains(h.Get("WWW-Authenticate"), `error="insufficient_scope", scope="apply"`) || !strings.Contains(body, `"id":31`) {
		t.Errorf("apply with read: %d %q %s", code, h.Get("WWW-Authenticate"), body)
	}
	// A body that names one tool to a case-insensitive reader and another to go-sdk's.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"apply","NAME":"validate","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"NAME":"validate","name":"apply","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":33,"method":"tools/call","METHOD":"ping","params":{"name":"apply","arguments":{}}}`,
	} {
		code, _, resp := rawPost(t, "POST", srv.url, map[string]string{"Authorization": "Bearer " + read, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}, body)
		if code != 403 || !strings.Contains(resp, "insufficient_scope") {
			t.Errorf("%s with read: %d %s", body, code, resp)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".foundry", "state.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused apply left state: %v", err)
	}

	// A session is bound to the token's issuer and subject: another subject's token cannot
	// use its id.
	bob := mint("-scope", "read", "-subject", "bob")
	tokens = append(tokens, bob)
	code, _, body = rawPost(t, "POST", srv.url, map[string]string{"Authorization": "Bearer " + bob, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":32,"method":"ping"}`)
	if code != 403 || !strings.Contains(body, "session user mismatch") {
		t.Errorf("another subject's token on the session: %d %s", code, body)
	}

	// A token that expires mid-session: the next call is refused, saying how to get another.
	brief := mint("-scope", "read", "-expires", "3s")
	tokens = append(tokens, read, brief)
	short, err := connectHTTP(t, srv.url, brief)
	if err != nil {
		t.Fatalf("connecting with a 3s token: %v", err)
	}
	if res := callTool(t, short, "validate", map[string]any{}); res.IsError {
		t.Errorf("validate before expiry: %s", resultText(res))
	}
	time.Sleep(4 * time.Second)
	_, err = short.CallTool(context.Background(), &mcp.CallToolParams{Name: "validate", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("validate after expiry: %v", err)
	}
	code, h, body = rawPost(t, "POST", srv.url, map[string]string{"Authorization": "Bearer " + brief}, initializeBody)
	if code != 401 || !strings.Contains(body, "token is expired") || !strings.Contains(body, "foundry mcp token") || !strings.Contains(h.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Errorf("an expired token: %d %q %s", code, h.Get("WWW-Authenticate"), body)
	}

	// No token reached the server's log or the project's files.
	log := srv.log()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			log += string(b)
		}
		return nil
	})
	for _, tok := range tokens {
		if sig := tok[strings.LastIndex(tok, ".")+1:]; strings.Contains(log, sig) {
			t.Errorf("a token's signature is in the log or the project's files")
		}
	}
}

// tamper replaces old with new in the JWT's payload, keeping its signature.
func tamper(t *testing.T, tok, old, new string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	p, err := jwtB64.DecodeString(parts[1])
	if err != nil || !strings.Contains(string(p), old) {
		t.Fatalf("payload %s: %v", p, err)
	}
	parts[1] = jwtB64.EncodeToString([]byte(strings.Replace(string(p), old, new, 1)))
	return strings.Join(parts, ".")
}

// jwtB64 is JWS's base64url without padding.
var jwtB64 = base64.RawURLEncoding

// foundry mcp token refuses what would make a token that means nothing or leaks: unknown
// scopes, no key or audience, a lifetime that is not positive, a key others can read.
func TestMCPTokenRefuses(t *testing.T) {
	keys := t.TempDir()
	ops := keygenCLI(t, keys, "ops")
	aud := "http://127.0.0.1:1/mcp"
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-key", ops + ".key", "-audience", aud, "-scope", "admin"}, exitUsage, "unknown"},
		{[]string{"-key", ops + ".key", "-audience", aud, "-scope", "call:"}, exitUsage, "unknown"},
		{[]string{"-key", ops + ".key", "-audience", aud}, exitUsage, "at least one scope"},
		{[]string{"-audience", aud, "-scope", "read"}, exitUsage, "-key and -audience"},
		{[]string{"-key", ops + ".key", "-audience", "mcp", "-scope", "read"}, exitUsage, "want the server's URL"},
		{[]string{"-key", ops + ".key", "-audience", aud, "-scope", "read", "-expires", "-1s"}, exitUsage, "positive"},
		{[]string{"-key", ops + ".pub", "-audience", aud, "-scope", "read"}, exitError, "signing key"},
	} {
		code, out, stderr := runCLI(t, append([]string{"mcp", "token"}, c.args...)...)
		if code != c.code || out != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, %s; want %d and %q", c.args, code, out, stderr, c.code, c.want)
		}
	}
	if err := os.Chmod(ops+".key", 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "mcp", "token", "-key", ops+".key", "-audience", aud, "-scope", "read"); code != exitError || !strings.Contains(stderr, "lets others read it") {
		t.Errorf("a key others can read: exit %d, %s", code, stderr)
	}
}

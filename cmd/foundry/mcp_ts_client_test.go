package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// A second host from another ecosystem: the TypeScript SDK's client (scripts/mcp-sdk.sh,
// make test-tools), driven by testdata/mcp-ts-client.cjs over stdio and over Streamable
// HTTP with a bearer token.

// tsClientModules is the installed SDK's node_modules, or skips; with CI=true a missing one
// fails.
func tsClientModules(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "..", ".test-tools", "mcp-sdk", "node_modules"))
	if _, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol", "sdk", "package.json")); err == nil {
		if _, err := exec.LookPath("node"); err == nil {
			return dir
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the MCP TypeScript SDK is not installed in %s: CI must install it (make test-tools runs scripts/mcp-sdk.sh)", dir)
	}
	t.Skipf("the MCP TypeScript SDK is not installed (run scripts/mcp-sdk.sh): %s", dir)
	return ""
}

// tsStep is what the script printed for one step.
type tsStep struct {
	Tools json.RawMessage `json:"tools"`
	// A call's: how many responses to its request reached the client, and over HTTP the
	// event IDs the SDK kept to resume its stream with.
	Responses        int      `json:"responses"`
	ResumptionTokens []string `json:"resumptionTokens"`
	Result           *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error string `json:"error"`
}

func (s tsStep) text() string {
	if s.Result == nil || len(s.Result.Content) == 0 {
		return ""
	}
	return s.Result.Content[0].Text
}

// runTSClient runs the script with steps against target (stdio: a command line; http: a
// URL, with token) and returns what it printed per step.
func runTSClient(t *testing.T, modules, token string, steps []map[string]any, mode string, target ...string) []tsStep {
	t.Helper()
	sj, _ := json.Marshal(steps)
	cmd := exec.Command("node", append([]string{filepath.Join("testdata", "mcp-ts-client.cjs"), string(sj), mode}, target...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "MCP_TOKEN="+token, "HOME="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("mcp-ts-client %s: %v\n%s\n%s", mode, err, out.String(), errb.String())
	}
	var res []tsStep
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil || len(res) != len(steps) {
		t.Fatalf("mcp-ts-client %s printed %q: %v", mode, out.String(), err)
	}
	return res
}

// The TypeScript SDK's client, over stdio and over HTTP, discovers the same tools (the
// capability's contract digest in its description, its schemas), gets the same result and
// the same declared error from the capability; over HTTP a call outside its token's scopes is
// refused with insufficient_scope, and a token that expires loses its authority at the next
// call.
func TestMCPTypeScriptClient(t *testing.T) {
	modules := tsClientModules(t)
	dir := appliedMCPProject(t)
	keys := t.TempDir()
	ops := keygenCLI(t, keys, "ops")
	srv := startMCPHTTP(t, dir, "-allow", "apply", "-token-issuer", "ops="+ops+".pub")
	mint := func(args ...string) string {
		return mintCLI(t, append([]string{"-key", ops + ".key", "-issuer", "ops", "-audience", srv.url}, args...)...)
	}
	steps := []map[string]any{
		{"list": true},
		{"call": "cap_echo", "args": map[string]any{"text": "from ts"}},
		{"call": "cap_echo", "args": map[string]any{"text": "boom"}},
	}
	stdio := runTSClient(t, modules, "", steps, "stdio", foundryBin, "mcp", "-C", dir, "-executor", "runc", "-allow", "apply")
	http := runTSClient(t, modules, mint("-scope", "read,call:echo"), append(steps, map[string]any{"call": "apply", "args": map[string]any{}}), "http", srv.url)
	if string(stdio[0].Tools) != string(http[0].Tools) || !strings.Contains(string(http[0].Tools), `"cap_echo"`) {
		t.Errorf("tools over stdio and HTTP differ:\n%s\n%s", stdio[0].Tools, http[0].Tools)
	}
	for i, r := range [][]tsStep{stdio, http} {
		if r[1].Error != "" || r[1].Result.IsError || r[1].text() != `{"text":"from ts"}` {
			t.Errorf("%d: cap_echo: %+v", i, r[1])
		}
		if r[2].Error != "" || !r[2].Result.IsError || !strings.Contains(r[2].text(), `"error":"invalid_input"`) {
			t.Errorf("%d: cap_echo boom: %+v", i, r[2])
		}
	}
	if stdio[2].text() != http[2].text() {
		t.Errorf("the declared error differs:\n%s\n%s", stdio[2].text(), http[2].text())
	}
	if e := http[3].Error; !strings.Contains(e, "insufficient_scope") || !strings.Contains(e, `needs the scope \"apply\"`) {
		t.Errorf("apply outside the token's scopes: %+v", http[3])
	}

	// The token lives 15 s: node's start and the first call must fit in it on a loaded
	// machine (4 s did not, once, at load 20).
	expiring := runTSClient(t, modules, mint("-scope", "call:echo", "-expires", "15s"), []map[string]any{
		{"call": "cap_echo", "args": map[string]any{"text": "in time"}},
		{"sleep": 16000},
		{"call": "cap_echo", "args": map[string]any{"text": "too late"}},
	}, "http", srv.url)
	if expiring[0].text() != `{"text":"in time"}` {
		t.Errorf("before expiry: %+v", expiring[0])
	}
	if e := expiring[2].Error; !strings.Contains(e, "token is expired") || !strings.Contains(e, "foundry mcp token") {
		t.Errorf("after expiry: %+v", expiring[2])
	}
}

// streamCutter is a proxy in front of `foundry mcp -http` that breaks the network under a
// host: the first tools/call's SSE stream is cut (the connection dropped, as a failing
// network drops it) right after its priming event, while the call runs, and before any
// message on it reaches the host. Everything else it forwards as it comes.
type streamCutter struct {
	url   string // the proxy's /mcp
	mu    sync.Mutex
	cut   string    // what the host got of the stream that was cut ("" until one is)
	cutAt time.Time // when it was cut
	// lastEventIDs are the Last-Event-ID headers of the GET requests that resumed a stream.
	lastEventIDs []string
}

// sseMessage matches an SSE event that carries data (a priming event's data is empty), sseID
// one with an ID.
var sseMessage, sseID = regexp.MustCompile(`(?m)^data: ?\S`), regexp.MustCompile(`(?m)^id: \S`)

func startStreamCutter(t *testing.T, target string) *streamCutter {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: to.Scheme, Host: to.Host})
	forward.FlushInterval = -1
	c := &streamCutter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		cutting := c.cut == "" && r.Method == "POST"
		if id := r.Header.Get("Last-Event-ID"); r.Method == "GET" && id != "" {
			c.lastEventIDs = append(c.lastEventIDs, id)
		}
		c.mu.Unlock()
		if !cutting {
			forward.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			forward.ServeHTTP(w, r)
			return
		}
		req := r.Clone(r.Context())
		req.URL.Scheme, req.URL.Host, req.Host, req.RequestURI = to.Scheme, to.Host, "", ""
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		// Pass the events on up to the first with an ID (the priming event, sent as the call
		// starts), then drop the connection while the call runs. A message that comes
		// first is not passed on.
		var got strings.Builder
		rd := bufio.NewReader(resp.Body)
		for {
			var event strings.Builder
			for {
				line, err := rd.ReadString('\n')
				event.WriteString(line)
				if err != nil || line == "\n" {
					break
				}
			}
			if event.Len() == 0 || sseMessage.MatchString(event.String()) {
				break
			}
			got.WriteString(event.String())
			w.Write([]byte(event.String()))
			w.(http.Flusher).Flush()
			if sseID.MatchString(event.String()) {
				break
			}
		}
		c.mu.Lock()
		c.cut, c.cutAt = "["+got.String()+"]", time.Now()
		c.mu.Unlock()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL + "/mcp"
	return c
}

// durableDelivered is testdata/accept's durable product alone (its service accepted through
// its HTTP interface, with a restart between requests), delivered to dir:dest.
func durableDelivered(t *testing.T, dest string) string {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "accept"), dir)
	b, err := os.ReadFile(filepath.Join(dir, "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	src, _, ok := strings.Cut(string(b), "\nproduct \"forgetful\"")
	if !ok || !strings.HasSuffix(src, "  }\n}\n") {
		t.Fatalf("testdata/accept/main.hcl changed: %s", b)
	}
	src = strings.TrimSuffix(src, "}\n") + `  deliver {
    to    = "dir:` + dest + `"
    files = { "/srv" = step.server.output["/out/srv"] }
    start = ["/srv/start"]
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The product workflow through the TypeScript SDK's client over HTTP, on a network that
// breaks: with an apply token, the client applies a product whose delivery the operator's
// grants file (-grants) allows; the apply's stream is cut before its result, and the SDK
// resumes it itself (GET with Last-Event-ID, the event it last saw) and gets the result
// once. The run summary it then reads shows the product accepted and delivered, with the
// receipt verified; the release is on disk and foundry verify accepts it.
func TestMCPTypeScriptClientDelivers(t *testing.T) {
	modules := tsClientModules(t)
	needSandbox(t)
	dest := filepath.Join(t.TempDir(), "releases")
	dir := durableDelivered(t, dest)
	grants := filepath.Join(t.TempDir(), "grants.hcl")
	if err := os.WriteFile(grants, []byte(`grant "deliver" { to = ["dir:`+dest+`"] }`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := t.TempDir()
	ops := keygenCLI(t, keys, "ops")
	srv := startMCPHTTP(t, dir, "-allow", "apply", "-grants", grants, "-token-issuer", "ops="+ops+".pub")
	token := mintCLI(t, "-key", ops+".key", "-issuer", "ops", "-audience", srv.url, "-scope", "read,apply")
	cutter := startStreamCutter(t, srv.url)

	r := runTSClient(t, modules, token, []map[string]any{
		{"call": "apply", "args": map[string]any{}, "timeout": 300000},
		{"call": "run_summary", "args": map[string]any{}},
	}, "http", cutter.url)
	var a applyOut
	if r[0].Error != "" || r[0].Result == nil || json.Unmarshal([]byte(r[0].text()), &a) != nil || a.Outcome != "complete" {
		t.Fatalf("apply through a cut stream: %+v\n%s\n%s", r[0], r[0].text(), srv.log())
	}
	// The stream was cut after its priming event and before the result; the SDK resumed
	// from that event, and the result reached the client once.
	cutter.mu.Lock()
	cut, cutAt, resumed := cutter.cut, cutter.cutAt, cutter.lastEventIDs
	cutter.mu.Unlock()
	t.Logf("cut after %q; resumed with Last-Event-ID %q", cut, resumed)
	if len(r[0].ResumptionTokens) == 0 || !strings.Contains(cut, "id: "+r[0].ResumptionTokens[0]+"\n") ||
		len(resumed) == 0 || resumed[0] != r[0].ResumptionTokens[0] {
		t.Errorf("the SDK did not resume the cut stream from its last event: cut %q, resumption tokens %q, Last-Event-IDs %q",
			cut, r[0].ResumptionTokens, resumed)
	}
	if r[0].Responses != 1 {
		t.Errorf("the apply's result reached the client %d times, want once", r[0].Responses)
	}

	var sum runReport
	if r[1].Error != "" || json.Unmarshal([]byte(r[1].text()), &sum) != nil || sum.Run != a.RunID {
		t.Fatalf("run_summary: %+v (apply's run %s)", r[1], a.RunID)
	}
	if end := sum.Started.Add(time.Duration(sum.WallUS) * time.Microsecond); !cutAt.Before(end) {
		t.Errorf("the stream was cut at %v, after the apply ended (%v): it was not cut mid-call", cutAt, end)
	}
	events := map[string]string{}
	for _, e := range sum.CapabilityEvents {
		events[e.Type+" "+e.Capability] = e.Ref
	}
	if _, ok := events["product_accepted product.durable"]; !ok {
		t.Errorf("the run summary does not show product.durable accepted: %+v", sum.CapabilityEvents)
	}
	rels := releases(t, dest)
	if len(rels) != 1 {
		t.Fatalf("want one release under %s, have %v", dest, rels)
	}
	rel := filepath.Join(dest, rels[0])
	if loc := events["product_delivered product.durable"]; loc != "dir:"+rel {
		t.Errorf("the run summary's delivery is at %q, want dir:%s", loc, rel)
	}
	if len(sum.Receipts) != 1 || !sum.Receipts[0].Verified || sum.Receipts[0].Location != "dir:"+rel {
		t.Errorf("the run summary's receipts: %+v", sum.Receipts)
	}
	if _, err := os.Stat(filepath.Join(rel, "files", "srv", "start")); err != nil {
		t.Errorf("the delivered service: %v", err)
	}
	key := filepath.Join(dir, ".foundry", "keys", "signing.pub")
	if code, out, errs := foundry(t, dir, "verify", "-key", key, rel); code != 0 {
		t.Errorf("verify of the delivered release and its receipt: exit %d\n%s\n%s", code, out, errs)
	}
}

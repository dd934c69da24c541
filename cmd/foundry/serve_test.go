package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/invoke"
	"github.com/foundry-build/foundry/registry"
)

// The HTTP mapping of a call's outcomes, with a stand-in for the sandbox: the output, a
// declared error and each kind of failure get their own status, and a failure is always a
// problem document, never a body that looks like a domain error.
func TestServeHandlerMapsOutcomes(t *testing.T) {
	sorter := invoke.Capability{Name: "sorter", Address: "capability.sorter", Kind: "cli", Contract: digest.FromBytes([]byte("c")),
		Ref: "oci-layout:/r@sha256:" + strings.Repeat("a", 64), InputSchema: json.RawMessage(`{"type":"array"}`),
		OutputSchema: json.RawMessage(`{"$defs":{"n":{"type":"integer"}},"type":"array","items":{"$ref":"#/$defs/n"}}`), Errors: map[string]int{"invalid_input": 2}}
	call := func(ctx context.Context, c invoke.Capability, in invoke.Input) (*invoke.Result, error) {
		switch string(in.JSON()) {
		case `[2,1]`:
			return &invoke.Result{Output: json.RawMessage(`[1,2]`)}, nil
		case `[0]`:
			return &invoke.Result{ExitCode: 2, Error: "invalid_input", Stderr: "no zeros"}, nil
		case `[1]`:
			return nil, &invoke.OutputError{Reason: "it exited with 3, which is not a declared error code"}
		case `[2]`:
			return nil, fmt.Errorf("pulling: %w", &registry.QuarantinedError{Digest: "sha256:x", Reason: "withdrawn"})
		}
		return nil, errors.New("runc: no such file")
	}
	h, err := newServeHandler("p", []invoke.Capability{sorter}, call, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string // the body, or a part of a problem's
	}{
		{"POST", "/capabilities/sorter", `[2, 1]`, 200, "[1,2]\n"},
		{"POST", "/capabilities/sorter", `[0]`, 422, `{"error":"invalid_input","exit_code":2,"stderr":"no zeros"}` + "\n"},
		{"POST", "/capabilities/sorter", `"x"`, 400, `"type":"https://foundry.dev/problems/input-invalid"`},
		{"POST", "/capabilities/sorter", `x`, 400, `"detail":"the input is not JSON: at byte 0: unexpected 'x', want a JSON value"`},
		{"POST", "/capabilities/sorter", "[" + strings.Repeat("1,", invoke.MaxInputValues) + "1]", 413, `more than 262144 JSON values`},
		{"POST", "/capabilities/sorter", `[1]`, 502, `"detail":"it exited with 3, which is not a declared error code"`},
		{"POST", "/capabilities/sorter", `[2]`, 403, `withdrawn`},
		{"POST", "/capabilities/sorter", `[3]`, 500, `runc: no such file`},
		{"POST", "/capabilities/other", `[]`, 404, `no-such-capability`},
		{"GET", "/capabilities/sorter", ``, 405, `use POST`},
		{"POST", "/openapi.json", ``, 405, `use GET`},
		{"GET", "/", ``, 404, `POST /capabilities/NAME`},
		{"POST", "/capabilities/sorter", strings.Repeat(" ", maxCallInput+1), 413, `input-too-large`},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ct := resp.Header.Get("Content-Type")
		wantCT := "application/problem+json"
		if c.status == 200 || c.status == 422 {
			wantCT = "application/json"
		}
		if resp.StatusCode != c.status || ct != wantCT || (c.status == 200 || c.status == 422) && string(b) != c.want || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %s %.20q: %d %s %s, want %d %s %s", c.method, c.path, c.body, resp.StatusCode, ct, b, c.status, wantCT, c.want)
		}
	}

	// The document embeds the schemas as stored; one with "#" references gets an $id of
	// its own so that they resolve within it.
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, _ := io.ReadAll(resp.Body)
	if got := openAPIServer(t, doc); got != srv.URL {
		t.Errorf("the document's server is %q, want %q (where it was fetched)", got, srv.URL)
	}
	schemas := openAPISchemas(t, bytes.NewReader(doc))
	if got := compactJSON(t, schemas["sorter.input"]); got != `{"type":"array"}` {
		t.Errorf("input schema served as %s", got)
	}
	if got := compactJSON(t, schemas["sorter.output"]); got != `{"$id":"urn:foundry:capability:sorter:output","$defs":{"n":{"type":"integer"}},"type":"array","items":{"$ref":"#/$defs/n"}}` {
		t.Errorf("output schema served as %s", got)
	}
}

// openAPIServer returns the URL of an OpenAPI document's one server.
func openAPIServer(t *testing.T, doc []byte) string {
	t.Helper()
	var d struct{ Servers []struct{ URL string } }
	if err := json.Unmarshal(doc, &d); err != nil || len(d.Servers) != 1 {
		t.Fatalf("servers of the document: %v %+v", err, d.Servers)
	}
	return d.Servers[0].URL
}

// openAPISchemas returns the component schemas of an OpenAPI document, as served.
func openAPISchemas(t *testing.T, r io.Reader) map[string]json.RawMessage {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc.Components.Schemas
}

// validOpenAPI fails the test unless an independent validator (kin-openapi's, for OpenAPI
// 3.1 with JSON Schema 2020-12) finds doc a valid OpenAPI 3.1 document. It resolves a
// schema's "#" references against the document, not against the schema's own $id as JSON
// Schema 2020-12 says, so it is given documents without them (int-sort's).
func validOpenAPI(t *testing.T, doc []byte) {
	t.Helper()
	loader := openapi3.NewLoader()
	parsed, err := loader.LoadFromData(doc)
	if err != nil {
		t.Fatalf("the OpenAPI document does not load: %v\n%s", err, doc)
	}
	if !parsed.IsOpenAPI31OrLater() {
		t.Errorf("the OpenAPI document is version %s, want 3.1", parsed.OpenAPI)
	}
	if err := parsed.Validate(loader.Context); err != nil {
		t.Errorf("the OpenAPI document is not valid OpenAPI: %v\n%s", err, doc)
	}
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return buf.String()
}

// The blueprint's measured interface case over loopback HTTP: examples/int-sort admitted
// by apply, then called through foundry serve, a separate process, by a plain HTTP client.
// The six valid inputs of intSortInterfaceCases (shared with TestMCPIntSort) give the
// literal expected values, its nine invalid ones are refused with the validator's message
// before anything runs, the schemas of /openapi.json are the contract's stored schemas byte
// for byte, and a quarantine is honoured at the next call.
func TestServeIntSort(t *testing.T) {
	needSandbox(t)
	needGoToolchain(t)
	dir := copyExample(t, "int-sort")
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	base := startServe(t, dir)

	post := func(body string) (int, string, string) {
		t.Helper()
		resp, err := http.Post(base+"/capabilities/int-sort", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	for _, c := range intSortInterfaceCases.valid {
		status, ct, body := post(c.input)
		if status != 200 || ct != "application/json" || body != c.want+"\n" {
			t.Errorf("%s: %d %s %.200s, want 200 %.200s", c.name, status, ct, body, c.want)
		}
	}
	for _, c := range intSortInterfaceCases.invalid {
		status, ct, body := post(c.input)
		var p struct{ Type, Detail string }
		json.Unmarshal([]byte(body), &p)
		if status != 400 || ct != "application/problem+json" || p.Type != problemBase+"input-invalid" ||
			p.Detail != "the input violates the input schema: "+c.want {
			t.Errorf("%s: %d %s %.300s, want 400 with %q", c.name, status, ct, body, c.want)
		}
	}

	// The schemas served are the contract's as the registry stores them (its config blob).
	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	validOpenAPI(t, doc)
	if got := openAPIServer(t, doc); got != base {
		t.Errorf("the document's server is %q, want %q", got, base)
	}
	schemas := openAPISchemas(t, bytes.NewReader(doc))
	in, out, tree := storedSchemas(t, dir)
	if got := compactJSON(t, schemas["int-sort.input"]); got != in {
		t.Errorf("input schema served:\n%s\nstored:\n%s", got, in)
	}
	if got := compactJSON(t, schemas["int-sort.output"]); got != out {
		t.Errorf("output schema served:\n%s\nstored:\n%s", got, out)
	}
	for _, want := range []string{`"openapi": "3.1.1"`, `"operationId": "int-sort"`, `"$ref": "#/components/schemas/int-sort.input"`,
		`"$ref": "#/components/schemas/int-sort.output"`, `invalid_input (exit 2)`, `"400"`, `"502"`} {
		if !bytes.Contains(doc, []byte(want)) {
			t.Errorf("the OpenAPI document lacks %s", want)
		}
	}

	// A version quarantined while it is served is refused at the next call (its tree here;
	// the manifest, contract and layers likewise), and served again once lifted.
	if code, _, errs := foundry(t, dir, "quarantine", "add", string(tree), "-reason", "withdrawn for the test"); code != 0 {
		t.Fatal(errs)
	}
	if status, _, body := post(`[2, 1]`); status != 403 || !strings.Contains(body, "withdrawn for the test") {
		t.Errorf("a call of a quarantined version: %d %s", status, body)
	}
	if code, _, errs := foundry(t, dir, "quarantine", "remove", string(tree)); code != 0 {
		t.Fatal(errs)
	}
	if status, _, body := post(`[2, 1]`); status != 200 || body != "[1,2]\n" {
		t.Errorf("a call once the quarantine is lifted: %d %s", status, body)
	}
}

// storedSchemas are the input and output schemas of the contract the project's registry
// holds int-sort's admitted version under, and that version's tree.
func storedSchemas(t *testing.T, dir string) (in, out string, tree digest.Digest) {
	t.Helper()
	code, stdout, stderr := foundry(t, dir, "capabilities", "-json")
	var rows []struct {
		Registry struct{ Manifest, Tree digest.Digest }
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &rows) != nil || len(rows) != 1 || rows[0].Registry.Manifest == "" {
		t.Fatalf("capabilities: %d %s %s", code, stdout, stderr)
	}
	ctx := context.Background()
	l, err := registry.OpenLayout(filepath.Join(dir, ".foundry", "registry"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := l.Manifest(ctx, rows[0].Registry.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := registry.ParseCapability(raw)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := l.Blob(ctx, digest.Digest(m.Config.Digest))
	if err != nil {
		t.Fatal(err)
	}
	defer blob.Close()
	var contract struct {
		Interface struct{ Input, Output string }
	}
	if err := json.NewDecoder(blob).Decode(&contract); err != nil || contract.Interface.Input == "" {
		t.Fatalf("contract: %v %+v", err, contract)
	}
	return contract.Interface.Input, contract.Interface.Output, rows[0].Registry.Tree
}

// startServe starts foundry serve on a free loopback port for the project in dir, as its
// own process (group), and returns its base URL once it listens. It is stopped with
// SIGTERM at the end of the test, and must then exit 0.
func startServe(t *testing.T, dir string) string {
	t.Helper()
	base, _ := startServeProcess(t, dir)
	return base
}

// startServeProcess is startServe that also returns the server's process.
func startServeProcess(t *testing.T, dir string) (string, *os.Process) {
	t.Helper()
	cmd := exec.Command(foundryBin, "serve", "-addr", "127.0.0.1:0", "-executor", "runc")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	listening := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
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
			if err != nil || !strings.Contains(logs.String(), "foundry serve: stopped") {
				t.Errorf("serve did not stop cleanly on SIGTERM: %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("serve did not stop within 30s of SIGTERM:\n%s", logs.String())
		}
	})
	select {
	case u := <-listening:
		return u, cmd.Process
	case <-done:
		t.Fatalf("serve exited before listening:\n%s", logs.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve did not listen within 2 minutes:\n%s", logs.String())
	}
	return "", nil
}

// The same domain error and the same invalid input, over HTTP and over MCP, from one
// admitted capability (the MCP fixture's echo, whose "boom" exits with its declared error
// invalid_input): HTTP answers 422 with the error's name, exit code and stderr, MCP a tool
// error holding the same; an invalid input is a 400 problem whose detail is MCP's message.
func TestServeAndMCPAgreeOnErrors(t *testing.T) {
	dir := appliedMCPProject(t)
	base := startServe(t, dir)
	cs := connectMCP(t, testMCPConfig(t, dir), "")
	post := func(body string) (int, string, []byte) {
		t.Helper()
		resp, err := http.Post(base+"/capabilities/echo", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}

	type declaredError struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
		Stderr   string `json:"stderr"`
	}
	status, ct, body := post(`{"text":"boom"}`)
	var declared declaredError
	if err := json.Unmarshal(body, &declared); err != nil || status != 422 || ct != "application/json" ||
		declared.Error != "invalid_input" || declared.ExitCode != 2 || !strings.Contains(declared.Stderr, "boom-declared") {
		t.Errorf("POST boom: %d %s %s, want 422 naming invalid_input (exit 2) with its stderr", status, ct, body)
	}
	res := callTool(t, cs, "cap_echo", map[string]any{"text": "boom"})
	var viaMCP declaredError
	json.Unmarshal([]byte(resultText(res)), &viaMCP)
	if !res.IsError || viaMCP.Error != declared.Error || viaMCP.ExitCode != declared.ExitCode || viaMCP.Stderr != declared.Stderr {
		t.Errorf("cap_echo boom: isError %v, %s; HTTP said %s", res.IsError, resultText(res), body)
	}

	status, ct, body = post(`{"text":5}`)
	var p struct{ Type, Detail string }
	json.Unmarshal(body, &p)
	res = callTool(t, cs, "cap_echo", map[string]any{"text": 5})
	if status != 400 || ct != "application/problem+json" || p.Type != problemBase+"input-invalid" || p.Detail == "" {
		t.Errorf("POST {text: 5}: %d %s %s, want a 400 input-invalid problem", status, ct, body)
	}
	if !res.IsError || resultText(res) != "invalid input: "+p.Detail {
		t.Errorf("cap_echo {text: 5}: isError %v, %q; want %q", res.IsError, resultText(res), "invalid input: "+p.Detail)
	}
}

// Serve refuses what it cannot do safely or usefully before it listens: a non-loopback
// address without -allow-remote (it has no authentication), and a project with nothing
// admitted.
func TestServeRefusesBeforeListening(t *testing.T) {
	project, tool := testdata(t)
	dir := t.TempDir()
	copyTree(t, project, dir)
	if code, _, errs := runCLI(t, "serve", "-addr", "0.0.0.0:0", "-C", dir); code != exitUsage || !strings.Contains(errs, "not a loopback address") {
		t.Errorf("non-loopback -addr: exit %d\n%s", code, errs)
	}
	if code, _, errs := runCLI(t, "serve", "-executor", "local", "-unsandboxed", "-C", dir); code != exitUsage || !strings.Contains(errs, "capability calls run only in a sandbox") {
		t.Errorf("-executor local: exit %d\n%s", code, errs)
	}
	if code, _, errs := runCLI(t, "serve", "-C", dir, "extra"); code != exitUsage || !strings.Contains(errs, "unexpected arguments") {
		t.Errorf("an argument: exit %d\n%s", code, errs)
	}
	if code, _, errs := runCLI(t, "serve", "-addr", "127.0.0.1:0", "-var", "tool="+tool, "-C", dir); code != exitError || !strings.Contains(errs, "nothing to serve") {
		t.Errorf("nothing admitted: exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, ".foundry", "state.db")); err == nil {
		t.Error("serve with nothing to serve made the project's state database")
	}
}

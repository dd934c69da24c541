package verdict

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/lang"
)

// service returns a service contract with HTTP error statuses.
func service(eq, in, out string) *lang.Capability {
	return &lang.Capability{
		Name:        "svc",
		Equivalence: eq,
		Interface: &lang.Interface{
			Kind: "service", Entrypoint: []string{"/bin/svc"}, Port: 8080,
			InputSchema: in, OutputSchema: out,
			Errors: map[string]int{"invalid_input": 400, "too_large": 413},
		},
	}
}

// checkServiceCase asserts what every accepted service case must satisfy.
func checkServiceCase(t *testing.T, c *lang.Capability, k *Case) {
	t.Helper()
	if len(k.Requests) == 0 || len(k.Requests) > MaxRequests || k.Input != nil {
		t.Fatalf("service case with %d requests, input %q", len(k.Requests), k.Input)
	}
	for i, r := range k.Requests {
		if !requestMethods[r.Method] || !lang.ValidHTTPPath(r.Path) || (r.Method == "GET" && r.Input != nil) {
			t.Fatalf("request %d: %+v", i, r)
		}
		if r.Input != nil && !json.Valid(r.Input) {
			t.Fatalf("request %d: input %q is not JSON", i, r.Input)
		}
		n := 0
		if r.Expect.Output != nil {
			n++
		}
		if r.Expect.Stdout != nil {
			n++
		}
		if r.Expect.Error != "" {
			n++
			if _, ok := c.Interface.Errors[r.Expect.Error]; !ok {
				t.Fatalf("undeclared error %q accepted", r.Expect.Error)
			}
		}
		if n != 1 {
			t.Fatalf("request %d has %d expectations", i, n)
		}
	}
}

func TestParseServiceCase(t *testing.T) {
	c := service("json", intList, intList)
	k := mustCase(t, c, `{"description":"sort then fail","requests":[
		{"path":"/sort","input":[9223372036854775807, 1],"output":[1,9223372036854775807]},
		{"method":"PUT","path":"/sort?x=1","input":[1],"output":[1]},
		{"path":"/count","output":[2]},
		{"path":"/sort","input":"nope","error":"invalid_input"}]}`)
	checkServiceCase(t, c, k)
	if k.Description != "sort then fail" || len(k.Requests) != 4 {
		t.Fatalf("%+v", k)
	}
	r := k.Requests
	if r[0].Method != "POST" || string(r[0].Input) != "[9223372036854775807,1]" || string(r[0].Expect.Output) != "[1,9223372036854775807]" {
		t.Errorf("request 0: %+v (a request with input defaults to POST; values kept as written)", r[0])
	}
	if r[1].Method != "PUT" || r[1].Path != "/sort?x=1" {
		t.Errorf("request 1: %+v", r[1])
	}
	if r[2].Method != "GET" || r[2].Input != nil {
		t.Errorf("request 2: %+v (no input defaults to GET with no body)", r[2])
	}
	if r[3].Expect.Error != "invalid_input" {
		t.Errorf("request 3: %+v", r[3])
	}
	if got := r[0].Describe(); got != "POST /sort [9223372036854775807,1]" {
		t.Errorf("Describe = %q", got)
	}
	b := mustCase(t, service("bytes", "", ""), `{"requests":[{"method":"DELETE","path":"/x","body":"gone\n"}]}`)
	if b.Requests[0].Expect.Stdout == nil || *b.Requests[0].Expect.Stdout != "gone\n" {
		t.Errorf("body: %+v", b.Requests[0])
	}
}

func TestParseServiceCaseRefuses(t *testing.T) {
	c := service("json", intList, intList)
	for _, tc := range []struct{ name, file, want string }{
		{"no requests", `{"description":"x"}`, "missing requests"},
		{"empty requests", `{"requests":[]}`, "non-empty list"},
		{"requests not a list", `{"requests":{"path":"/"}}`, "non-empty list"},
		{"unknown member", `{"requests":[{"path":"/","output":[1]}],"input":1}`, `unknown member "input"`},
		{"request not an object", `{"requests":[1]}`, "requests[0]: a request is a JSON object"},
		{"misspelt output", `{"requests":[{"path":"/","ouput":[1]}]}`, `requests[0]: unknown member "ouput"`},
		{"no path", `{"requests":[{"output":[1]}]}`, "path must be"},
		{"relative path", `{"requests":[{"path":"sort","output":[1]}]}`, "path must be"},
		{"path with space", `{"requests":[{"path":"/a b","output":[1]}]}`, "path must be"},
		{"path with fragment", `{"requests":[{"path":"/a#b","output":[1]}]}`, "path must be"},
		{"scheme-relative path", `{"requests":[{"path":"//evil.example/","output":[1]}]}`, "path must be"},
		{"bad method", `{"requests":[{"method":"HEAD","path":"/","output":[1]}]}`, "method must be"},
		{"lower-case method", `{"requests":[{"method":"post","path":"/","input":[1],"output":[1]}]}`, "method must be"},
		{"GET with input", `{"requests":[{"method":"GET","path":"/","input":[1],"output":[1]}]}`, "GET request carries no input"},
		{"no expectation", `{"requests":[{"path":"/","input":[1]}]}`, "needs one of output, body or error"},
		{"two expectations", `{"requests":[{"path":"/","input":[1],"output":[1],"error":"invalid_input"}]}`, "both output and error"},
		{"unknown error", `{"requests":[{"path":"/","input":1,"error":"nope"}]}`, `error "nope" is not declared`},
		{"body under json", `{"requests":[{"path":"/","input":[1],"body":"[1]"}]}`, "body is for the bytes and lines"},
		{"output violates schema", `{"requests":[{"path":"/","input":[1],"output":["a"]}]}`, "violates the output schema"},
		{"input violates schema", `{"requests":[{"path":"/","input":["a"],"output":[1]}]}`, "requests[0]: input violates the input schema"},
		{"second request bad", `{"requests":[{"path":"/","output":[1]},{"path":"/"}]}`, "requests[1]: needs one of"},
		{"too many", `{"requests":[` + strings.Repeat(`{"path":"/","output":[1]},`, MaxRequests) + `{"path":"/","output":[1]}]}`, "at most 1000"},
		{"duplicate key in request", `{"requests":[{"path":"/","path":"/x","output":[1]}]}`, "duplicate object member name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseCase("cases/x.json", []byte(tc.file), c)
			if err == nil {
				t.Fatalf("accepted: %+v", k)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "case cases/x.json: ") {
				t.Fatalf("error %q, want it to name the case and contain %q", err, tc.want)
			}
		})
	}
}

func TestJudgeResponse(t *testing.T) {
	c := service("json", intList, intList)
	k := mustCase(t, c, `{"requests":[{"path":"/sort","input":[2,1,1],"output":[1,1,2]},{"path":"/sort","input":"x","error":"invalid_input"}]}`)
	sorted, errReq := &k.Requests[0], &k.Requests[1]
	for _, tc := range []struct {
		name   string
		r      *Request
		resp   Response
		pass   bool
		reason string
	}{
		{"equal", sorted, Response{Status: 200, Body: []byte("[1,1,2]")}, true, ""},
		{"equal with whitespace, 201", sorted, Response{Status: 201, Body: []byte(" [1, 1, 2]\n")}, true, ""},
		{"dropped duplicate", sorted, Response{Status: 200, Body: []byte("[1,2]")}, false, "output differs"},
		{"not JSON", sorted, Response{Status: 200, Body: []byte("1 1 2")}, false, "body is not JSON"},
		{"schema-invalid", sorted, Response{Status: 200, Body: []byte(`["1"]`)}, false, "violates the output schema"},
		{"server error", sorted, Response{Status: 500, Body: []byte("boom")}, false, "answered 500 (not a declared error status), want 2xx"},
		{"declared error instead of output", sorted, Response{Status: 400}, false, `answered 400 (error "invalid_input"), want 2xx`},
		{"redirect", sorted, Response{Status: 302}, false, "want 2xx"},
		{"truncated", sorted, Response{Status: 200, Body: []byte("[1,1,"), Truncated: true}, false, "exceeded the output limit"},
		{"expected error", errReq, Response{Status: 400, Body: []byte("bad")}, true, ""},
		{"wrong error", errReq, Response{Status: 413}, false, `answered 413 (error "too_large"), want 400 (error "invalid_input")`},
		{"success instead of error", errReq, Response{Status: 200, Body: []byte("[]")}, false, "answered 200, want 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeResponse(c, tc.r, tc.resp)
			if v.Pass != tc.pass || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("got %+v, want pass=%v reason containing %q", v, tc.pass, tc.reason)
			}
			if !v.Pass && (v.Expected == "" || v.Got == "") {
				t.Fatalf("a failure must show expected and got: %+v", v)
			}
		})
	}
	if v := JudgeResponse(capability("json", "", "", nil), sorted, Response{Status: 200, Body: []byte("[1,1,2]")}); v.Pass || !strings.HasPrefix(v.Reason, "cannot judge") {
		t.Errorf("judging a cli contract's response: %+v", v)
	}
	b := service("lines", "", "")
	kb := mustCase(t, b, `{"requests":[{"path":"/","body":"a\nb\n"}]}`)
	if v := JudgeResponse(b, &kb.Requests[0], Response{Status: 200, Body: []byte("a\r\nb")}); !v.Pass {
		t.Errorf("lines: %+v", v)
	}
	if v := JudgeResponse(b, &kb.Requests[0], Response{Status: 200, Body: []byte("a\nc\n")}); v.Pass || v.Reason != "line 2 differs" {
		t.Errorf("lines: %+v", v)
	}
	by := service("bytes", "", "")
	kby := mustCase(t, by, `{"requests":[{"path":"/","body":"ok"}]}`)
	if v := JudgeResponse(by, &kby.Requests[0], Response{Status: 200, Body: []byte("ok!")}); v.Pass || !strings.HasPrefix(v.Reason, "body has 1 bytes after") {
		t.Errorf("bytes: %+v", v)
	}
}

// An acceptance case may restart the service between two requests; a capability's case may
// not, and a restart is exactly {"restart": true}, never first, last or twice in a row.
func TestParseAcceptanceCaseRestarts(t *testing.T) {
	c := service("json", intList, "")
	get := `{"path":"/s?id=1","output":[1]}`
	k, err := ParseAcceptanceCase("ok.json", []byte(`{"requests":[`+get+`,{"restart":true},`+get+`]}`), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Requests) != 3 || k.Requests[0].Restart || !k.Requests[1].Restart || k.Requests[2].Restart || k.Requests[1].Describe() != "(restart)" {
		t.Fatalf("requests %+v", k.Requests)
	}
	for _, tc := range []struct{ name, requests, want string }{
		{"first", `{"restart":true},` + get, "requests[0]: a restart comes between two requests"},
		{"last", get + `,{"restart":true}`, "requests[1]: a restart comes between two requests"},
		{"twice", get + `,{"restart":true},{"restart":true},` + get, "requests[2]: a restart comes between two requests"},
		{"false", get + `,{"restart":false},` + get, `requests[1]: a restart is {"restart": true}, with no other member`},
		{"with a path", get + `,{"restart":true,"path":"/"},` + get, `requests[1]: a restart is {"restart": true}, with no other member`},
	} {
		if _, err := ParseAcceptanceCase("c.json", []byte(`{"requests":[`+tc.requests+`]}`), c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParseCase("cap.json", []byte(`{"requests":[`+get+`,{"restart":true},`+get+`]}`), c); err == nil || !strings.Contains(err.Error(), "a restart is for a product's acceptance cases") {
		t.Errorf("a capability's case with a restart: %v", err)
	}
}

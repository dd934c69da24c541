package verdict

import (
	"strings"
	"testing"

	"github.com/foundry-build/foundry/lang"
)

func resp(status int, ct, body string) Response {
	return Response{Status: status, ContentType: ct, Body: []byte(body)}
}

// JudgeEffect compares one step of a trace: status, then media type, then (for 2xx) the
// body under the contract's schema and equivalence; the body of another status is not
// compared.
func TestJudgeEffect(t *testing.T) {
	jsonSvc := service("json", "", intList)
	unordered := service("json", "", intList)
	unordered.Unordered = true
	numeric := service("numeric", "", "")
	numeric.Tolerance = &lang.Tolerance{Absolute: 0.01}
	bytesSvc := service("bytes", "", "")
	for _, tc := range []struct {
		name      string
		c         *lang.Capability
		want, got Response
		reason    string // "" passes
	}{
		{"same body, other spacing", jsonSvc, resp(200, "application/json", "[1, 2]\n"), resp(200, "application/json; charset=utf-8", "[1,2]"), ""},
		{"media type case and parameters ignored", jsonSvc, resp(200, "Application/JSON", "[1]"), resp(200, "application/json;charset=UTF-8", "[1]"), ""},
		{"other value", jsonSvc, resp(200, "application/json", "[1,2]"), resp(200, "application/json", "[1,3]"), "output differs at $[1]"},
		{"other status", jsonSvc, resp(200, "application/json", "[1]"), resp(201, "application/json", "[1]"), "answered status 201, the reference 200"},
		{"other error status", jsonSvc, resp(404, "application/json", "{}"), resp(400, "application/json", "{}"), "answered status 400, the reference 404"},
		{"error bodies not compared", jsonSvc, resp(404, "application/json", `{"error":"a"}`), resp(404, "application/json", "gone"), ""},
		{"other media type", jsonSvc, resp(200, "application/json", "[1]"), resp(200, "text/plain", "[1]"), "answered content-type text/plain, the reference content-type application/json"},
		{"missing media type", jsonSvc, resp(200, "application/json", "[1]"), resp(200, "", "[1]"), "answered no content-type"},
		{"schema still applies", jsonSvc, resp(200, "application/json", "[1]"), resp(200, "application/json", `["1"]`), "output violates the output schema"},
		{"unordered", unordered, resp(200, "application/json", "[1,2,2]"), resp(200, "application/json", "[2,1,2]"), ""},
		{"ordered", jsonSvc, resp(200, "application/json", "[1,2,2]"), resp(200, "application/json", "[2,1,2]"), "output differs"},
		{"within tolerance", numeric, resp(200, "application/json", `{"x":1.5}`), resp(200, "application/json", `{"x":1.505}`), ""},
		{"beyond tolerance", numeric, resp(200, "application/json", `{"x":1.5}`), resp(200, "application/json", `{"x":1.6}`), "output differs at $.x"},
		{"bytes exact", bytesSvc, resp(200, "text/plain", "a\n"), resp(200, "text/plain", "a\n"), ""},
		{"bytes differ", bytesSvc, resp(200, "text/plain", "a\n"), resp(200, "text/plain", "a \n"), "differs"},
		{"cut off", jsonSvc, resp(200, "application/json", "[1]"), Response{Status: 200, ContentType: "application/json", Body: []byte("[1"), Truncated: true}, "exceeded the output limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeEffect(tc.c, tc.want, tc.got)
			if tc.reason == "" {
				if !v.Pass {
					t.Fatalf("failed: %s", v.Describe())
				}
				return
			}
			if v.Pass || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("got %+v, want a failure with %q", v, tc.reason)
			}
			// A request carrying the reference's effect is judged by it, not by an expectation.
			r := &Request{Method: "GET", Path: "/", Want: &tc.want}
			if w := JudgeResponse(tc.c, r, tc.got); w.Pass || w.Reason != v.Reason {
				t.Fatalf("JudgeResponse with Want: %+v, JudgeEffect: %+v", w, v)
			}
		})
	}
	if v := JudgeEffect(capability("json", "", "", nil), resp(200, "", "1"), resp(200, "", "1")); v.Pass || !strings.HasPrefix(v.Reason, "cannot judge") {
		t.Errorf("a cli contract: %+v", v)
	}
}

// A reference's response can be expected only when the contract could judge it.
func TestReferenceEffect(t *testing.T) {
	c := service("json", "", intList)
	for _, tc := range []struct {
		r   Response
		why string
	}{
		{resp(200, "application/json", "[1,2]\n"), ""},
		{resp(404, "text/html", "<h1>no</h1>"), ""},
		{resp(200, "text/html", "<h1>hi</h1>"), "not JSON"},
		{resp(200, "application/json", `["a"]`), "output violates the output schema"},
		{Response{Status: 200, Body: []byte("[1"), Truncated: true}, "longer than the output limit"},
	} {
		if why := ReferenceEffect(c, tc.r); (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("ReferenceEffect(%d %q) = %q, want %q", tc.r.Status, tc.r.Body, why, tc.why)
		}
	}
}

// A trace case's requests name no expectation; everything else is a service case's rules.
func TestParseTraceCase(t *testing.T) {
	c := service("json", intList, intList)
	k, err := ParseTraceCase("t.json", []byte(`{"requests":[{"path":"/sort","input":["not","ints"]},{"path":"/count"}]}`), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Requests) != 2 || k.Requests[0].Method != "POST" || k.Requests[1].Method != "GET" || k.Requests[0].Expect.Text() != k.Requests[1].Expect.Text() {
		t.Fatalf("parsed %+v", k.Requests)
	}
	for file, want := range map[string]string{
		`{"requests":[{"path":"/a"},{"path":"/b","output":[1]}]}`:     "case t.json: requests[1]: output: the suite expects the reference's response",
		`{"requests":[{"path":"/a","error":"invalid_input"}]}`:        "requests[0]: error: the suite expects",
		`{"requests":[{"path":"/a"},{"restart":true},{"path":"/b"}]}`: "requests[1]: a restart is for a product's acceptance cases",
		`{"requests":[]}`:                    "requests must be a non-empty list",
		`{"requests":[{"path":"a"}]}`:        "requests[0]: path must be",
		`{"requests":[{"path":"/a","x":1}]}`: `unknown member "x"`,
	} {
		if _, err := ParseTraceCase("t.json", []byte(file), c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTraceCase(%s): %v, want %q", file, err, want)
		}
	}
	// A hand-written service case still needs its expectations.
	if _, err := ParseCase("t.json", []byte(`{"requests":[{"path":"/a"}]}`), c); err == nil {
		t.Errorf("ParseCase accepted a request without an expectation")
	}
}

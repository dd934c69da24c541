package verdict

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/foundry-build/foundry/lang"
)

// MaxRequests bounds the exchanges of one service case.
const MaxRequests = 1000

// Request is one HTTP exchange of a service case.
type Request struct {
	Method string // GET, POST, PUT, PATCH or DELETE
	Path   string // request target: an absolute path with an optional query
	// Input is the request body, a JSON value kept as written (see Case.Input), sent with
	// Content-Type application/json; nil sends no body.
	Input  json.RawMessage
	Expect Expectation // Stdout holds the case's "body" (exact response text)
	// Restart, in an acceptance case only, is no exchange: the service is stopped and a
	// fresh instance started against the same data volume before the next request.
	Restart bool
	// Want, in a case of a suite that expects a reference's trace (ParseTraceCase), is the
	// reference's response to this request: the effect the candidate's must have
	// (JudgeEffect). Expect is then empty.
	Want *Response
}

// Describe renders the request for a counterexample: method, path and body.
func (r *Request) Describe() string {
	if r.Restart {
		return "(restart)"
	}
	if r.Input == nil {
		return r.Method + " " + r.Path
	}
	return r.Method + " " + r.Path + " " + string(r.Input)
}

var (
	serviceCaseFields = map[string]bool{"description": true, "requests": true}
	requestFields     = map[string]bool{"method": true, "path": true, "input": true, "output": true, "body": true, "error": true}
	requestMethods    = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}
)

// ParseAcceptanceCase parses a case file of a product's acceptance, judged by contract c
// (lang.Acceptance.Contract): a service case whose requests may include restarts,
// {"restart": true}, each between two requests (spec/capability-cases.md §9).
func ParseAcceptanceCase(name string, data []byte, c *lang.Capability) (*Case, error) {
	if c == nil || c.Interface == nil || c.Interface.Kind != "service" {
		return nil, fmt.Errorf("case %s: acceptance cases describe a service", name)
	}
	m, err := caseObject(name, data, c)
	if err != nil {
		return nil, err
	}
	return parseServiceCase(name, m, c, true, false)
}

// parseServiceCase parses the members of a service case file (already checked to be one
// strict JSON object): a description and a non-empty list of requests, with restarts
// among them when restarts is set; with trace set, requests name no expectation
// (ParseTraceCase).
func parseServiceCase(name string, m map[string]json.RawMessage, c *lang.Capability, restarts, trace bool) (*Case, error) {
	fail := func(format string, args ...any) (*Case, error) {
		return nil, fmt.Errorf("case %s: %s", name, fmt.Sprintf(format, args...))
	}
	if u := unknownMembers(m, serviceCaseFields); u != "" {
		return fail("unknown member %s; a service case has requests and an optional description", u)
	}
	k := &Case{Name: name}
	if d, ok := m["description"]; ok {
		if err := json.Unmarshal(d, &k.Description); err != nil {
			return fail("description must be a string")
		}
	}
	raw, ok := m["requests"]
	if !ok {
		return fail("missing requests (a service case is a list of HTTP requests and what each must answer)")
	}
	var reqs []json.RawMessage
	if err := json.Unmarshal(raw, &reqs); err != nil || len(reqs) == 0 {
		return fail("requests must be a non-empty list of request objects")
	}
	if len(reqs) > MaxRequests {
		return fail("%d requests; a case has at most %d", len(reqs), MaxRequests)
	}
	for i, r := range reqs {
		if isRestart(r) {
			switch {
			case !restarts:
				return fail("requests[%d]: a restart is for a product's acceptance cases: a capability's service has no data volume to keep", i)
			case string(compact(r)) != `{"restart":true}`:
				return fail("requests[%d]: a restart is {\"restart\": true}, with no other member", i)
			case i == 0 || i == len(reqs)-1 || k.Requests[i-1].Restart:
				return fail("requests[%d]: a restart comes between two requests", i)
			}
			k.Requests = append(k.Requests, Request{Restart: true})
			continue
		}
		req, err := parseRequest(r, c, trace)
		if err != nil {
			return fail("requests[%d]: %v", i, err)
		}
		k.Requests = append(k.Requests, *req)
	}
	return k, nil
}

// isRestart reports whether a request is a restart step: an object with a restart member.
// Its value must be true, and it has no other member.
func isRestart(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	_, ok := m["restart"]
	return ok
}

func parseRequest(raw json.RawMessage, c *lang.Capability, trace bool) (*Request, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("a request is a JSON object")
	}
	if u := unknownMembers(m, requestFields); u != "" {
		return nil, fmt.Errorf("unknown member %s; a request has path, optional method and input, and one of output, body or error", u)
	}
	r := &Request{}
	if err := json.Unmarshal(m["path"], &r.Path); err != nil || !lang.ValidHTTPPath(r.Path) {
		return nil, fmt.Errorf("path must be an HTTP path starting with \"/\" (printable ASCII, no spaces or fragment)")
	}
	if in, ok := m["input"]; ok {
		r.Input = compact(in)
	}
	if mm, ok := m["method"]; ok {
		if err := json.Unmarshal(mm, &r.Method); err != nil || !requestMethods[r.Method] {
			return nil, fmt.Errorf("method must be one of GET, POST, PUT, PATCH, DELETE")
		}
	} else if r.Input != nil {
		r.Method = "POST"
	} else {
		r.Method = "GET"
	}
	if r.Method == "GET" && r.Input != nil {
		return nil, fmt.Errorf("a GET request carries no input; use POST, PUT or PATCH")
	}
	if trace {
		for _, f := range []string{"output", "body", "error"} {
			if _, ok := m[f]; ok {
				return nil, fmt.Errorf("%s: the suite expects the reference's response to each request, so a request names no output, body or error", f)
			}
		}
		return r, nil
	}

	expect, err := parseExpectation(m, "body", "a request", c)
	if err != nil {
		return nil, err
	}
	r.Expect = expect
	if err := checkInput(r.Input, expect, "a request", c); err != nil {
		return nil, err
	}
	return r, nil
}

func unknownMembers(m map[string]json.RawMessage, known map[string]bool) string {
	var unknown []string
	for k := range m {
		if !known[k] {
			unknown = append(unknown, fmt.Sprintf("%q", k))
		}
	}
	sort.Strings(unknown)
	return strings.Join(unknown, ", ")
}

// Response is what the evaluator received for one request.
type Response struct {
	Status      int
	ContentType string // the Content-Type header, as sent
	Body        []byte // up to the evaluator's output limit
	Truncated   bool   // the body exceeded the output limit; Body holds a prefix
}

// JudgeResponse judges one response of a service candidate against request r of a case of
// capability c: an expected error passes exactly on its declared status; otherwise the
// status must be 2xx and the body is judged as a cli's stdout is (output schema, then the
// equivalence). Like Judge, it never fails open.
func JudgeResponse(c *lang.Capability, r *Request, resp Response) Verdict {
	if c == nil || c.Interface == nil || c.Interface.Kind != "service" || r == nil {
		return Verdict{Reason: "cannot judge: not a request of a service capability"}
	}
	if r.Want != nil {
		return JudgeEffect(c, *r.Want, resp)
	}
	want := r.Expect.Text()
	if resp.Truncated {
		return Verdict{Reason: "the response body exceeded the output limit", Expected: want, Got: quoted(resp.Body, maxShown)}
	}
	errs := c.Interface.Errors
	status := statusMeaning(resp.Status, errs)
	got := "status " + status + "; body " + quoted(resp.Body, maxShown/2)
	if name := r.Expect.Error; name != "" {
		code, ok := errs[name]
		if !ok {
			return Verdict{Reason: fmt.Sprintf("cannot judge: error %q is not declared by the contract", name)}
		}
		if resp.Status == code {
			return Verdict{Pass: true}
		}
		return Verdict{Reason: fmt.Sprintf("answered %s, want %d (error %q)", status, code, name), Expected: want, Got: got}
	}
	if resp.Status < 200 || resp.Status > 299 {
		return Verdict{Reason: fmt.Sprintf("answered %s, want 2xx (success)", status), Expected: want, Got: got}
	}
	return judgeOutput(c, &r.Expect, resp.Body, "body")
}

// statusMeaning names an HTTP status: a declared error or not.
func statusMeaning(code int, errs map[string]int) string {
	var names []string
	for n, c := range errs {
		if c == code {
			names = append(names, fmt.Sprintf("%q", n))
		}
	}
	if len(names) == 0 {
		if code >= 200 && code <= 299 {
			return fmt.Sprint(code)
		}
		return fmt.Sprintf("%d (not a declared error status)", code)
	}
	sort.Strings(names)
	return fmt.Sprintf("%d (error %s)", code, strings.Join(names, ", "))
}

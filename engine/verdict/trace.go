package verdict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"strings"

	"github.com/foundry-build/foundry/lang"
)

// A trace of effects is what a service did with a case's requests, sent in order to a
// fresh instance: for each request, the status, the media type of the response and its
// body (spec/capability-cases.md §8, "Differential service cases"). A differential case
// expects the reference's trace from an equivalent initial state: each of its requests
// carries the reference's response as Want, and JudgeResponse then judges the candidate's
// response as the same effect (JudgeEffect).

// ParseTraceCase parses a case file of a service suite that expects a reference's trace
// (lang.Suite.Expect): a service case whose requests name no expectation (no output, body or
// error: the reference's responses are what is expected), and whose inputs need not be
// valid for the input schema (what the reference answers to an invalid one is expected).
// Every other rule of ParseCase holds.
func ParseTraceCase(name string, data []byte, c *lang.Capability) (*Case, error) {
	if c == nil || c.Interface == nil || c.Interface.Kind != "service" {
		return nil, fmt.Errorf("case %s: a trace of effects is a service's", name)
	}
	m, err := caseObject(name, data, c)
	if err != nil {
		return nil, err
	}
	return parseServiceCase(name, m, c, false, true)
}

// Effect is the part of a response a trace compares: its status, its media type (the
// Content-Type without parameters, lower case; "" when none) and its body.
func Effect(resp Response) string {
	return fmt.Sprintf("status %d; %s; body %s", resp.Status, mediaLabel(resp.ContentType), quoted(resp.Body, maxShown/2))
}

func mediaLabel(ct string) string {
	if mt := mediaType(ct); mt != "" {
		return "content-type " + mt
	}
	return "no content-type"
}

// mediaType is a Content-Type's media type, lower case, without parameters; a value that
// does not parse is kept whole (trimmed, lower case), so that two such values still compare.
func mediaType(ct string) string {
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// bodyExpectation is what a reference's 2xx body makes the candidate's expect under c's
// equivalence: the value (json, numeric) or the exact text (bytes, lines).
func bodyExpectation(c *lang.Capability, body []byte) Expectation {
	switch equivalence(c) {
	case "json", "numeric":
		return Expectation{Output: json.RawMessage(bytes.Clone(compact(body)))}
	default:
		s := string(body)
		return Expectation{Stdout: &s}
	}
}

// ReferenceEffect checks that a reference's response can be an expected effect of capability
// c: its body was not cut off, and a 2xx body is what the contract allows (JSON under the
// json and numeric equivalences, valid for the output schema). why says what is wrong: the
// reference and the contract then disagree.
func ReferenceEffect(c *lang.Capability, resp Response) (why string) {
	if c == nil || c.Interface == nil || c.Interface.Kind != "service" {
		return "not a service capability"
	}
	if resp.Truncated {
		return "answered a body longer than the output limit"
	}
	if resp.Status < 200 || resp.Status > 299 {
		return ""
	}
	e := bodyExpectation(c, resp.Body)
	if len(e.Output) == 0 && (equivalence(c) == "json" || equivalence(c) == "numeric") {
		return "answered a body that is not JSON: " + quoted(resp.Body, maxShown/2)
	}
	if v := judgeOutput(c, &e, resp.Body, "body"); !v.Pass {
		return "answered " + v.Reason
	}
	return ""
}

// JudgeEffect judges a candidate's response (got) as the effect the reference had (want),
// first difference deciding: the status must be the same; then the media type; then, for a
// 2xx status, the body is judged as a cli's stdout is against the reference's body under
// the contract's output schema and equivalence (the body of another status is not compared,
// as a declared error's is not).
func JudgeEffect(c *lang.Capability, want, got Response) Verdict {
	if c == nil || c.Interface == nil || c.Interface.Kind != "service" {
		return Verdict{Reason: "cannot judge: not a service capability"}
	}
	expected := Effect(want)
	if got.Truncated {
		return Verdict{Reason: "the response body exceeded the output limit", Expected: expected, Got: quoted(got.Body, maxShown)}
	}
	if got.Status != want.Status {
		return Verdict{Reason: fmt.Sprintf("answered status %d, the reference %d", got.Status, want.Status), Expected: expected, Got: Effect(got)}
	}
	if gm, wm := mediaType(got.ContentType), mediaType(want.ContentType); gm != wm {
		return Verdict{Reason: fmt.Sprintf("answered %s, the reference %s", mediaLabel(got.ContentType), mediaLabel(want.ContentType)), Expected: expected, Got: Effect(got)}
	}
	if want.Status < 200 || want.Status > 299 {
		return Verdict{Pass: true}
	}
	e := bodyExpectation(c, want.Body)
	return judgeOutput(c, &e, got.Body, "body")
}

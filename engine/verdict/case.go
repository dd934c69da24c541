package verdict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/foundry-build/foundry/lang"
)

// MaxCaseBytes bounds a case file, as the language bounds every file it reads.
const MaxCaseBytes = 16 << 20

// Case is one parsed case file of a cli capability. See spec/capability-cases.md.
type Case struct {
	Name        string // as given to ParseCase, usually the project-relative path
	Description string // the case file's optional description; not used in judgment

	// Input is the case's input value exactly as written, with insignificant whitespace
	// removed (member order, number and string spelling kept). It is deliberately not
	// RFC 8785 canonical: JCS rounds numbers to doubles, which would hand a candidate
	// 9223372036854776000 for 9223372036854775807.
	Input json.RawMessage

	Expect Expectation

	// Requests are a service case's HTTP exchanges, sent in order to one fresh instance of
	// the candidate (Input and Expect are then unused). See spec/capability-cases.md §6.
	Requests []Request
}

// Expectation is what a case expects; exactly one of its fields is set.
type Expectation struct {
	Output json.RawMessage // expected output value, compact as written (see Case.Input)
	Stdout *string         // exact expected stdout text (bytes and lines equivalences only)
	Error  string          // name of an error of the contract's errors map
	// Contract, for a generated case (never a case file), expects only what the contract
	// says of every valid input: success with output the contract allows, or a declared
	// error; a failure Intrinsic names fails it.
	Contract bool
}

// Stdin returns the bytes fed to the candidate on standard input: the input as in Case.Input
// followed by one newline, so that line-reading programs see a complete line and any JSON
// parser sees only trailing whitespace.
func (k *Case) Stdin() []byte {
	return append(append(make([]byte, 0, len(k.Input)+1), k.Input...), '\n')
}

// caseFields are the members a case file may have; any other member is an error, so that a
// misspelled expectation cannot silently become a case that expects nothing.
var caseFields = map[string]bool{"description": true, "input": true, "output": true, "stdout": true, "error": true}

// ParseCase parses a case file of capability c strictly. It refuses, with an error naming
// the case: files over MaxCaseBytes; anything that is not a single strict JSON object (as
// digest.Canonicalize: no duplicate member names at any depth, valid UTF-8, finite numbers);
// unknown members; a missing input; not exactly one of output, stdout and error; an error
// name that is not in the contract's errors map; stdout under the json or numeric
// equivalence; an expectation that no output could meet (an expected output or stdout that
// violates the output schema; "NaN" under numeric without nan_equal); and an input that
// violates the input schema, unless the case expects an error.
func ParseCase(name string, data []byte, c *lang.Capability) (*Case, error) {
	fail := func(format string, args ...any) (*Case, error) {
		return nil, fmt.Errorf("case %s: %s", name, fmt.Sprintf(format, args...))
	}
	if c == nil || c.Interface == nil || (c.Interface.Kind != "cli" && c.Interface.Kind != "service") {
		return fail("case files describe cli and service capabilities only")
	}
	m, err := caseObject(name, data, c)
	if err != nil {
		return nil, err
	}
	if c.Interface.Kind == "service" {
		return parseServiceCase(name, m, c, false, false)
	}
	if u := unknownMembers(m, caseFields); u != "" {
		return fail("unknown member %s; a case has input, one of output, stdout or error, and an optional description", u)
	}
	k := &Case{Name: name}
	if d, ok := m["description"]; ok {
		if err := json.Unmarshal(d, &k.Description); err != nil {
			return fail("description must be a string")
		}
	}
	in, ok := m["input"]
	if !ok {
		return fail("missing input")
	}
	k.Input = compact(in)

	expect, err := parseExpectation(m, "stdout", "a case", c)
	if err != nil {
		return fail("%v", err)
	}
	k.Expect = expect
	if err := checkInput(in, expect, "a case", c); err != nil {
		return fail("%v", err)
	}
	return k, nil
}

// caseObject checks what every case file must be (§1.1–1.3 of spec/capability-cases.md:
// at most MaxCaseBytes, one strict JSON object, under a known equivalence) and returns its
// members.
func caseObject(name string, data []byte, c *lang.Capability) (map[string]json.RawMessage, error) {
	fail := func(format string, args ...any) (map[string]json.RawMessage, error) {
		return nil, fmt.Errorf("case %s: %s", name, fmt.Sprintf(format, args...))
	}
	eq := equivalence(c)
	if !knownEquivalence[eq] {
		return fail("capability %q has unknown equivalence %q", c.Name, eq)
	}
	if len(data) > MaxCaseBytes {
		return fail("%d bytes; case files are limited to %d", len(data), MaxCaseBytes)
	}
	if _, err := decodeStrict(data); err != nil {
		return fail("not valid JSON: %v", err)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fail("a case file is a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fail("%v", err)
	}
	return m, nil
}

// parseExpectation reads exactly one of output, the exact-text member (text: "stdout" for a
// cli case, "body" for a service request) and error from m, and refuses an expectation
// that no candidate could meet. what names the holder ("a case", "a request") in messages.
func parseExpectation(m map[string]json.RawMessage, text, what string, c *lang.Capability) (Expectation, error) {
	var e Expectation
	var given []string
	for _, f := range []string{"output", text, "error"} {
		if _, ok := m[f]; ok {
			given = append(given, f)
		}
	}
	switch len(given) {
	case 0:
		return e, fmt.Errorf("needs one of output, %s or error", text)
	case 1:
	default:
		return e, fmt.Errorf("has both %s and %s; %s expects exactly one of output, %s or error", given[0], given[1], what, text)
	}
	it, eq := c.Interface, equivalence(c)
	switch given[0] {
	case "error":
		if err := json.Unmarshal(m["error"], &e.Error); err != nil || e.Error == "" {
			return e, fmt.Errorf("error must be the name of an error of the contract")
		}
		if _, ok := it.Errors[e.Error]; !ok {
			return e, fmt.Errorf("error %q is not declared by capability %q (declared: %s)", e.Error, c.Name, errorNames(it.Errors))
		}
	case text:
		if eq == "json" || eq == "numeric" {
			return e, fmt.Errorf("%s is for the bytes and lines equivalences; capability %q compares with %s, so give output", text, c.Name, eq)
		}
		var s string
		if err := json.Unmarshal(m[text], &s); err != nil {
			return e, fmt.Errorf("%s must be a string", text)
		}
		e.Stdout = &s
		if it.OutputSchema != "" {
			v, err := decodeStrict([]byte(s))
			if err != nil {
				return e, fmt.Errorf("%s is not JSON, but the output schema requires JSON: %v", text, err)
			}
			if err := validate(it.OutputSchema, v); err != nil {
				return e, fmt.Errorf("expected %s violates the output schema, so nothing could pass: %v", text, err)
			}
		}
	case "output":
		e.Output = compact(m["output"])
		v, err := decodeStrict(m["output"])
		if err != nil {
			return e, fmt.Errorf("output: %v", err) // unreachable: checked with the whole file
		}
		if it.OutputSchema != "" {
			if err := validate(it.OutputSchema, v); err != nil {
				return e, fmt.Errorf("expected output violates the output schema, so nothing could pass: %v", err)
			}
		}
		if eq == "numeric" && !nanEqual(c) && containsNaN(v) {
			return e, fmt.Errorf("expected output contains %q, which equals nothing unless the tolerance sets nan_equal", tokenNaN)
		}
	}
	return e, nil
}

// checkInput validates an input against the contract's input schema, unless the
// expectation is an error: cases that expect an error exist to test rejection.
func checkInput(in json.RawMessage, e Expectation, what string, c *lang.Capability) error {
	if c.Interface.InputSchema == "" || e.Error != "" || in == nil {
		return nil
	}
	v, _ := decodeStrict(in)
	if err := validate(c.Interface.InputSchema, v); err != nil {
		return fmt.Errorf("input violates the input schema (allowed only in %s that expects an error): %v", what, err)
	}
	return nil
}

var knownEquivalence = map[string]bool{"bytes": true, "json": true, "lines": true, "numeric": true}

// equivalence returns the contract's equivalence; the language's default is bytes.
func equivalence(c *lang.Capability) string {
	if c.Equivalence == "" {
		return "bytes"
	}
	return c.Equivalence
}

func nanEqual(c *lang.Capability) bool { return c.Tolerance != nil && c.Tolerance.NaNEqual }

func containsNaN(v any) bool {
	switch x := v.(type) {
	case string:
		return x == tokenNaN
	case []any:
		for _, e := range x {
			if containsNaN(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if containsNaN(e) {
				return true
			}
		}
	}
	return false
}

func errorNames(errs map[string]int) string {
	if len(errs) == 0 {
		return "none"
	}
	names := make([]string, 0, len(errs))
	for n := range errs {
		names = append(names, fmt.Sprintf("%q", n))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

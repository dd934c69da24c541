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
	if c.Interface.Kind == "service" {
		return parseServiceCase(name, m, c)
	}
	var unknown []string
	for k := range m {
		if !caseFields[k] {
			unknown = append(unknown, fmt.Sprintf("%q", k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fail("unknown member %s; a case has input, one of output, stdout or error, and an optional description", strings.Join(unknown, ", "))
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

	var given []string
	for _, f := range []string{"output", "stdout", "error"} {
		if _, ok := m[f]; ok {
			given = append(given, f)
		}
	}
	switch len(given) {
	case 0:
		return fail("needs one of output, stdout or error")
	case 1:
	default:
		return fail("has both %s and %s; a case expects exactly one of output, stdout or error", given[0], given[1])
	}

	it := c.Interface
	switch given[0] {
	case "error":
		if err := json.Unmarshal(m["error"], &k.Expect.Error); err != nil || k.Expect.Error == "" {
			return fail("error must be the name of an error of the contract")
		}
		if _, ok := it.Errors[k.Expect.Error]; !ok {
			return fail("error %q is not declared by capability %q (declared: %s)", k.Expect.Error, c.Name, errorNames(it.Errors))
		}
	case "stdout":
		if eq == "json" || eq == "numeric" {
			return fail("stdout is for the bytes and lines equivalences; capability %q compares with %s, so give output", c.Name, eq)
		}
		var s string
		if err := json.Unmarshal(m["stdout"], &s); err != nil {
			return fail("stdout must be a string")
		}
		k.Expect.Stdout = &s
		if it.OutputSchema != "" {
			v, err := decodeStrict([]byte(s))
			if err != nil {
				return fail("stdout is not JSON, but the output schema requires JSON: %v", err)
			}
			if err := validate(it.OutputSchema, v); err != nil {
				return fail("expected stdout violates the output schema, so no output could pass: %v", err)
			}
		}
	case "output":
		k.Expect.Output = compact(m["output"])
		v, err := decodeStrict(m["output"])
		if err != nil {
			return fail("output: %v", err) // unreachable: checked with the whole file
		}
		if it.OutputSchema != "" {
			if err := validate(it.OutputSchema, v); err != nil {
				return fail("expected output violates the output schema, so no output could pass: %v", err)
			}
		}
		if eq == "numeric" && !nanEqual(c) && containsNaN(v) {
			return fail("expected output contains %q, which equals nothing unless the tolerance sets nan_equal", tokenNaN)
		}
	}

	if it.InputSchema != "" && k.Expect.Error == "" {
		v, _ := decodeStrict(in)
		if err := validate(it.InputSchema, v); err != nil {
			return fail("input violates the input schema (allowed only in a case that expects an error): %v", err)
		}
	}
	return k, nil
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

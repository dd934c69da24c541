package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/verdict"
)

// intSortCase is one input of the blueprint's measured interface case (issue 20), sent to
// examples/int-sort's admitted capability on every path that serves it.
type intSortCase struct {
	name  string
	input string // the input as JSON text, sent exactly as written
	// want is, for a valid input, its output (compact JSON: the literal expected values);
	// for an invalid one, the validator's message, which every path reports after "the
	// input violates the input schema: ".
	want string
}

// intSortInterfaceCases are the six valid and nine invalid inputs that TestServeIntSort
// (HTTP) and TestMCPIntSort (MCP stdio) both send: duplicates, exact integral decimals,
// the 64-bit endpoints, the empty list and a maximal batch; refusals of the shape, the
// bounds, the item type and the array length. The contract's schema is
// examples/int-sort/schemas/int-list.json (integers in [-2^63, 2^63-1], at most 10000).
var intSortInterfaceCases = struct{ valid, invalid []intSortCase }{
	valid: []intSortCase{
		{"duplicates", `[5, 3, 5, 1, 3, 3]`, `[1,3,3,3,5,5]`},
		{"integral decimals", `[3.0, -1, 2e0, 2, 10.000]`, `[-1,2,2,3,10]`},
		{"64-bit endpoints", `[9223372036854775807, 0, -9223372036854775808, 9223372036854775806]`, `[-9223372036854775808,0,9223372036854775806,9223372036854775807]`},
		{"empty", `[]`, `[]`},
		{"single", `[-7]`, `[-7]`},
		// maxItems is 10000: a permutation of -5000..4999 (7919 is prime to 10000).
		{"maximal batch", intList(10000, func(i int) int { return i*7919%10000 - 5000 }), intList(10000, func(i int) int { return i - 5000 })},
	},
	invalid: []intSortCase{
		{"an object", `{"numbers": [1, 2]}`, "at '': got object, want array"},
		{"a string", `"3,1,2"`, "at '': got string, want array"},
		{"null", `null`, "at '': got null, want array"},
		{"2^63", `[1, 9223372036854775808]`, "at '/1': maximum: got 9223372036854775808, want 9223372036854775807"},
		{"-2^63-1", `[-9223372036854775809]`, "at '/0': minimum: got -9223372036854775809, want -9223372036854775808"},
		{"a string item", `[1, "2"]`, "at '/1': got string, want integer"},
		{"a fraction", `[1.5]`, "at '/0': got number, want integer"},
		{"a null item", `[1, null, 2]`, "at '/1': got null, want integer"},
		{"10001 items", intList(10001, func(i int) int { return i }), "at '': maxItems: got 10001, want 10000"},
	},
}

// intList is the JSON array of f(0), …, f(n-1).
func intList(n int, f func(i int) int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(f(i))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// jsExact reports whether a JSON text survives a JavaScript client unchanged in meaning and
// spelling: every number in it is one that a double holds exactly and JSON.stringify writes
// as it is written here (so not 3.0, 2e0 or 9223372036854775807).
func jsExact(text string) bool {
	v, err := verdict.DecodeJSON([]byte(text))
	if err != nil {
		return false
	}
	var ok func(v any) bool
	ok = func(v any) bool {
		switch v := v.(type) {
		case json.Number:
			f, err := strconv.ParseFloat(string(v), 64)
			return err == nil && f >= -(1<<53) && f <= 1<<53 && strconv.FormatFloat(f, 'f', -1, 64) == string(v)
		case []any:
			for _, x := range v {
				if !ok(x) {
					return false
				}
			}
		case map[string]any:
			for _, x := range v {
				if !ok(x) {
					return false
				}
			}
		}
		return true
	}
	return ok(v)
}

// canonicalSchema is a JSON Schema's text with its members sorted and insignificant
// whitespace removed, numbers exactly as written (never rounded to a double), without the
// keywords named in drop (at its root only).
func canonicalSchema(t *testing.T, text []byte, drop ...string) string {
	t.Helper()
	v, err := verdict.DecodeJSON(text)
	if err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	if m, ok := v.(map[string]any); ok {
		for _, k := range drop {
			delete(m, k)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

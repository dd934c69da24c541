package generate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/verdict"
)

var schemas = map[string]string{
	"ints":     `{"type":"array","items":{"type":"integer"},"minItems":1}`,
	"bounded":  `{"type":"array","items":{"type":"integer","minimum":-5,"maximum":5},"maxItems":4}`,
	"unique":   `{"type":"array","items":{"type":"integer","minimum":0,"maximum":3},"uniqueItems":true}`,
	"record":   `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":5},"age":{"type":"integer","minimum":0,"exclusiveMaximum":150},"tags":{"type":"array","items":{"enum":["a","b"]}}},"required":["name"],"additionalProperties":false}`,
	"numbers":  `{"type":"array","items":{"type":"number","minimum":-1.5,"maximum":1e3}}`,
	"choice":   `{"anyOf":[{"type":"string","maxLength":3},{"type":"null"},{"const":42}]}`,
	"anything": `{}`,
	"nested":   `{"type":"array","items":{"type":"array","items":{"type":["boolean","null"]}}}`,
}

// Every value made from a schema of the supported keywords validates against it.
func TestValuesValidate(t *testing.T) {
	for name, s := range schemas {
		vs, err := Values([]byte(s), "seed-1", 200)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range vs {
			d, err := verdict.DecodeJSON(v)
			if err != nil {
				t.Fatalf("%s: %s is not JSON: %v", name, v, err)
			}
			if err := verdict.Validate(s, d); err != nil {
				t.Errorf("%s: %s violates the schema: %v", name, v, err)
			}
		}
	}
}

// The same seed makes the same values, byte for byte; another seed makes others.
func TestValuesAreDeterministicForASeed(t *testing.T) {
	s := []byte(schemas["record"])
	a, _ := Values(s, "dev-1", 50)
	b, _ := Values(s, "dev-1", 50)
	c, _ := Values(s, "dev-2", 50)
	if !slices.EqualFunc(a, b, bytes.Equal) {
		t.Error("one seed made two different batches")
	}
	if slices.EqualFunc(a, c, bytes.Equal) {
		t.Error("two seeds made the same batch")
	}
	// A longer batch starts with the shorter one: a count adds cases, it does not reshuffle.
	d, _ := Values(s, "dev-1", 60)
	if !slices.EqualFunc(a, d[:50], bytes.Equal) {
		t.Error("a longer batch is not an extension of the shorter")
	}
}

// Values lean toward the edges: bounds, empty arrays, duplicates.
func TestValuesReachTheEdges(t *testing.T) {
	vs, _ := Values([]byte(schemas["bounded"]), "edges", 300)
	all := string(bytes.Join(vs, []byte("\n")))
	for _, want := range []string{"-5", "5", "[]", "0"} {
		if !strings.Contains(all, want) {
			t.Errorf("no value holds %s in 300", want)
		}
	}
	dups := 0
	for _, v := range vs {
		var xs []int
		json.Unmarshal(v, &xs)
		seen := map[int]bool{}
		for _, x := range xs {
			if seen[x] {
				dups++
				break
			}
			seen[x] = true
		}
	}
	if dups < 20 {
		t.Errorf("only %d of 300 arrays hold a duplicate", dups)
	}
}

func TestValuesRefuseWhatTheyCannotGenerate(t *testing.T) {
	for s, want := range map[string]string{
		`{"type":"string","pattern":"^a+$"}`:            `keyword "pattern" at #`,
		`{"type":"array","items":{"$ref":"#/$defs/x"}}`: `keyword "$ref" at #/items`,
		`{"properties":{"a":{"format":"email"}}}`:       `keyword "format" at #/properties/a`,
		`[1,2]`:    `# is not a schema`,
		`{"type":`: `input schema:`,
	} {
		if _, err := Values([]byte(s), "x", 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error with %q", s, err, want)
		}
	}
}

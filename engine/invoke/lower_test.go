package invoke

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/lang"
)

// intList is examples/int-sort's schema, as the contract keeps it.
const intList = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","items":{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807},"maxItems":10000}`

func lower(t *testing.T, schema, field string) (string, string) {
	t.Helper()
	out, wrapped, err := Lower(json.RawMessage(schema), field)
	if err != nil {
		t.Fatalf("Lower(%s): %v", schema, err)
	}
	return string(out), wrapped
}

// agree checks that the original schema and its lowering accept and refuse the same
// instances (the lowering's instance being the original one, wrapped when it was).
func agree(t *testing.T, schema, lowered, wrapped string, instances ...string) {
	t.Helper()
	for _, in := range instances {
		orig := valid(t, schema, in)
		li := in
		if wrapped != "" {
			li = `{"` + wrapped + `":` + in + `}`
		}
		if low := valid(t, lowered, li); low != orig {
			t.Errorf("instance %s: valid under the original %v, under the lowered %v\n  original %s\n  lowered  %s", in, orig, low, schema, lowered)
		}
	}
}

func valid(t *testing.T, schema, instance string) bool {
	t.Helper()
	s, err := lang.CompileSchema("s", []byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	v, err := verdict.DecodeJSON([]byte(instance))
	if err != nil {
		t.Fatal(err)
	}
	return verdict.Validate(string(s), v) == nil
}

func TestLowerWrapsANonObjectRootAndKeepsItsBoundsExactly(t *testing.T) {
	out, wrapped := lower(t, intList, "input")
	want := `{"additionalProperties":false,"properties":{"input":{"items":{"maximum":9223372036854775807,"minimum":-9223372036854775808,"type":"integer"},"maxItems":10000,"type":"array"}},"required":["input"],"type":"object"}`
	if wrapped != "input" || out != want {
		t.Fatalf("lowered as %q:\n got  %s\n want %s", wrapped, out, want)
	}
	agree(t, intList, out, wrapped, `[]`, `[3,1,2]`, `[3.0]`, `[9223372036854775807,-9223372036854775808]`,
		`[9223372036854775808]`, `[-9223372036854775809]`, `[1.5]`, `["1"]`, `[null]`, `{}`, `"x"`, `null`)
	// Idempotent: the lowered schema is lowered to itself.
	if again, w := lower(t, out, "input"); again != out || w != "" {
		t.Errorf("lowering again gave %s (wrapped %q)", again, w)
	}
	if _, w := lower(t, `{"type":"string"}`, "output"); w != "output" {
		t.Errorf("wrapped as %q, want the field asked for", w)
	}
	for _, any := range []string{``, `{}`, `true`} {
		if out, w := lower(t, any, "input"); w != "input" || !strings.Contains(out, `"properties":{"input":{}}`) {
			t.Errorf("%q lowered to %s (wrapped %q)", any, out, w)
		}
	}
}

func TestLowerKeepsAnObjectRootWithItsRangesEnumsAndRequired(t *testing.T) {
	schema := `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"https://example.com/s","$comment":"x","type":"object",` +
		`"properties":{"n":{"type":"integer","minimum":1,"exclusiveMaximum":100},"mode":{"enum":["fast","exact"]},` +
		`"tags":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"},"minItems":1,"uniqueItems":true},` +
		`"either":{"oneOf":[{"type":"integer"},{"type":"string"}]}},"required":["n","mode"],"additionalProperties":false}`
	out, wrapped := lower(t, schema, "input")
	if wrapped != "" {
		t.Fatalf("an object root was wrapped: %s", out)
	}
	for _, want := range []string{`"minimum":1`, `"exclusiveMaximum":100`, `"enum":["fast","exact"]`, `"required":["n","mode"]`,
		`"additionalProperties":false`, `"pattern":"^[a-z]+$"`, `"uniqueItems":true`, `"oneOf":[{"type":"integer"},{"type":"string"}]`} {
		if !strings.Contains(out, want) {
			t.Errorf("lowered schema lacks %s: %s", want, out)
		}
	}
	for _, gone := range []string{`$schema`, `$id`, `$comment`} {
		if strings.Contains(out, gone) {
			t.Errorf("lowered schema keeps %s: %s", gone, out)
		}
	}
	agree(t, schema, out, wrapped, `{"n":1,"mode":"fast"}`, `{"n":0,"mode":"fast"}`, `{"n":100,"mode":"fast"}`, `{"n":5,"mode":"slow"}`,
		`{"mode":"fast"}`, `{"n":5,"mode":"exact","extra":1}`, `{"n":5,"mode":"exact","tags":[]}`, `{"n":5,"mode":"exact","tags":["a","a"]}`,
		`{"n":5,"mode":"exact","either":true}`, `{"n":5,"mode":"exact","either":"s"}`)
}

func TestLowerInlinesRefs(t *testing.T) {
	schema := `{"type":"object","$defs":{"pos":{"type":"integer","minimum":1},"pair":{"type":"array","prefixItems":[{"$ref":"#/$defs/pos"},{"$ref":"#/$defs/pos"}],"items":false}},` +
		`"properties":{"a":{"$ref":"#/$defs/pos","description":"how many"},"b":{"$ref":"#/$defs/pair"},"c":{"$ref":"#/$defs/pos","maximum":9},"d":{"$ref":"#/properties/a"},"e~/":{"type":"null"},"f":{"$ref":"#/properties/e~0~1"}},` +
		`"required":["a"]}`
	out, wrapped := lower(t, schema, "input")
	if strings.Contains(out, "$ref") || strings.Contains(out, "$defs") {
		t.Fatalf("refs left in %s", out)
	}
	for _, want := range []string{
		`"a":{"description":"how many","minimum":1,"type":"integer"}`,
		`"b":{"items":false,"prefixItems":[{"minimum":1,"type":"integer"},{"minimum":1,"type":"integer"}],"type":"array"}`,
		`"c":{"allOf":[{"minimum":1,"type":"integer"},{"maximum":9}]}`,
		`"f":{"type":"null"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lowered schema lacks %s:\n%s", want, out)
		}
	}
	agree(t, schema, out, wrapped, `{"a":1}`, `{"a":0}`, `{"a":1,"b":[1,2]}`, `{"a":1,"b":[1,0]}`, `{"a":1,"b":[1,2,3]}`,
		`{"a":1,"c":9}`, `{"a":1,"c":10}`, `{"a":1,"d":0}`, `{"a":1,"f":null}`, `{"a":1,"f":1}`)

	// A root that is a $ref is what it names.
	out, wrapped = lower(t, `{"$ref":"#/$defs/o","$defs":{"o":{"type":"object","properties":{"x":{"const":1}}}}}`, "input")
	if wrapped != "" || out != `{"properties":{"x":{"const":1}},"type":"object"}` {
		t.Errorf("root $ref lowered to %s (wrapped %q)", out, wrapped)
	}
	// "$ref" inside data (a const, an enum) is data, not a reference.
	if out, _ := lower(t, `{"type":"object","properties":{"k":{"const":{"$ref":"#/nowhere"}}}}`, "input"); !strings.Contains(out, `"const":{"$ref":"#/nowhere"}`) {
		t.Errorf("a const was taken for a reference: %s", out)
	}
}

func TestLowerFlattensRootCombinatorsThatLoseNothing(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"},"a":{"minimum":0}},"required":["b"]}]}`,
			`{"properties":{"a":{"allOf":[{"type":"integer"},{"minimum":0}]},"b":{"type":"string"}},"required":["a","b"],"type":"object"}`},
		{`{"anyOf":[{"type":"object","required":["a"]},{"type":"object","required":["a"]}]}`, `{"required":["a"],"type":"object"}`},
		{`{"type":"object","oneOf":[{"required":["a"]}],"description":"d"}`, `{"description":"d","required":["a"],"type":"object"}`},
	} {
		out, wrapped := lower(t, c.schema, "input")
		if wrapped != "" || out != c.want {
			t.Errorf("%s\n lowered to %s (wrapped %q)\n want       %s", c.schema, out, wrapped, c.want)
			continue
		}
		agree(t, c.schema, out, "", `{}`, `{"a":1}`, `{"a":-1,"b":"x"}`, `{"a":1,"b":"x"}`, `{"a":"1","b":"x"}`, `{"b":2}`)
	}
	// A oneOf under a non-object root is not at the lowered root: it is kept, wrapped.
	out, wrapped := lower(t, `{"oneOf":[{"type":"integer"},{"type":"string"}]}`, "input")
	if wrapped != "input" || !strings.Contains(out, `"input":{"oneOf":[{"type":"integer"},{"type":"string"}]}`) {
		t.Errorf("lowered to %s (wrapped %q)", out, wrapped)
	}
}

func TestLowerRefusesWhatWouldLoseADistinction(t *testing.T) {
	for _, c := range []struct{ schema, why string }{
		{`{"oneOf":[{"type":"object","required":["a"]},{"type":"object","required":["b"]}]}`, "root-level oneOf with 2 branches"},
		{`{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}]}`, "root-level anyOf with 2 different branches"},
		{`{"type":"object","oneOf":[{"required":["a"]},{"required":["a"]}]}`, "root-level oneOf with 2 branches"},
		{`{"type":"object","additionalProperties":false,"allOf":[{"properties":{"a":{}}}]}`, "beside the root's additionalProperties"},
		{`{"allOf":[{"type":"object"},{"minProperties":1}]}`, `"minProperties", which cannot be merged`},
		{`{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`, "recursive"},
		{`{"type":"object","properties":{"self":{"$ref":"#"}}}`, "recursive"},
		{`{"type":"array","items":{"$ref":"#/$defs/a"},"$defs":{"a":{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/a/anyOf/0"},{"type":"array","items":{"$ref":"#/$defs/a"}}]}}}`, "recursive"},
		{`{"$defs":{"a":{"$anchor":"A","type":"integer"}},"type":"object","properties":{"x":{"$ref":"#A"}}}`, "names an anchor"},
		{`{"$dynamicAnchor":"m","type":"object","properties":{"x":{"$dynamicRef":"#m"}}}`, "$dynamicRef cannot be inlined"},
		{`{"type":"object","properties":{"x":{"$id":"https://example.com/x","type":"integer"}}}`, "nested $id"},
		{`false`, "accepts no value"},
	} {
		_, _, err := Lower(json.RawMessage(c.schema), "input")
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Lower(%s) = %v, want a refusal saying %q", c.schema, err, c.why)
		}
	}
	// Not a schema at all: an error, not a refusal.
	for _, bad := range []string{`{"type":"objekt"}`, `{"$ref":"other.json"}`, `[1]`, `{`, `{"a":1,"a":2}`} {
		if _, _, err := Lower(json.RawMessage(bad), "input"); err == nil || errors.Is(err, ErrRefused) {
			t.Errorf("Lower(%s) = %v, want an error", bad, err)
		}
	}
	if _, _, err := Lower(json.RawMessage(`{}`), ""); err == nil {
		t.Error("Lower without a field name succeeded")
	}
}

// A schema whose $refs double at each level would inline to 2^30 subschemas.
func TestLowerRefusesAnExplosion(t *testing.T) {
	var defs []string
	for i := 0; i < 30; i++ {
		defs = append(defs, `"d`+strconv.Itoa(i)+`":{"type":"array","prefixItems":[{"$ref":"#/$defs/d`+strconv.Itoa(i+1)+`"},{"$ref":"#/$defs/d`+strconv.Itoa(i+1)+`"}]}`)
	}
	defs = append(defs, `"d30":{"type":"integer"}`)
	schema := `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`
	if _, _, err := Lower(json.RawMessage(schema), "input"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "subschemas") {
		t.Errorf("Lower of an exploding schema: %v", err)
	}
}

// FuzzLower feeds Lower untrusted schemas: it must never panic, and what it returns must be
// a valid schema with an object root, no root combinator and no $ref, that lowers to itself.
func FuzzLower(f *testing.F) {
	for _, s := range []string{intList, `{}`, `true`, `false`, `{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"enum":[1,2]}}}`,
		`{"allOf":[{"type":"object","properties":{"a":{}}},{"required":["a"]}]}`, `{"oneOf":[{"type":"object"},{"type":"object","required":["a"]}]}`,
		`{"$defs":{"n":{"items":{"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"}`, `{"type":"object","properties":{"x":{"$ref":"#/properties/y"},"y":{"minimum":1e2}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, wrapped, err := Lower(b, "input")
		if err != nil {
			return
		}
		var root map[string]any
		if err := json.Unmarshal(out, &root); err != nil {
			t.Fatalf("Lower(%s) = %s: not an object: %v", b, out, err)
		}
		if root["type"] != "object" || root["oneOf"] != nil || root["anyOf"] != nil || root["allOf"] != nil || root["$ref"] != nil {
			t.Fatalf("Lower(%s) = %s: not a flat object root", b, out)
		}
		if _, err := lang.CompileSchema("lowered", out); err != nil {
			t.Fatalf("Lower(%s) = %s: %v", b, out, err)
		}
		again, w2, err := Lower(out, "input")
		if err != nil || string(again) != string(out) || w2 != "" {
			t.Fatalf("Lower(%s) = %s (wrapped %q), which lowers to %s (wrapped %q, %v)", b, out, wrapped, again, w2, err)
		}
	})
}

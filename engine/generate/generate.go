// Package generate makes inputs from a contract's input schema: the built-in family of
// generators for JSON Schema types that a generated suite draws from (issue 33). Given the
// same schema, seed and count it makes the same values, byte for byte, on every machine: a
// builder told a dev seed can reproduce the dev cases, and a sealed seed the evaluator
// keeps secret names cases no one can precompute.
//
// Values lean toward the edges where programs break: bounds, zero, one and minus one,
// empty strings and arrays, duplicates, whitespace and non-ASCII text. The supported
// keywords are type (one or a list), const, enum, minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, minLength, maxLength, items, minItems, maxItems, uniqueItems,
// properties, required, additionalProperties (false), anyOf and oneOf (one branch); a
// schema with other keywords is refused (Values returns an error naming it) rather than
// generating values the schema may not accept. Callers still validate each value against
// the schema (engine/verdict), which has the last word: a value it refuses is dropped.
//
// It imports nothing of Foundry and never runs anything.
package generate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// maxDepth bounds nesting of generated values (and of the schema followed).
const maxDepth = 8

// supported are the schema keywords this family understands; annotations are ignored.
var supported = map[string]bool{
	"type": true, "const": true, "enum": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "minLength": true, "maxLength": true, "items": true, "minItems": true, "maxItems": true,
	"uniqueItems": true, "properties": true, "required": true, "additionalProperties": true, "anyOf": true, "oneOf": true,
	// annotations: no effect on validity
	"$schema": true, "$id": true, "title": true, "description": true, "$comment": true, "examples": true, "default": true,
}

// Values makes n values from schema (a JSON Schema text) for seed, deterministically.
func Values(schema []byte, seed string, n int) ([][]byte, error) {
	var s any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if err := check(s, "#", 0); err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte("foundry-generate/v1\x00" + seed))
	g := &gen{r: rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))}
	out := make([][]byte, 0, n)
	for range n {
		v, err := g.value(s, 0)
		if err != nil {
			return nil, err
		}
		b, err := marshal(v)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// check refuses a schema with a keyword the family does not understand, naming where.
func check(s any, at string, depth int) error {
	if depth > 64 {
		return fmt.Errorf("input schema: nested deeper than 64 at %s", at)
	}
	m, ok := s.(map[string]any)
	if !ok {
		if _, isBool := s.(bool); isBool {
			return nil
		}
		return fmt.Errorf("input schema: %s is not a schema", at)
	}
	for _, k := range slices.Sorted(mapsKeys(m)) {
		if !supported[k] {
			return fmt.Errorf("input schema: keyword %q at %s is not one the built-in generators understand; give a generator step", k, at)
		}
	}
	if it, ok := m["items"]; ok {
		if err := check(it, at+"/items", depth+1); err != nil {
			return err
		}
	}
	if ps, ok := m["properties"].(map[string]any); ok {
		for _, k := range slices.Sorted(mapsKeys(ps)) {
			if err := check(ps[k], at+"/properties/"+k, depth+1); err != nil {
				return err
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if bs, ok := m[k].([]any); ok {
			for i, b := range bs {
				if err := check(b, fmt.Sprintf("%s/%s/%d", at, k, i), depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

type gen struct{ r *rand.Rand }

// one in n.
func (g *gen) one(n int) bool { return g.r.IntN(n) == 0 }

// length draws the length of a string or an array from its schema m: between the minimum
// (minKey, at most 64) and the maximum (maxKey, at most spread above the minimum), and the
// minimum itself one time in oneIn, where off-by-one bugs live.
func (g *gen) length(m map[string]any, minKey, maxKey string, spread, oneIn int) int {
	lo := 0
	if f, ok := num(m, minKey); ok {
		lo = int(math.Min(f, 64))
	}
	hi := lo + spread
	if f, ok := num(m, maxKey); ok {
		hi = int(math.Min(f, float64(lo+spread)))
	}
	hi = max(hi, lo)
	n := lo + g.r.IntN(hi-lo+1)
	if g.one(oneIn) {
		n = lo
	}
	return n
}

func (g *gen) value(s any, depth int) (any, error) {
	m, ok := s.(map[string]any)
	if !ok { // true: anything; false has no value, and validation drops what is made
		return g.value(map[string]any{}, depth)
	}
	if c, ok := m["const"]; ok {
		return c, nil
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[g.r.IntN(len(e))], nil
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if bs, ok := m[k].([]any); ok && len(bs) > 0 {
			return g.value(bs[g.r.IntN(len(bs))], depth)
		}
	}
	types := typesOf(m)
	if depth >= maxDepth {
		types = slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "array" || t == "object" })
		if len(types) == 0 {
			types = []string{"null"}
		}
	}
	switch t := types[g.r.IntN(len(types))]; t {
	case "null":
		return nil, nil
	case "boolean":
		return g.one(2), nil
	case "integer":
		return g.integer(m), nil
	case "number":
		return g.number(m), nil
	case "string":
		return g.str(m), nil
	case "array":
		return g.array(m, depth)
	case "object":
		return g.object(m, depth)
	default:
		return nil, fmt.Errorf("input schema: unknown type %q", t)
	}
}

// typesOf are the types a schema allows: its type keyword, or what its other keywords
// imply, or every type.
func typesOf(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	switch {
	case m["items"] != nil || m["minItems"] != nil || m["maxItems"] != nil:
		return []string{"array"}
	case m["properties"] != nil || m["required"] != nil:
		return []string{"object"}
	case m["minLength"] != nil || m["maxLength"] != nil:
		return []string{"string"}
	case m["minimum"] != nil || m["maximum"] != nil:
		return []string{"number"}
	}
	return []string{"null", "boolean", "integer", "number", "string", "array", "object"}
}

func num(m map[string]any, k string) (float64, bool) {
	n, ok := m[k].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsInf(f, 0)
}

// bounds are the inclusive integer bounds of m, within ±2^53 (exact as doubles) and, when
// the schema leaves a side open, ±1000 from the other side or from zero.
func intBounds(m map[string]any) (lo, hi int64) {
	const limit = 1 << 53
	lo, hi = math.MinInt64, math.MaxInt64
	if f, ok := num(m, "minimum"); ok {
		lo = int64(math.Ceil(math.Max(f, -limit)))
	}
	if f, ok := num(m, "exclusiveMinimum"); ok {
		lo = max(lo, int64(math.Floor(math.Max(f, -limit)))+1)
	}
	if f, ok := num(m, "maximum"); ok {
		hi = int64(math.Floor(math.Min(f, limit)))
	}
	if f, ok := num(m, "exclusiveMaximum"); ok {
		hi = min(hi, int64(math.Ceil(math.Min(f, limit)))-1)
	}
	switch {
	case lo == math.MinInt64 && hi == math.MaxInt64:
		lo, hi = -1000, 1000
	case lo == math.MinInt64:
		lo = hi - 2000
	case hi == math.MaxInt64:
		hi = lo + 2000
	}
	return lo, hi
}

func (g *gen) integer(m map[string]any) any {
	lo, hi := intBounds(m)
	if hi < lo {
		return json.Number(strconv.FormatInt(lo, 10)) // no integer fits: validation drops it
	}
	var edges []int64
	for _, e := range []int64{lo, hi, 0, 1, -1, lo + 1, hi - 1} {
		if e >= lo && e <= hi {
			edges = append(edges, e)
		}
	}
	if g.one(3) {
		return json.Number(strconv.FormatInt(edges[g.r.IntN(len(edges))], 10))
	}
	span := uint64(hi - lo)
	if span == math.MaxUint64 {
		return json.Number(strconv.FormatInt(int64(g.r.Uint64()), 10))
	}
	return json.Number(strconv.FormatInt(lo+int64(g.r.Uint64N(span+1)), 10))
}

func (g *gen) number(m map[string]any) any {
	if g.one(2) {
		return g.integer(m)
	}
	lo, hi := intBounds(m)
	f := float64(lo) + g.r.Float64()*float64(hi-lo)
	// A short decimal: three places, so that the case reads well and parses exactly.
	s := strconv.FormatFloat(math.Round(f*1000)/1000, 'f', -1, 64)
	return json.Number(s)
}

// alphabet mixes what breaks text handling: letters, digits, space, tab, newline, quote,
// backslash, comma, brackets and non-ASCII.
var alphabet = []rune("abcxyzABC019 \t\n\"\\,[]{}é€😀")

func (g *gen) str(m map[string]any) any {
	n := g.length(m, "minLength", "maxLength", 12, 4)
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[g.r.IntN(len(alphabet))])
	}
	return b.String()
}

func (g *gen) array(m map[string]any, depth int) (any, error) {
	n := g.length(m, "minItems", "maxItems", 8, 5)
	unique := m["uniqueItems"] == true
	items, ok := m["items"]
	if !ok {
		items = true
	}
	out := make([]any, 0, n)
	for len(out) < n {
		if !unique && len(out) > 0 && g.one(4) { // a duplicate
			out = append(out, out[g.r.IntN(len(out))])
			continue
		}
		v, err := g.value(items, depth+1)
		if err != nil {
			return nil, err
		}
		if unique && slices.ContainsFunc(out, func(x any) bool { return sameJSON(x, v) }) {
			if g.one(8) {
				break // the item schema may have fewer distinct values than asked for
			}
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

func (g *gen) object(m map[string]any, depth int) (any, error) {
	props, _ := m["properties"].(map[string]any)
	required := map[string]bool{}
	if rs, ok := m["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	out := map[string]any{}
	for _, k := range slices.Sorted(mapsKeys(props)) {
		if !required[k] && g.one(2) {
			continue
		}
		v, err := g.value(props[k], depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range required {
			if !yield(k) {
				return
			}
		}
	}) {
		if _, ok := out[k]; !ok {
			v, err := g.value(true, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
	}
	return out, nil
}

func sameJSON(a, b any) bool {
	x, _ := marshal(a)
	y, _ := marshal(b)
	return bytes.Equal(x, y)
}

// marshal encodes v compactly, member names sorted (encoding/json's order for maps),
// without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

package verdict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/foundry-build/foundry/digest"
)

// decodeStrict parses one JSON value under the same strict rules as content addressing
// (digest.Check, which accepts what digest.Canonicalize does: valid UTF-8, no duplicate
// member names, finite numbers, bounded depth, nothing after the value) and returns it with
// numbers kept as their literals (json.Number), never rounded. Surrounding JSON whitespace
// is allowed. The canonical form is not built: every call of a capability decodes its
// input and its output here.
func decodeStrict(b []byte) (any, error) {
	if err := digest.Check(b); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err // unreachable after the strict check; kept to fail closed
	}
	return v, nil
}

// DecodeJSON parses one JSON value as strictly as every value judged against a contract
// (decodeStrict): numbers are kept as their literals (json.Number), never rounded. It is
// how engine/invoke reads a call's input and output.
func DecodeJSON(b []byte) (any, error) { return decodeStrict(b) }

// compact returns JSON text with insignificant whitespace removed and everything else (member
// order, number and string spelling) exactly as written.
func compact(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil
	}
	return buf.Bytes()
}

// mismatch locates the first difference between two JSON values: the path to it and a
// short description.
type mismatch struct {
	path string
	msg  string
}

func (m *mismatch) String() string { return "at " + m.path + ": " + m.msg }

// compareValues compares an actual JSON value with the expected one and returns nil when they
// are equal, or the first difference in document order (expected member order sorted by
// name). Objects are unordered; arrays are ordered and keep duplicates; strings compare after
// unescaping; numbers compare by numbersEqual. When numeric is set, the strings "NaN",
// "Infinity" and "-Infinity" stand for numbers on both sides; when unordered is set, arrays
// are multisets (compareCollections).
func compareValues(got, want any, path string, r relation) *mismatch {
	numeric, tol := r.numeric, r.tol
	if numeric {
		gn, gok := asNumeric(got)
		wn, wok := asNumeric(want)
		if gok && wok {
			if numericEqual(gn, wn, tol) {
				return nil
			}
			return &mismatch{path, fmt.Sprintf("got %s, want %s", short(gn.text(), 64), short(wn.text(), 64))}
		}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return typeMismatch(got, want, path)
		}
		names := make([]string, 0, len(w))
		for k := range w {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			gv, ok := g[k]
			if !ok {
				return &mismatch{path, "missing member " + short(strconv.Quote(k), 64)}
			}
			if m := compareValues(gv, w[k], memberPath(path, k), r); m != nil {
				return m
			}
		}
		if len(g) > len(w) {
			extra := make([]string, 0, len(g)-len(w))
			for k := range g {
				if _, ok := w[k]; !ok {
					extra = append(extra, k)
				}
			}
			sort.Strings(extra)
			return &mismatch{path, "unexpected member " + short(strconv.Quote(extra[0]), 64)}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok {
			return typeMismatch(got, want, path)
		}
		if r.unordered {
			return compareCollections(g, w, path, r)
		}
		for i := 0; i < len(g) && i < len(w); i++ {
			if m := compareValues(g[i], w[i], fmt.Sprintf("%s[%d]", path, i), r); m != nil {
				return m
			}
		}
		if len(g) != len(w) {
			return &mismatch{path, fmt.Sprintf("got %d elements, want %d", len(g), len(w))}
		}
		return nil
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return typeMismatch(got, want, path)
		}
		if numbersEqual(parseNumber(string(g)), parseNumber(string(w)), tol) {
			return nil
		}
		return &mismatch{path, fmt.Sprintf("got %s, want %s", short(string(g), 64), short(string(w), 64))}
	default: // string, bool, nil
		if got == want {
			return nil
		}
		if kindOf(got) != kindOf(want) {
			return typeMismatch(got, want, path)
		}
		return &mismatch{path, fmt.Sprintf("got %s, want %s", shortValue(got, 64), shortValue(want, 64))}
	}
}

// numericValue is a number or one of the non-finite tokens under the numeric equivalence.
type numericValue struct {
	n       number
	special bool
	f       float64 // when special
	tok     string
}

func (v numericValue) text() string {
	if v.special {
		return strconv.Quote(v.tok)
	}
	return v.n.lit
}

func asNumeric(v any) (numericValue, bool) {
	switch x := v.(type) {
	case json.Number:
		return numericValue{n: parseNumber(string(x))}, true
	case string:
		if f, ok := special(x); ok {
			return numericValue{special: true, f: f, tok: x}, true
		}
	}
	return numericValue{}, false
}

func numericEqual(a, b numericValue, tol tolerance) bool {
	switch {
	case a.special || b.special:
		x, y := a.f, b.f
		if !a.special {
			x = a.n.float()
		}
		if !b.special {
			y = b.n.float()
		}
		return floatsEqual(x, y, tol)
	default:
		return numbersEqual(a.n, b.n, tol)
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case json.Number:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func typeMismatch(got, want any, path string) *mismatch {
	return &mismatch{path, fmt.Sprintf("got %s %s, want %s %s", kindOf(got), shortValue(got, 48), kindOf(want), shortValue(want, 48))}
}

// shortValue renders a decoded value as compact JSON, truncated.
func shortValue(v any, n int) string {
	b, err := json.Marshal(v)
	if err != nil {
		return kindOf(v)
	}
	return short(string(b), n)
}

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// memberPath extends a JSONPath-like location ($, $.name, $["odd name"], $[3]).
func memberPath(path, name string) string {
	if ident.MatchString(name) && len(name) <= 64 {
		return path + "." + name
	}
	return path + "[" + short(strconv.Quote(name), 64) + "]"
}

package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
)

// ChangeKind says how a JSON path differs between two documents.
type ChangeKind string

const (
	Added   ChangeKind = "added"   // present only in the new document
	Removed ChangeKind = "removed" // present only in the old document
	Changed ChangeKind = "changed" // present in both with a different value or type
)

// Change is one difference between two JSON documents.
type Change struct {
	// Path names the value: object members as .name (or ["name"] when name is not an
	// identifier), array elements as [i]; the document root is "$". Examples:
	// inputs["/src"].digest, argv[2], limits.memory.
	Path string          `json:"path"`
	Kind ChangeKind      `json:"kind"`
	Old  json.RawMessage `json:"old,omitempty"` // nil when Added
	New  json.RawMessage `json:"new,omitempty"` // nil when Removed
}

// DiffJSON compares two JSON documents — the previous and the current canonical action
// definitions of a node, for explain — and returns the smallest paths whose values differ, in a
// stable order (object members sorted by name, array elements by index). Equal documents
// give no changes. Arrays are compared element by element: an element inserted in the
// middle shows as changes from that index on, which is what changed argv positions mean.
func DiffJSON(old, new []byte) ([]Change, error) {
	a, err := decodeJSON(old)
	if err != nil {
		return nil, fmt.Errorf("diff: old document: %w", err)
	}
	b, err := decodeJSON(new)
	if err != nil {
		return nil, fmt.Errorf("diff: new document: %w", err)
	}
	var out []Change
	diffValue("", a, b, &out)
	return out, nil
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // compare numbers by their text, never through float64
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func memberPath(parent, name string) string {
	if identifier.MatchString(name) {
		if parent == "" {
			return name
		}
		return parent + "." + name
	}
	return parent + "[" + strconv.Quote(name) + "]"
}

func rooted(p string) string {
	if p == "" {
		return "$"
	}
	return p
}

func raw(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil // unreachable: v came from the decoder
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
}

func diffValue(path string, a, b any, out *[]Change) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		names := make([]string, 0, len(av)+len(bv))
		for k := range av {
			names = append(names, k)
		}
		for k := range bv {
			if _, dup := av[k]; !dup {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			x, inA := av[k]
			y, inB := bv[k]
			p := memberPath(path, k)
			switch {
			case !inB:
				*out = append(*out, Change{Path: p, Kind: Removed, Old: raw(x)})
			case !inA:
				*out = append(*out, Change{Path: p, Kind: Added, New: raw(y)})
			default:
				diffValue(p, x, y, out)
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := 0; i < len(av) || i < len(bv); i++ {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i >= len(bv):
				*out = append(*out, Change{Path: p, Kind: Removed, Old: raw(av[i])})
			case i >= len(av):
				*out = append(*out, Change{Path: p, Kind: Added, New: raw(bv[i])})
			default:
				diffValue(p, av[i], bv[i], out)
			}
		}
		return
	default:
		if scalarEqual(a, b) {
			return
		}
	}
	*out = append(*out, Change{Path: rooted(path), Kind: Changed, Old: raw(a), New: raw(b)})
}

// scalarEqual compares JSON scalars (string, json.Number, bool, nil) by type and value.
func scalarEqual(a, b any) bool {
	switch av := a.(type) {
	case string:
		bv, ok := b.(string)
		return ok && av == bv
	case json.Number:
		bv, ok := b.(json.Number)
		return ok && av == bv
	case bool:
		bv, ok := b.(bool)
		return ok && av == bv
	case nil:
		return b == nil
	}
	return false
}

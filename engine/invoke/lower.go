package invoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/lang"
)

// ErrRefused marks a schema that Lower refuses: lowering it would lose a distinction the
// original makes (which branch of a root oneOf applies, a recursive structure) or cannot be
// done faithfully.
var ErrRefused = errors.New("refused")

// Bounds of a lowered schema: inlining $refs can multiply a schema's size.
const (
	maxLoweredNodes = 100_000
	maxLoweredBytes = 4 << 20
)

// Lower lowers a schema to the portable subset strict function-calling hosts accept
// (spec/interfaces.md §4): an object at the root (any other root is wrapped as
// {"type":"object","properties":{FIELD: schema},"required":[FIELD],"additionalProperties":false},
// and wrappedAs is FIELD), no oneOf/anyOf/allOf at the root, every $ref inlined and $defs
// dropped, "$schema", "$id", "$comment" and anchors dropped; everything else is kept as
// written (ranges, enums, required, formats, patterns, nested combinators), numbers exactly.
// An empty schema is {} (any value). Lowering is idempotent.
//
// It refuses (an error wrapping ErrRefused) what it cannot lower without losing a
// distinction: a root oneOf or anyOf whose branches differ, a root allOf whose branches
// cannot be merged into one object schema, a recursive $ref, a $ref to an anchor or outside
// the schema, $dynamicRef, a nested $id, a root that accepts nothing (false), or a result
// larger than 4 MiB. schema must be a valid, self-contained Draft 2020-12 schema (it is
// parsed as untrusted input).
func Lower(schema json.RawMessage, field string) (lowered json.RawMessage, wrappedAs string, err error) {
	if field == "" {
		return nil, "", errors.New("lowering a schema needs the field name to wrap a non-object root in")
	}
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{}`)
	}
	if _, err := lang.CompileSchema("schema", schema); err != nil {
		return nil, "", err
	}
	doc, err := verdict.DecodeJSON(schema)
	if err != nil {
		return nil, "", err
	}
	l := &lowerer{root: doc}
	s, err := l.schema(doc, []string{""}, true)
	if err != nil {
		return nil, "", err
	}
	var root map[string]any
	switch s := s.(type) {
	case bool:
		if !s {
			return nil, "", refuse("the schema accepts no value (false)")
		}
		root = map[string]any{}
	case map[string]any:
		root = s
	}
	if isObjectRoot(root) {
		if root, err = flattenRoot(root); err != nil {
			return nil, "", err
		}
	} else {
		root = map[string]any{"type": "object", "properties": map[string]any{field: root},
			"required": []any{field}, "additionalProperties": false}
		wrappedAs = field
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, "", err
	}
	out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(out) > maxLoweredBytes {
		return nil, "", refuse("inlining its $refs makes it larger than %d bytes", maxLoweredBytes)
	}
	// The lowered schema must itself be a valid schema; a failure here is Lower's bug.
	if _, err := lang.CompileSchema("lowered schema", out); err != nil {
		return nil, "", fmt.Errorf("lowering produced an invalid schema: %w", err)
	}
	return out, wrappedAs, nil
}

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// lowerer inlines the $refs of one schema document.
type lowerer struct {
	root  any
	nodes int
}

// Keywords by what their value holds (Draft 2020-12, with the older spellings a schema may
// still use); any other keyword's value is data and is kept as written.
var (
	schemaKeywords = map[string]bool{"additionalProperties": true, "contains": true, "propertyNames": true,
		"not": true, "if": true, "then": true, "else": true, "unevaluatedItems": true,
		"unevaluatedProperties": true, "contentSchema": true, "additionalItems": true}
	schemaListKeywords = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true}
	schemaMapKeywords  = map[string]bool{"properties": true, "patternProperties": true, "dependentSchemas": true}
	// dropped: meta-data of the document and the definitions $refs were inlined from.
	droppedKeywords = map[string]bool{"$schema": true, "$id": true, "$comment": true, "$anchor": true,
		"$dynamicAnchor": true, "$vocabulary": true, "$defs": true, "definitions": true}
	// annotationKeywords may sit beside a $ref and be merged into what it inlines.
	annotationKeywords = map[string]bool{"title": true, "description": true, "default": true,
		"examples": true, "deprecated": true, "readOnly": true, "writeOnly": true}
)

// schema lowers the subschema s. stack holds the JSON pointers of the $ref targets being
// inlined around it (the root's is ""): meeting one again is recursion.
func (l *lowerer) schema(s any, stack []string, root bool) (any, error) {
	if l.nodes++; l.nodes > maxLoweredNodes {
		return nil, refuse("inlining its $refs makes more than %d subschemas", maxLoweredNodes)
	}
	m, ok := s.(map[string]any)
	if !ok {
		if b, ok := s.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("not a schema: %s", describe(s))
	}
	out := map[string]any{}
	for k, v := range m {
		var err error
		switch {
		case k == "$ref":
			continue
		case k == "$id" && !root:
			return nil, refuse("a nested $id (%v) changes how the $refs under it resolve", v)
		case droppedKeywords[k]:
			continue
		case k == "$dynamicRef" || k == "$recursiveRef":
			return nil, refuse("%s cannot be inlined", k)
		case schemaKeywords[k]:
			out[k], err = l.schema(v, stack, false)
		case k == "items":
			if list, ok := v.([]any); ok { // the array form of drafts before 2020-12
				out[k], err = l.list(list, stack)
			} else {
				out[k], err = l.schema(v, stack, false)
			}
		case schemaListKeywords[k]:
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s is not a list of schemas", k)
			}
			out[k], err = l.list(list, stack)
		case schemaMapKeywords[k] || k == "dependencies":
			mm, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s is not an object of schemas", k)
			}
			lm := map[string]any{}
			for name, sub := range mm {
				if _, isList := sub.([]any); k == "dependencies" && isList {
					lm[name] = sub // dependencies' array form lists property names
					continue
				}
				if lm[name], err = l.schema(sub, stack, false); err != nil {
					return nil, err
				}
			}
			out[k] = lm
		default:
			out[k] = v
		}
		if err != nil {
			return nil, err
		}
	}
	ref, ok := m["$ref"]
	if !ok {
		return out, nil
	}
	rs, _ := ref.(string)
	ptr, target, err := l.resolve(rs)
	if err != nil {
		return nil, err
	}
	if slices.Contains(stack, ptr) {
		return nil, refuse("$ref %q is recursive: inlining it would never end", rs)
	}
	t, err := l.schema(target, append(stack[:len(stack):len(stack)], ptr), false)
	if err != nil {
		return nil, err
	}
	return withSiblings(t, out), nil
}

func (l *lowerer) list(list []any, stack []string) ([]any, error) {
	out := make([]any, len(list))
	for i, sub := range list {
		var err error
		if out[i], err = l.schema(sub, stack, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// withSiblings is the inlined target t of a $ref together with the keywords beside the
// $ref (which in 2020-12 apply as well): annotations are merged into t; anything that
// constrains makes the pair an allOf, since merging keywords that interact
// (additionalProperties and properties, say) would change what they mean.
func withSiblings(t any, siblings map[string]any) any {
	if len(siblings) == 0 {
		return t
	}
	constrains := false
	for k := range siblings {
		constrains = constrains || !annotationKeywords[k]
	}
	tm, isMap := t.(map[string]any)
	switch {
	case t == false:
		return false
	case t == true && !constrains:
		return siblings
	case !constrains && isMap:
		merged := make(map[string]any, len(tm)+len(siblings))
		for k, v := range tm {
			merged[k] = v
		}
		for k, v := range siblings {
			merged[k] = v
		}
		return merged
	}
	return map[string]any{"allOf": []any{t, siblings}}
}

// resolve finds the subschema a $ref names within the document: "#" or "#/json/pointer".
// It returns the pointer, unescaped, and the value there.
func (l *lowerer) resolve(ref string) (string, any, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return "", nil, refuse("$ref %q points outside the schema: only references within it (\"#...\") are inlined", ref)
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return "", nil, fmt.Errorf("$ref %q: %v", ref, err)
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		return "", nil, refuse("$ref %q names an anchor: only JSON pointers are inlined", ref)
	}
	cur := l.root
	if frag != "" {
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch c := cur.(type) {
			case map[string]any:
				v, ok := c[tok]
				if !ok {
					return "", nil, fmt.Errorf("$ref %q: no %q", ref, tok)
				}
				cur = v
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(c) || strconv.Itoa(i) != tok {
					return "", nil, fmt.Errorf("$ref %q: no element %q", ref, tok)
				}
				cur = c[i]
			default:
				return "", nil, fmt.Errorf("$ref %q: %q is inside a %s", ref, tok, describe(cur))
			}
		}
	}
	return frag, cur, nil
}

// isObjectRoot reports whether a lowered root schema accepts only objects: its type says
// so, or, without a type, a root combinator does (an allOf with an object branch, an anyOf
// or oneOf whose branches all are).
func isObjectRoot(m map[string]any) bool {
	if t, ok := m["type"]; ok {
		return objectType(t)
	}
	if list, ok := m["allOf"].([]any); ok && slices.ContainsFunc(list, objectSchema) {
		return true
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if list, ok := m[k].([]any); ok && len(list) > 0 && !slices.ContainsFunc(list, func(b any) bool { return !objectSchema(b) }) {
			return true
		}
	}
	return false
}

func objectSchema(s any) bool {
	m, ok := s.(map[string]any)
	return ok && objectType(m["type"])
}

func objectType(t any) bool {
	if l, ok := t.([]any); ok && len(l) == 1 {
		t = l[0]
	}
	return t == "object"
}

// flattenRoot removes the combinators of an object root: allOf branches are merged into
// it; an anyOf whose branches are all equal, or a oneOf of one branch, is that branch.
// Anything else would lose which branch applies, and is refused.
func flattenRoot(m map[string]any) (map[string]any, error) {
	flat := map[string]any{}
	for k, v := range m {
		if k != "allOf" && k != "anyOf" && k != "oneOf" {
			flat[k] = v
		}
	}
	var branches []any
	if list, ok := m["allOf"].([]any); ok {
		branches = append(branches, list...)
	}
	if list, ok := m["anyOf"].([]any); ok {
		distinct := uniq(list)
		if len(distinct) != 1 {
			return nil, refuse("a root-level anyOf with %d different branches: lowering would lose which branch applies", len(distinct))
		}
		branches = append(branches, distinct[0])
	}
	if list, ok := m["oneOf"].([]any); ok {
		if len(list) != 1 {
			return nil, refuse("a root-level oneOf with %d branches: lowering would lose which branch applies", len(list))
		}
		branches = append(branches, list[0])
	}
	for _, b := range branches {
		if err := mergeBranch(flat, b); err != nil {
			return nil, err
		}
	}
	flat["type"] = "object"
	return flat, nil
}

// mergeBranch merges one branch of a root combinator into the root dst. Only what merges
// without changing meaning is taken: the object type, properties (a name in both becomes an
// allOf of its two schemas), required names, title and description (the root's win); and
// properties only when dst has no additionalProperties or unevaluatedProperties, which
// depend on which properties sit beside them.
func mergeBranch(dst map[string]any, b any) error {
	if b == true {
		return nil
	}
	bm, ok := b.(map[string]any)
	if !ok {
		return refuse("a root combinator has a branch that accepts nothing")
	}
	bm, err := flattenRoot(bm) // its own combinators first
	if err != nil {
		return err
	}
	for k, v := range bm {
		switch k {
		case "type":
			if !objectType(v) {
				return refuse("a root combinator has a branch of type %v", v)
			}
		case "title", "description":
			if _, ok := dst[k]; !ok {
				dst[k] = v
			}
		case "required":
			have, _ := dst["required"].([]any)
			list, _ := v.([]any)
			for _, r := range list {
				if !slices.Contains(have, r) {
					have = append(have, r)
				}
			}
			dst["required"] = have
		case "properties":
			for _, k := range []string{"additionalProperties", "unevaluatedProperties"} {
				if _, ok := dst[k]; ok {
					return refuse("a root combinator adds properties beside the root's %s, which would then mean something else", k)
				}
			}
			props, _ := dst["properties"].(map[string]any)
			if props == nil {
				props = map[string]any{}
			}
			for name, s := range v.(map[string]any) {
				if prev, ok := props[name]; ok {
					s = map[string]any{"allOf": []any{prev, s}}
				}
				props[name] = s
			}
			dst["properties"] = props
		default:
			return refuse("a root combinator's branch has %q, which cannot be merged into the root", k)
		}
	}
	return nil
}

// uniq returns the distinct values of list (compared as JSON), in order.
func uniq(list []any) []any {
	var out []any
	var seen []string
	for _, v := range list {
		b, _ := json.Marshal(v)
		if !slices.Contains(seen, string(b)) {
			seen = append(seen, string(b))
			out = append(out, v)
		}
	}
	return out
}

func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

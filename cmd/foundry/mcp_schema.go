package main

import (
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The schemas a model sees follow the portable subset that strict and non-strict
// function-calling hosts keep (spec/mcp.md §2): a flat object at the root with properties,
// required and additionalProperties false, no root combinators, no $ref; every constraint
// (enum, pattern, bounds, lengths) sits inside its property. The server validates every call
// in full against the same schema, so a host that drops a keyword loses a hint, not a check.

// inputObject is a tool's input schema: a flat object of props, the required ones named, and
// no other property allowed.
func inputObject(props map[string]*jsonschema.Schema, required ...string) *jsonschema.Schema {
	if props == nil {
		props = map[string]*jsonschema.Schema{}
	}
	return &jsonschema.Schema{
		Type:                 "object",
		Properties:           props,
		Required:             required,
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}, // false
	}
}

// stringProp is a string property of at most maxLen bytes described by desc.
func stringProp(desc string, maxLen int) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc, MinLength: jsonschema.Ptr(1), MaxLength: jsonschema.Ptr(maxLen)}
}

// patternProp is a string property that must match pattern (an RE2 and ECMA-262 regexp).
func patternProp(desc, pattern string, maxLen int) *jsonschema.Schema {
	s := stringProp(desc, maxLen)
	s.Pattern = pattern
	return s
}

// enumProp is a string property that takes one of values.
func enumProp(desc string, values ...string) *jsonschema.Schema {
	e := make([]any, len(values))
	for i, v := range values {
		e[i] = v
	}
	return &jsonschema.Schema{Type: "string", Description: desc, Enum: e}
}

// intProp is an integer property in [min, max].
func intProp(desc string, min, max int) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "integer", Description: desc, Minimum: jsonschema.Ptr(float64(min)), Maximum: jsonschema.Ptr(float64(max))}
}

// stringsProp is an array of at most maxItems strings, each matching item.
func stringsProp(desc string, item *jsonschema.Schema, maxItems int) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "array", Description: desc, Items: item, MaxItems: jsonschema.Ptr(maxItems)}
}

// outputSchema is the output schema of T as go-sdk would infer it, made portable: raw JSON
// values (json.RawMessage) are any JSON value (a schema object, not a bare true); an
// array or map (which jsonschema-go types ["null","array"] or ["null","object"]) has its
// one type, as the tools never return null for one; a pointer that may be null is
// anyOf null or its type. MCP Inspector's --strict check finds no error in them (it warns
// that a raw JSON value, such as a changed field's old and new value, constrains nothing).
func outputSchema[T any]() *jsonschema.Schema {
	anyValue := &jsonschema.Schema{Description: "any JSON value"}
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): anyValue,
		reflect.TypeFor[map[string]any]():  {Type: "object"},
	}})
	if err != nil {
		panic(err) // a programming error in the tool's output type, caught by every test
	}
	portableTypes(s)
	return s
}

// portableTypes rewrites, in s and every schema under it, a type list ["null", T]: to T for
// arrays and for objects with no properties of their own (maps), to anyOf null or T for the
// rest (pointers).
func portableTypes(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		t := s.Types[1]
		s.Types = nil
		if t == "array" || (t == "object" && s.Properties == nil) {
			s.Type = t
		} else {
			inner := *s
			inner.Type, inner.Description = t, ""
			*s = jsonschema.Schema{Description: s.Description, AnyOf: []*jsonschema.Schema{{Type: "null"}, &inner}}
			portableTypes(&inner)
			s.AnyOf[1] = &inner
			return
		}
	}
	portableTypes(s.Items)
	portableTypes(s.AdditionalProperties)
	for _, p := range s.Properties {
		portableTypes(p)
	}
	for _, b := range s.AnyOf {
		portableTypes(b)
	}
}

// Annotations say what a tool does to its environment (MCP 2025-11-25, ToolAnnotations).
// Hosts treat them as hints from a trusted server; they must be true.

// readOnly is a tool that only reads the project (its caches aside): calling it again with
// the same arguments has no further effect, and it reaches nothing outside the project and
// its registry.
func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true,
		DestructiveHint: jsonschema.Ptr(false), OpenWorldHint: jsonschema.Ptr(false)}
}

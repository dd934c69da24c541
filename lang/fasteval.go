package lang

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/customdecode"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// fastEval turns evalFast on; the equivalence test turns it off to compare.
var fastEval = true

// evalFast evaluates the expressions configuration is mostly made of (literals, quoted
// templates, references, function calls, tuples and objects) to the very value hclsyntax's
// Value method gives, without its general machinery: it checks each reference as it meets
// it instead of collecting them first, and resolves step.NAME.output["PATH"] with two map
// lookups instead of traversing an object of every step. It returns false, having reported
// nothing, wherever hclsyntax could report a diagnostic or produce an unknown or marked
// value, or meets another kind of expression; eval then evaluates the whole expression the
// general way, which reports exactly what it always did. (Functions called before such a
// fallback are called again; loading's functions are idempotent: records and hashes are
// memoized per load.)
//
// Why: evaluating step attributes was the largest part of loading a large project after
// parsing, mostly allocation and cache misses in maps of every step.
func (l *loader) evalFast(expr hcl.Expression, ctx *hcl.EvalContext, scope *stepScope) (cty.Value, bool) {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
		return e.Val, true
	case *hclsyntax.TemplateExpr:
		if e.IsStringLiteral() {
			// Its one part's value, a string that cty.StringVal already normalized: joining
			// it again took two allocations for every quoted string of every step.
			if v := e.Parts[0].(*hclsyntax.LiteralValueExpr).Val; v.Type() == cty.String && !v.IsNull() {
				return v, true
			}
		}
		var b strings.Builder
		for _, part := range e.Parts {
			v, ok := l.evalFast(part, ctx, scope)
			if !ok || v.IsNull() || !v.IsKnown() || v.IsMarked() {
				return cty.NilVal, false
			}
			s, err := convert.Convert(v, cty.String)
			if err != nil {
				return cty.NilVal, false
			}
			b.WriteString(s.AsString())
		}
		return cty.StringVal(b.String()), true
	case *hclsyntax.TemplateWrapExpr:
		return l.evalFast(e.Wrapped, ctx, scope)
	case *hclsyntax.ScopeTraversalExpr:
		if l.checkRef(e.Traversal, scope) != nil {
			return cty.NilVal, false
		}
		if v, ok := scope.outputValue(e.Traversal); ok {
			return v, true
		}
		v, diags := e.Traversal.TraverseAbs(ctx)
		if len(diags) > 0 {
			return cty.NilVal, false
		}
		return v, true
	case *hclsyntax.TupleConsExpr:
		vals := make([]cty.Value, len(e.Exprs))
		for i, x := range e.Exprs {
			v, ok := l.evalFast(x, ctx, scope)
			if !ok {
				return cty.NilVal, false
			}
			vals[i] = v
		}
		return cty.TupleVal(vals), true
	case *hclsyntax.ObjectConsExpr:
		vals := make(map[string]cty.Value, len(e.Items))
		for _, item := range e.Items {
			k, ok := l.objectKey(item.KeyExpr, ctx, scope)
			if !ok {
				return cty.NilVal, false
			}
			v, ok := l.evalFast(item.ValueExpr, ctx, scope)
			if !ok {
				return cty.NilVal, false
			}
			vals[k] = v
		}
		return cty.ObjectVal(vals), true
	case *hclsyntax.FunctionCallExpr:
		return l.callFast(e, ctx, scope)
	}
	return cty.NilVal, false
}

// objectKey is ObjectConsKeyExpr.Value for keys that are strings or bare names.
func (l *loader) objectKey(expr hclsyntax.Expression, ctx *hcl.EvalContext, scope *stepScope) (string, bool) {
	k, ok := expr.(*hclsyntax.ObjectConsKeyExpr)
	if !ok {
		return "", false
	}
	switch w := k.Wrapped.(type) {
	case *hclsyntax.ScopeTraversalExpr:
		if k.ForceNonLiteral || len(w.Traversal) != 1 {
			return "", false
		}
		return w.Traversal.RootName(), true // a bare name is the literal key
	case *hclsyntax.TemplateExpr:
		v, ok := l.evalFast(w, ctx, scope)
		if !ok {
			return "", false
		}
		return v.AsString(), true
	}
	return "", false
}

// callFast is FunctionCallExpr.Value for calls whose arguments evaluate without a diagnostic
// and convert to the parameters' types.
func (l *loader) callFast(e *hclsyntax.FunctionCallExpr, ctx *hcl.EvalContext, scope *stepScope) (cty.Value, bool) {
	f, ok := ctx.Functions[e.Name]
	if !ok || e.ExpandFinal {
		return cty.NilVal, false
	}
	params, varParam := f.Params(), f.VarParam()
	if len(e.Args) < len(params) || (varParam == nil && len(e.Args) != len(params)) {
		return cty.NilVal, false
	}
	args := make([]cty.Value, len(e.Args))
	for i, a := range e.Args {
		param := varParam
		if i < len(params) {
			param = &params[i]
		}
		if customdecode.CustomExpressionDecoderForType(param.Type) != nil {
			return cty.NilVal, false
		}
		v, ok := l.evalFast(a, ctx, scope)
		if !ok {
			return cty.NilVal, false
		}
		v, err := convert.Convert(v, param.Type)
		if err != nil {
			return cty.NilVal, false
		}
		args[i] = v
	}
	v, err := f.Call(args)
	if err != nil {
		return cty.NilVal, false
	}
	return v, true
}

// The fast paths below give what evaluating an attribute and converting its value would
// give (stringList, stringMap, artifactMap), without building the cty tuple or object in
// between, for the shapes steps are mostly written in: a tuple or object constructor whose
// elements evalFast takes and whose values convert without a diagnostic. Anything else
// returns false, and the caller evaluates and converts the general way.

// stringListFast is stringList(eval(expr)) for a non-empty tuple of plain strings.
func (l *loader) stringListFast(expr hcl.Expression, ctx *hcl.EvalContext, scope *stepScope) ([]string, bool) {
	t, ok := expr.(*hclsyntax.TupleConsExpr)
	if !fastEval || !ok || len(t.Exprs) == 0 {
		return nil, false
	}
	l.in.current = expr.Range()
	out := make([]string, len(t.Exprs))
	for i, x := range t.Exprs {
		v, ok := l.evalFast(x, ctx, scope)
		if !ok {
			return nil, false
		}
		if out[i], ok = plainString(v); !ok {
			return nil, false
		}
	}
	return out, true
}

// stringMapFast is stringMap(eval(expr)) for an object of plain strings.
func (l *loader) stringMapFast(expr hcl.Expression, ctx *hcl.EvalContext, scope *stepScope) (map[string]string, bool) {
	return objectFast(l, expr, ctx, scope, plainString)
}

// artifactMapFast is artifactMap(eval(expr)) for an object of artifacts of the given kinds,
// each a copy placed at rng.
func (l *loader) artifactMapFast(expr hcl.Expression, ctx *hcl.EvalContext, scope *stepScope, rng hcl.Range, kinds []ArtifactKind) (map[string]*Artifact, bool) {
	return objectFast(l, expr, ctx, scope, func(v cty.Value) (*Artifact, bool) { return allowedArtifact(v, rng, kinds) })
}

// objectFast builds the map an object constructor evaluates to, each value converted by
// conv, or returns false if evalFast or conv does not take every key and value.
func objectFast[T any](l *loader, expr hcl.Expression, ctx *hcl.EvalContext, scope *stepScope, conv func(cty.Value) (T, bool)) (map[string]T, bool) {
	o, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !fastEval || !ok {
		return nil, false
	}
	l.in.current = expr.Range()
	out := make(map[string]T, len(o.Items))
	for _, item := range o.Items {
		k, ok := l.objectKey(item.KeyExpr, ctx, scope)
		if !ok {
			return nil, false
		}
		v, ok := l.evalFast(item.ValueExpr, ctx, scope)
		if !ok {
			return nil, false
		}
		if out[k], ok = conv(v); !ok {
			return nil, false
		}
	}
	return out, true
}

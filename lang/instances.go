package lang

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// for_each and count on step, check and seed blocks, as Terraform defines them: a block
// with for_each = a map (or a set of strings) becomes one instance per key, NAME["KEY"],
// whose expressions see each.key and each.value; a block with count = N becomes N
// instances, NAME[0] … NAME[N-1], whose expressions see count.index. The keys must be known
// when the configuration is loaded. An instance is a block like any other: its definition
// (and so its digest) does not hold its key, so two instances that run the same thing share
// one cache entry.

// instance is one instance of a block: the block itself when it has neither for_each nor
// count.
type instance struct {
	name string    // NAME, NAME["KEY"] or NAME[INDEX]
	key  string    // KEY, or INDEX as text; "" for a lone block
	each cty.Value // the each or count object its expressions see; cty.NilVal for a lone block
}

// of is the Instance a block named block has of in, nil for a lone block.
func (in instance) of(block string, count bool) *Instance {
	if in.each == cty.NilVal {
		return nil
	}
	return &Instance{Block: block, Key: in.key, Count: count}
}

// repeated is how a block with for_each or count is referred to as a whole: step.NAME (or
// seed.NAME) is an object by key, or a tuple by index, of its instances.
type repeated struct {
	count bool       // count: a tuple by index; else for_each: an object by key
	insts []instance // in key order, or by index
}

// value is the whole block as references see it, with elem giving each instance's value.
func (r *repeated) value(elem func(instance) cty.Value) cty.Value {
	if r.count {
		if len(r.insts) == 0 {
			return cty.EmptyTupleVal
		}
		vals := make([]cty.Value, len(r.insts))
		for i, in := range r.insts {
			vals[i] = elem(in)
		}
		return cty.TupleVal(vals)
	}
	if len(r.insts) == 0 {
		return cty.EmptyObjectVal
	}
	vals := make(map[string]cty.Value, len(r.insts))
	for _, in := range r.insts {
		vals[in.key] = elem(in)
	}
	return cty.ObjectVal(vals)
}

// keys are the instances' keys (or indexes), for diagnostics.
func (r *repeated) keys() []string {
	out := make([]string, len(r.insts))
	for i, in := range r.insts {
		out[i] = in.key
	}
	return out
}

// find returns the instance a reference's index names, if any.
func (r *repeated) find(key cty.Value) (instance, bool) {
	if key.IsNull() || !key.IsKnown() {
		return instance{}, false
	}
	var k string
	switch {
	case r.count && key.Type() == cty.Number:
		k = key.AsBigFloat().Text('f', -1)
	case !r.count && key.Type() == cty.String:
		k = key.AsString()
	default:
		return instance{}, false
	}
	for _, in := range r.insts {
		if in.key == k {
			return in, true
		}
	}
	return instance{}, false
}

// InstanceName is the name of a block's instance: NAME["KEY"], with the key quoted as an HCL
// string, for a for_each key; NAME[INDEX] for a count index.
func InstanceName(name, key string, count bool) string {
	if count {
		return name + "[" + key + "]"
	}
	return name + "[" + string(hclwrite.TokensForValue(cty.StringVal(key)).Bytes()) + "]"
}

var repetitionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "for_each"}, {Name: "count"}}}

// repetitionArgs are the meta-arguments every repeatable block's schema adds.
var repetitionArgs = repetitionSchema.Attributes

// instances evaluates b's for_each or count and returns its instances, with the repetition
// (nil for a lone block). It returns no instances when the repetition is refused, with
// diagnostics saying why.
func (l *loader) instances(b *hcl.Block) ([]instance, *repeated) {
	name := b.Labels[0]
	content, _, _ := b.Body.PartialContent(repetitionSchema) // the full decode reports the rest
	fe, ct := content.Attributes["for_each"], content.Attributes["count"]
	switch {
	case fe == nil && ct == nil:
		return []instance{{name: name}}, nil
	case fe != nil && ct != nil:
		l.diags = append(l.diags, errorAt(ct.NameRange, "Invalid combination of count and for_each",
			"%s %q has both count and for_each; a block takes one of them.", b.Type, name))
		return nil, nil
	}
	a, meta := fe, "for_each"
	if fe == nil {
		a, meta = ct, "count"
	}
	for _, t := range a.Expr.Variables() {
		switch root := t.RootName(); root {
		case "step", "seed", "capability", "each", "count", "module":
			l.diags = append(l.diags, errorAt(t.SourceRange(), "Invalid "+meta+" argument",
				"The keys of %s %q must be known when the configuration is loaded, before anything is built: %s may use variables, locals and functions, not %s.",
				b.Type, name, meta, root))
			return nil, nil
		}
	}
	v, diags := l.eval(a.Expr, l.keysContext(), nil)
	if diags.HasErrors() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid "+meta+" argument",
			"The %s value of %s %q is not known when the configuration is loaded (it depends on a variable with no value): keys must be known at plan time.", meta, b.Type, name))
		return nil, nil
	}
	r := &repeated{count: meta == "count"}
	var err string
	if r.count {
		r.insts, err = countInstances(name, v)
	} else {
		r.insts, err = forEachInstances(name, v)
	}
	if err != "" {
		l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid "+meta+" argument", "%s %q: %s", b.Type, name, err))
		return nil, nil
	}
	return r.insts, r
}

// maxInstances bounds the instances of one block: more is a mistake, not a build.
const maxInstances = 100_000

// countInstances are the instances of count = v.
func countInstances(name string, v cty.Value) ([]instance, string) {
	if v.IsNull() || v.Type() != cty.Number {
		return nil, fmt.Sprintf("count must be a whole number, not %s.", typeName(v))
	}
	bf := v.AsBigFloat()
	n, acc := bf.Int64()
	if !bf.IsInt() || acc != 0 || n < 0 || n > maxInstances {
		return nil, fmt.Sprintf("count = %s must be a whole number from 0 to %d.", bf.Text('f', -1), maxInstances)
	}
	out := make([]instance, n)
	for i := range out {
		k := strconv.Itoa(i)
		out[i] = instance{name: InstanceName(name, k, true), key: k,
			each: cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(i))})}
	}
	return out, ""
}

// forEachInstances are the instances of for_each = v: a map or object (each.key the key,
// each.value the element), or a set, list or tuple of strings (each.key and each.value the
// string; a list must not repeat one).
func forEachInstances(name string, v cty.Value) ([]instance, string) {
	if v.IsNull() {
		return nil, "for_each is null; it must be a map, or a set of strings."
	}
	ty := v.Type()
	byKey := ty.IsMapType() || ty.IsObjectType()
	if !byKey && !ty.IsSetType() && !ty.IsListType() && !ty.IsTupleType() {
		return nil, fmt.Sprintf("for_each must be a map, or a set of strings, not %s.", typeName(v))
	}
	var out []instance
	seen := map[string]bool{}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		key := k
		if !byKey {
			key = e
		}
		if key.IsNull() || key.Type() != cty.String {
			return nil, fmt.Sprintf("its keys must be strings; %s is not.", typeName(key))
		}
		s := key.AsString()
		if seen[s] {
			return nil, fmt.Sprintf("the key %q appears twice: each instance needs a key of its own (toset() drops repeats).", s)
		}
		seen[s] = true
		out = append(out, instance{name: InstanceName(name, s, false), key: s,
			each: cty.ObjectVal(map[string]cty.Value{"key": key, "value": e})})
	}
	slices.SortFunc(out, func(a, b instance) int { return strings.Compare(a.key, b.key) })
	if len(out) > maxInstances {
		return nil, fmt.Sprintf("%d keys; a block has at most %d instances.", len(out), maxInstances)
	}
	return out, ""
}

// typeName names v's type for a diagnostic.
func typeName(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	return v.Type().FriendlyName()
}

// keysContext is what for_each and count are evaluated in: variables, locals and functions.
func (l *loader) keysContext() *hcl.EvalContext {
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": l.varObject(), "local": cty.ObjectVal(l.cfg.Locals)},
		Functions: l.budget.functions(l.in.functions()),
	}
}

// withInstance returns ctx with an instance's each or count object.
func withInstance(ctx *hcl.EvalContext, in instance, count bool) *hcl.EvalContext {
	if in.each == cty.NilVal {
		return ctx
	}
	vars := make(map[string]cty.Value, len(ctx.Variables)+1)
	for k, v := range ctx.Variables {
		vars[k] = v
	}
	if count {
		vars["count"] = in.each
	} else {
		vars["each"] = in.each
	}
	return &hcl.EvalContext{Variables: vars, Functions: ctx.Functions}
}

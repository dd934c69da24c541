package lang

import (
	"errors"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Evaluation stays hcl's own: the budget is enforced by rewriting the syntax tree, once after
// parsing, so that the points where evaluation can make more than the text it was written in
// pass through a budgetExpr, and by wrapping every function of the evaluation context
// (budget.function). Those points are a for expression's collection (checked) and its key,
// value and condition (charged, once per element), a template's interpolated parts, a tuple
// or object constructor that holds other collections, * and /, numeric literals too large to
// print, and the operands that cty converts from a tuple or object to a list, set or map:
// a function's argument for such a parameter and a conditional's results. Everything else
// makes at most what its operands hold.

// budgetExpr is a node of the syntax tree that evaluates the expression it wraps with hcl's
// evaluator, under the load's budget: it refuses to start once the budget is exceeded or the
// time is up, and charges what the expression made. It embeds a ParenthesesExpr around the
// wrapped expression, so that walks of the tree (Variables, VisitAll) see that expression and
// everything in it, and ranges are the wrapped expression's: a refusal points at it.
type budgetExpr struct {
	*hclsyntax.ParenthesesExpr
	b      *budget
	charge chargeKind
}

type chargeKind int

const (
	checkOnly        chargeKind = iota // a for expression's collection
	chargeValue                        // everything the value holds
	chargeElements                     // the collections a constructor's value holds
	chargeConversion                   // what converting the value to a collection costs
	chargeText                         // a template's part, held twice while it is built
	chargeNumber                       // the digits of a number
)

func (e *budgetExpr) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	if err := e.b.check(); err != nil {
		return cty.DynamicVal, hcl.Diagnostics{err.diag(e.SrcRange)}
	}
	v, diags := e.Expression.Value(ctx)
	var err *budgetError
	switch e.charge {
	case chargeValue:
		err = e.b.chargeValue(v)
	case chargeElements:
		err = e.b.chargeElements(v)
	case chargeConversion:
		err = e.b.charge(conversionValues(v), 0)
	case chargeText:
		// hcl builds a template in a buffer that it grows, then copies into the string.
		_, bytes := shallow(v)
		err = e.b.charge(0, 2*bytes)
	case chargeNumber:
		_, bytes := shallow(v)
		err = e.b.charge(0, bytes)
	}
	if err != nil {
		return cty.DynamicVal, append(diags, err.diag(e.SrcRange))
	}
	return v, diags
}

// UnwrapExpression lets hcl's static analyses (hcl.ExprAsKeyword, hcl.ExprList) see through.
func (e *budgetExpr) UnwrapExpression() hcl.Expression { return e.Expression }

func (b *budget) wrap(x hclsyntax.Expression, kind chargeKind) hclsyntax.Expression {
	if _, done := x.(*budgetExpr); done {
		return x
	}
	return &budgetExpr{&hclsyntax.ParenthesesExpr{Expression: x, SrcRange: x.Range()}, b, kind}
}

// rewriteBody rewrites every expression of body and of its blocks but a variable's type,
// which is a type constraint read from the syntax, never evaluated.
func (b *budget) rewriteBody(body *hclsyntax.Body, blockType string) {
	for name, a := range body.Attributes {
		if blockType == "variable" && name == "type" {
			continue
		}
		a.Expr = b.rewrite(a.Expr)
	}
	for _, blk := range body.Blocks {
		b.rewriteBody(blk.Body, blk.Type)
	}
}

// rewrite rewrites x and everything in it, and returns what takes x's place.
func (b *budget) rewrite(x hclsyntax.Expression) hclsyntax.Expression {
	switch e := x.(type) {
	case *hclsyntax.ForExpr:
		e.CollExpr = b.wrap(b.rewrite(e.CollExpr), checkOnly)
		if e.KeyExpr != nil {
			e.KeyExpr = b.wrap(b.rewrite(e.KeyExpr), chargeValue)
		}
		e.ValExpr = b.wrap(b.rewrite(e.ValExpr), chargeValue)
		if e.CondExpr != nil {
			e.CondExpr = b.wrap(b.rewrite(e.CondExpr), chargeValue)
		}
	case *hclsyntax.TemplateExpr:
		for i, p := range e.Parts {
			if _, lit := p.(*hclsyntax.LiteralValueExpr); !lit {
				e.Parts[i] = b.wrap(b.rewrite(p), chargeText)
			}
		}
	case *hclsyntax.TupleConsExpr:
		literal := true
		for i, el := range e.Exprs {
			e.Exprs[i] = b.rewrite(el)
			literal = literal && isLiteral(e.Exprs[i])
		}
		if !literal {
			return b.wrap(e, chargeElements)
		}
	case *hclsyntax.ObjectConsExpr:
		literal := true
		for i := range e.Items {
			it := &e.Items[i]
			it.KeyExpr = b.rewrite(it.KeyExpr)
			it.ValueExpr = b.rewrite(it.ValueExpr)
			literal = literal && isLiteral(it.KeyExpr) && isLiteral(it.ValueExpr)
		}
		if !literal {
			return b.wrap(e, chargeElements)
		}
	case *hclsyntax.ObjectConsKeyExpr:
		e.Wrapped = b.rewrite(e.Wrapped)
	case *hclsyntax.BinaryOpExpr:
		e.LHS, e.RHS = b.rewrite(e.LHS), b.rewrite(e.RHS)
		if e.Op == hclsyntax.OpMultiply || e.Op == hclsyntax.OpDivide {
			return b.wrap(e, chargeNumber)
		}
	case *hclsyntax.UnaryOpExpr:
		e.Val = b.rewrite(e.Val)
	case *hclsyntax.LiteralValueExpr:
		if e.Val.Type() == cty.Number && !e.Val.IsNull() && numberBytes(e.Val) > 1<<10 {
			return b.wrap(e, chargeNumber)
		}
	case *hclsyntax.FunctionCallExpr:
		for i, a := range e.Args {
			e.Args[i] = b.rewrite(a)
			if converts(e.Name, i) && !(e.ExpandFinal && i == len(e.Args)-1) {
				e.Args[i] = b.wrap(e.Args[i], chargeConversion)
			}
		}
	case *hclsyntax.ConditionalExpr:
		// The results are converted to a type both have: a tuple and a list, or two tuples
		// of different lengths, to a list.
		e.Condition = b.rewrite(e.Condition)
		e.TrueResult = b.wrap(b.rewrite(e.TrueResult), chargeConversion)
		e.FalseResult = b.wrap(b.rewrite(e.FalseResult), chargeConversion)
	case *hclsyntax.IndexExpr:
		e.Collection, e.Key = b.rewrite(e.Collection), b.rewrite(e.Key)
	case *hclsyntax.RelativeTraversalExpr:
		e.Source = b.rewrite(e.Source)
	case *hclsyntax.SplatExpr:
		e.Source, e.Each = b.rewrite(e.Source), b.rewrite(e.Each)
	case *hclsyntax.ParenthesesExpr:
		e.Expression = b.rewrite(e.Expression)
	case *hclsyntax.TemplateJoinExpr:
		e.Tuple = b.rewrite(e.Tuple)
	case *hclsyntax.TemplateWrapExpr:
		e.Wrapped = b.rewrite(e.Wrapped)
	}
	// Left as they are: references (ScopeTraversalExpr), splat symbols and syntax errors.
	return x
}

// isLiteral reports whether x evaluates to what its text says: a literal, a template
// without interpolation, or an object key that is a bare name.
func isLiteral(x hclsyntax.Expression) bool {
	switch e := x.(type) {
	case *hclsyntax.LiteralValueExpr:
		return true
	case *hclsyntax.TemplateExpr:
		return e.IsStringLiteral()
	case *hclsyntax.ObjectConsKeyExpr:
		if hcl.ExprAsKeyword(e.Wrapped) != "" && !e.ForceNonLiteral {
			return true
		}
		return isLiteral(e.Wrapped)
	}
	return false
}

// conversionValues is what converting v, when it is a tuple or an object, to a list, set or
// map counts in values: cty's conversion finds the elements' common type by comparing every
// pair of their types, work that cannot be interrupted, and about fifty comparisons take as
// long as making a value.
func conversionValues(v cty.Value) int64 {
	v, ok := known(v)
	if !ok || !(v.Type().IsTupleType() || v.Type().IsObjectType()) {
		return 0
	}
	n := int64(v.LengthInt())
	return n * (n - 1) / 2 / comparisonsPerValue
}

// comparisonsPerValue is how many comparisons of types count as one value made.
const comparisonsPerValue = 50

// converts reports whether a call of the named function converts its argument i to a list,
// set or map: hcl converts each argument to its parameter's type before the call.
func converts(name string, i int) bool {
	ps, ok := conversionParams()[name]
	if !ok {
		return false
	}
	if i < len(ps.params) {
		return ps.params[i]
	}
	return ps.varParam
}

// collectionParams says which parameters of a function are lists, sets or maps.
type collectionParams struct {
	params   []bool
	varParam bool
}

// conversionParams are the collectionParams of every function of the language.
var conversionParams = sync.OnceValue(func() map[string]collectionParams {
	collection := func(t cty.Type) bool { return t.IsListType() || t.IsSetType() || t.IsMapType() }
	out := map[string]collectionParams{}
	for name, f := range (&inputs{}).functions() {
		var ps collectionParams
		for _, p := range f.Params() {
			ps.params = append(ps.params, collection(p.Type))
		}
		if vp := f.VarParam(); vp != nil {
			ps.varParam = collection(vp.Type)
		}
		out[name] = ps
	}
	return out
})

// readers are the functions that read files: their time reading is not evaluation time.
var readers = map[string]bool{"file": true, "dir": true, "fileset": true, "host_file": true,
	"host_dir": true, "jsonschema": true, "filesha256": true}

// selfCharged are the functions that charge their own results: they are memoized per load,
// and a file read by a thousand steps is one string.
var selfCharged = map[string]bool{"file": true, "jsonschema": true}

// deepResults are the functions whose results are new all through: they are charged with
// everything they hold. Any other function's result is charged for itself (its text, or
// the slots of a collection), not for the values it holds, which it takes from its
// arguments: merge(local.env, {...}) in every step makes one object each time, not local.env
// again.
var deepResults = map[string]bool{"range": true, "jsondecode": true, "split": true, "regexall": true,
	"formatlist": true, "fileset": true}

// functions returns fns, each under the budget (see function).
func (b *budget) functions(fns map[string]function.Function) map[string]function.Function {
	out := make(map[string]function.Function, len(fns))
	for name, f := range fns {
		out[name] = b.function(name, f)
	}
	return out
}

// function returns f under the budget: called only while the budget holds, and only when
// what its arguments say it would make fits (see estimates); what it returns is charged.
//
// The wrapper takes every argument (null, unknown, dynamically typed, marked) and leaves
// them to f's own Call, so that f's checks, refinements and errors are exactly f's. Its
// parameters keep f's types: hcl converts the arguments to them first, as before.
func (b *budget) function(name string, f function.Function) function.Function {
	permissive := func(p function.Parameter) function.Parameter {
		p.AllowNull, p.AllowUnknown, p.AllowDynamicType, p.AllowMarked = true, true, true, true
		return p
	}
	params := f.Params()
	for i := range params {
		params[i] = permissive(params[i])
	}
	var varParam *function.Parameter
	if vp := f.VarParam(); vp != nil {
		p := permissive(*vp)
		varParam = &p
	}
	estimate, reads, charges, deep := estimates[name], readers[name], !selfCharged[name], deepResults[name]
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      params,
		VarParam:    varParam,
		Type:        f.ReturnTypeForValues,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if err := b.check(); err != nil {
				return cty.NilVal, err
			}
			if estimate != nil {
				lv, lb := b.left()
				if err := b.fits(estimate(args, lv, lb)); err != nil {
					return cty.NilVal, err
				}
			}
			start := time.Now()
			v, err := f.Call(args)
			if reads {
				b.pause(time.Since(start))
			}
			if err != nil {
				return v, err
			}
			switch {
			case !charges:
				if err := b.check(); err != nil {
					return cty.NilVal, err
				}
			case deep:
				if err := b.chargeValue(v); err != nil {
					return cty.NilVal, err
				}
			default:
				if err := b.charge(shallow(v)); err != nil {
					return cty.NilVal, err
				}
			}
			return v, nil
		},
	})
}

// report adds diags to the loader's, with each refusal of the budget made into the
// diagnostic at the expression that crossed it, and every later refusal dropped: once the
// budget is exceeded, evaluation stops everywhere, and the first is the one to show.
func (l *loader) report(diags hcl.Diagnostics) {
	for _, d := range diags {
		if extra, ok := hcl.DiagnosticExtra[hclsyntax.FunctionCallDiagExtra](d); ok {
			var be *budgetError
			if errors.As(extra.FunctionCallError(), &be) {
				rng := *d.Subject
				if d.Context != nil {
					rng = *d.Context // the whole call
				}
				*d = *be.diag(rng)
			}
		}
		if _, silent := d.Extra.(silentRefusal); silent {
			continue
		}
		l.diags = append(l.diags, d)
	}
}

// estimates say, from a function's arguments, about how many values and bytes its result
// would hold, for the functions whose result can be far larger than their arguments: a
// call whose result would not fit is refused before it is made. Each is given what is left
// of the budget, and stops counting past it.
var estimates = map[string]func(args []cty.Value, lv, lb int64) (int64, int64){
	"join":       joinEstimate,
	"jsonencode": jsonEstimate,
	"jsondecode": jsondecodeEstimate,
	"format":     formatEstimate,
	"formatlist": formatlistEstimate,
	"indent":     indentEstimate,
	"replace":    replaceEstimate,
	"split":      splitEstimate,
	"regexall":   regexallEstimate,
	"flatten":    flattenEstimate,
	"tolist":     conversionEstimate,
	"toset":      conversionEstimate,
	"tomap":      conversionEstimate,
}

// known returns v unmarked (its top level only: a deep walk of a value that shares its
// structure could take any time), and whether it is known and not null.
func known(v cty.Value) (cty.Value, bool) {
	v, _ = v.Unmark()
	return v, v.IsKnown() && !v.IsNull()
}

// knownString returns v as a string, or "" when it is not a known string.
func knownString(v cty.Value) string {
	if v, ok := known(v); ok && v.Type() == cty.String {
		return v.AsString()
	}
	return ""
}

// huge is an estimate larger than any budget, and small enough to add to.
const huge = math.MaxInt64 / 4

func joinEstimate(args []cty.Value, _, lb int64) (int64, int64) {
	if len(args) == 0 {
		return 0, 0
	}
	sep := int64(len(knownString(args[0])))
	var bytes int64
	for _, l := range args[1:] {
		l, ok := known(l)
		if !ok || !l.CanIterateElements() {
			continue
		}
		if n := int64(l.LengthInt()); sep > 0 && n > lb/sep {
			return 1, huge
		}
		for _, e := range l.AsValueSlice() {
			if bytes += int64(len(knownString(e))) + sep; bytes > lb {
				return 1, bytes
			}
		}
	}
	return 1, bytes
}

func jsonEstimate(args []cty.Value, lv, lb int64) (int64, int64) {
	if len(args) != 1 {
		return 0, 0
	}
	values, bytes := size(args[0], lv, lb)
	return 1, bytes + 2*values + jsonEscapes(args[0], lb)
}

// jsonEscapes is about how many bytes escaping the strings v holds adds to its JSON: five
// for every character encoding/json writes as \u00XX. It stops counting past limit.
func jsonEscapes(v cty.Value, limit int64) int64 {
	var n, seen int64
	stack := []cty.Value{v}
	for len(stack) > 0 && n <= limit && seen <= limit {
		v, ok := known(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		seen++
		switch {
		case !ok:
		case v.Type() == cty.String:
			s := v.AsString()
			seen += int64(len(s))
			for i := 0; i < len(s); i++ {
				if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
					n += 5
				}
			}
		case v.CanIterateElements():
			stack = append(stack, v.AsValueSlice()...)
		}
	}
	return n
}

func jsondecodeEstimate(args []cty.Value, _, _ int64) (int64, int64) {
	if len(args) != 1 {
		return 0, 0
	}
	s := knownString(args[0])
	// Every value but the first follows one of these.
	values := int64(strings.Count(s, ",")+strings.Count(s, "[")+strings.Count(s, "{")+strings.Count(s, ":")) + 1
	return values, int64(len(s)) + values*elemBytes
}

// widths is the sum of the widths and precisions that f, a format, asks for.
func widths(f string) int64 {
	var sum int64
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		// The verb's flags, width, precision and argument index, up to its letter.
		for i++; i < len(f) && f[i] != '%' && !('a' <= f[i]|0x20 && f[i]|0x20 <= 'z'); {
			if f[i] < '0' || f[i] > '9' {
				i++
				continue
			}
			var n int64
			for ; i < len(f) && '0' <= f[i] && f[i] <= '9'; i++ {
				n = min(n*10+int64(f[i]-'0'), huge)
			}
			sum = min(sum+n, huge)
		}
	}
	return sum
}

func formatEstimate(args []cty.Value, lv, lb int64) (int64, int64) {
	if len(args) == 0 {
		return 0, 0
	}
	f := knownString(args[0])
	bytes := int64(len(f)) + widths(f)
	for _, a := range args[1:] {
		_, n := size(a, lv, lb)
		bytes += n
	}
	return 1, bytes
}

func formatlistEstimate(args []cty.Value, lv, lb int64) (int64, int64) {
	if len(args) == 0 {
		return 0, 0
	}
	f := knownString(args[0])
	count, each, lists := int64(1), int64(len(f))+widths(f), int64(0)
	for _, a := range args[1:] {
		_, n := size(a, lv, lb)
		if a, ok := known(a); ok && (a.Type().IsListType() || a.Type().IsTupleType()) {
			count = max(count, int64(a.LengthInt()))
			lists += n
		} else {
			each += n // a scalar is formatted into every element
		}
	}
	if count > huge/(each+elemBytes) {
		return count, huge
	}
	return count + 1, count*(each+elemBytes) + lists
}

func indentEstimate(args []cty.Value, _, _ int64) (int64, int64) {
	if len(args) != 2 {
		return 0, 0
	}
	n, ok := known(args[0])
	if !ok || n.Type() != cty.Number {
		return 0, 0
	}
	spaces, _ := n.AsBigFloat().Float64()
	s := knownString(args[1])
	extra := math.Max(spaces, 0) * float64(strings.Count(s, "\n")+1)
	if extra > huge {
		return 1, huge
	}
	return 1, int64(len(s)) + int64(extra)
}

func replaceEstimate(args []cty.Value, _, _ int64) (int64, int64) {
	if len(args) != 3 {
		return 0, 0
	}
	s, sub, repl := knownString(args[0]), knownString(args[1]), knownString(args[2])
	n := int64(strings.Count(s, sub)) // with sub "", every rune boundary
	if repl != "" && n > huge/int64(len(repl)) {
		return 1, huge
	}
	return 1, int64(len(s)) + n*int64(len(repl))
}

func splitEstimate(args []cty.Value, _, _ int64) (int64, int64) {
	if len(args) != 2 {
		return 0, 0
	}
	sep, s := knownString(args[0]), knownString(args[1])
	n := int64(strings.Count(s, sep) + 1)
	if sep == "" {
		n = int64(utf8.RuneCountInString(s))
	}
	return n + 1, int64(len(s)) + n*elemBytes
}

func regexallEstimate(args []cty.Value, _, _ int64) (int64, int64) {
	if len(args) != 2 {
		return 0, 0
	}
	n := int64(len(knownString(args[1])) + 1) // at most a match at every position
	return n + 1, n * elemBytes
}

func conversionEstimate(args []cty.Value, lv, lb int64) (int64, int64) {
	if len(args) != 1 {
		return 0, 0
	}
	return conversionValues(args[0]), 0
}

func flattenEstimate(args []cty.Value, lv, lb int64) (int64, int64) {
	if len(args) != 1 {
		return 0, 0
	}
	return size(args[0], lv, lb)
}

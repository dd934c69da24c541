package lang

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Budget bounds the evaluation of one load. Recipe files may come from people or models the
// operator does not fully trust, and a few lines of HCL can ask for more than a machine has:
// three nested for expressions over range(1000) make a billion values. The limits are the
// operator's (Options.Budget, which the CLI reads from the environment variables named
// below); nothing in a configuration can change them.
//
// What counts is what evaluation makes beyond the text of the configuration, over the whole
// load (spec/language.md, Evaluation budget, says exactly what): the elements for
// expressions produce, function results, locals and the collections constructors hold, the
// text of templates, and the conversions of long tuples cty makes. A value that is shared is
// counted wherever it is held again: cty values share structure, and a tuple that holds the
// same list twice holds it twice for everything that later reads it (see budgetExpr and
// budget.function). A zero field takes DefaultBudget's.
type Budget struct {
	// MaxValues is the number of values evaluation may make: each string, number, bool,
	// artifact and collection counts one, a collection held again its elements too, and
	// converting a long tuple the comparisons it takes.
	MaxValues int64
	// MaxBytes is the number of bytes evaluation may make in strings and collections: a
	// string counts its UTF-8 bytes, a number the decimal digits its magnitude needs, and a
	// collection 16 bytes per element plus the text of its keys.
	MaxBytes int64
	// Timeout is the wall time evaluation may take, not counting the time spent reading and
	// hashing files (file, dir, fileset, host_file, host_dir, jsonschema, filesha256).
	Timeout time.Duration
}

// DefaultBudget is the budget of a load whose Options leave it unset. An honest project of
// 100,000 steps uses a small part of it; see spec/language.md, Evaluation budget.
var DefaultBudget = Budget{MaxValues: 1_000_000, MaxBytes: 128 << 20, Timeout: 2 * time.Minute}

// The environment variables from which the CLI takes the budget, named in the diagnostic
// that reports it exceeded.
const (
	EnvMaxValues = "FOUNDRY_EVAL_MAX_VALUES"
	EnvMaxBytes  = "FOUNDRY_EVAL_MAX_BYTES"
	EnvTimeout   = "FOUNDRY_EVAL_TIMEOUT"
)

// withDefaults returns b with its zero (or negative) fields set from DefaultBudget.
func (b Budget) withDefaults() Budget {
	if b.MaxValues <= 0 {
		b.MaxValues = DefaultBudget.MaxValues
	}
	if b.MaxBytes <= 0 {
		b.MaxBytes = DefaultBudget.MaxBytes
	}
	if b.Timeout <= 0 {
		b.Timeout = DefaultBudget.Timeout
	}
	return b
}

// Usage is what the evaluation of a load took of its budget.
type Usage struct {
	Values int64
	Bytes  int64
	Time   time.Duration
}

// limit names one of the limits of a Budget.
type limit int32

const (
	noLimit limit = iota
	valuesLimit
	bytesLimit
	timeLimit
)

// budget is the running count of one load's evaluation against its Budget. It is shared by
// the loader's forks, so every count is atomic. Once a limit is crossed every later charge
// and check fails too, so that evaluation stops wherever it is, on every goroutine.
type budget struct {
	limits Budget
	start  time.Time    // when evaluation began (see begin)
	paused atomic.Int64 // nanoseconds spent in functions that read files
	values atomic.Int64
	bytes  atomic.Int64
	over   atomic.Int32 // the limit crossed first, or noLimit
}

func newBudget(limits Budget) *budget {
	return &budget{limits: limits.withDefaults(), start: time.Now()}
}

// begin starts the clock: parsing is not evaluation. Call it before any evaluation starts.
func (b *budget) begin() { b.start = time.Now() }

// elapsed is the evaluation time so far.
func (b *budget) elapsed() time.Duration {
	return time.Since(b.start) - time.Duration(b.paused.Load())
}

// pause takes d, spent reading files, off the evaluation time.
func (b *budget) pause(d time.Duration) { b.paused.Add(int64(d)) }

func (b *budget) usage() Usage {
	return Usage{Values: b.values.Load(), Bytes: b.bytes.Load(), Time: b.elapsed()}
}

// exceeded reports whether a limit has been crossed.
func (b *budget) exceeded() bool { return b.over.Load() != int32(noLimit) }

// budgetError is a refusal: evaluation crossed a limit, here (first) or before.
type budgetError struct {
	b     *budget
	limit limit
	first bool // this refusal is the one that crossed it
}

func (e *budgetError) Error() string { return "evaluation budget exceeded: " + e.b.describe(e.limit) }

// cross records that l was crossed and returns the refusal: the first to cross any limit
// is reported, every later refusal is silent (see loader.report).
func (b *budget) cross(l limit) *budgetError {
	if b.over.CompareAndSwap(int32(noLimit), int32(l)) {
		return &budgetError{b: b, limit: l, first: true}
	}
	return &budgetError{b: b, limit: limit(b.over.Load())}
}

// check refuses when a limit has been crossed or the time is up.
func (b *budget) check() *budgetError {
	if l := limit(b.over.Load()); l != noLimit {
		return &budgetError{b: b, limit: l}
	}
	if b.elapsed() > b.limits.Timeout {
		return b.cross(timeLimit)
	}
	return nil
}

// charge counts values and bytes made, and refuses when that crosses a limit.
func (b *budget) charge(values, bytes int64) *budgetError {
	if err := b.check(); err != nil {
		return err
	}
	if b.values.Add(values) > b.limits.MaxValues {
		return b.cross(valuesLimit)
	}
	if b.bytes.Add(bytes) > b.limits.MaxBytes {
		return b.cross(bytesLimit)
	}
	return nil
}

// fits refuses, before anything is made, what would cross a limit if it were: a function
// whose result would be too large is not called.
func (b *budget) fits(values, bytes int64) *budgetError {
	if err := b.check(); err != nil {
		return err
	}
	if b.values.Load()+values > b.limits.MaxValues {
		return b.cross(valuesLimit)
	}
	if b.bytes.Load()+bytes > b.limits.MaxBytes {
		return b.cross(bytesLimit)
	}
	return nil
}

// left is what remains of the budget; a walk of a value stops once it has seen more.
func (b *budget) left() (values, bytes int64) {
	return max(b.limits.MaxValues-b.values.Load(), 0), max(b.limits.MaxBytes-b.bytes.Load(), 0)
}

// chargeValue charges v with everything it holds.
func (b *budget) chargeValue(v cty.Value) *budgetError {
	lv, lb := b.left()
	values, bytes := size(v, lv, lb)
	return b.charge(values, bytes)
}

// chargeElements charges the elements of v, the result of a tuple or object constructor,
// that hold other values. The constructor itself and its other elements are as large as
// the text they were written in; a collection it holds may be anything, and the same one
// twice is two.
func (b *budget) chargeElements(v cty.Value) *budgetError {
	v, _ = v.Unmark()
	if !v.IsKnown() || v.IsNull() {
		return b.check()
	}
	ty := v.Type()
	var values, bytes int64
	lv, lb := b.left()
	switch {
	case ty.IsTupleType():
		var elems []cty.Value
		for i, et := range ty.TupleElementTypes() {
			if !holdsValues(et) {
				continue
			}
			if elems == nil {
				elems = v.AsValueSlice()
			}
			n, m := size(elems[i], lv-values, lb-bytes)
			values, bytes = values+n, bytes+m
		}
	case ty.IsObjectType():
		for name, at := range ty.AttributeTypes() {
			if holdsValues(at) {
				n, m := size(v.GetAttr(name), lv-values, lb-bytes)
				values, bytes = values+n, bytes+m
			}
		}
	}
	return b.charge(values, bytes)
}

// holdsValues reports whether values of type t may hold other values.
func holdsValues(t cty.Type) bool {
	return t.IsCollectionType() || t.IsTupleType() || t.IsObjectType()
}

// elemBytes is what each element of a collection counts in bytes: the reference to it.
const elemBytes = 16

// shallow is the size of v itself: one value, and its text, digits, or the slots (and keys)
// of its elements, not the values it holds.
func shallow(v cty.Value) (values, bytes int64) {
	v, _ = v.Unmark()
	if !v.IsKnown() || v.IsNull() {
		return 1, 0
	}
	switch ty := v.Type(); {
	case ty == cty.String:
		return 1, int64(len(v.AsString()))
	case ty == cty.Number:
		return 1, numberBytes(v)
	case ty.IsObjectType():
		for name := range ty.AttributeTypes() {
			bytes += int64(len(name)) + elemBytes
		}
		return 1, bytes
	case ty.IsMapType():
		for k := range v.AsValueMap() {
			bytes += int64(len(k)) + elemBytes
		}
		return 1, bytes
	case ty.IsCollectionType() || ty.IsTupleType():
		return 1, int64(v.LengthInt()) * elemBytes
	}
	return 1, 0
}

// size returns the number of values v holds (itself, and the elements of a collection,
// recursively) and the bytes it holds (see Budget.MaxBytes), counting a value held twice
// twice. It stops as soon as either count passes its limit, so that walking a value that
// shares its structure costs no more than the budget it would take.
func size(v cty.Value, maxValues, maxBytes int64) (values, bytes int64) {
	if !holdsValues(v.Type()) {
		return shallow(v)
	}
	stack := []cty.Value{v}
	for len(stack) > 0 && values <= maxValues && bytes <= maxBytes {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		values++
		v, _ = v.Unmark()
		if !v.IsKnown() || v.IsNull() {
			continue
		}
		ty := v.Type()
		switch {
		case ty == cty.String:
			bytes += int64(len(v.AsString()))
		case ty == cty.Number:
			bytes += numberBytes(v)
		case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
			n := int64(v.LengthInt())
			bytes += n * elemBytes
			if values+n > maxValues || bytes > maxBytes {
				return values + n, bytes
			}
			stack = append(stack, v.AsValueSlice()...)
		case ty.IsMapType():
			n := int64(v.LengthInt())
			bytes += n * elemBytes
			if values+n > maxValues || bytes > maxBytes {
				return values + n, bytes
			}
			for k, e := range v.AsValueMap() {
				bytes += int64(len(k))
				stack = append(stack, e)
			}
		case ty.IsObjectType():
			for name := range ty.AttributeTypes() {
				bytes += int64(len(name)) + elemBytes
				stack = append(stack, v.GetAttr(name))
			}
		}
	}
	return values, bytes
}

// numberBytes is about the number of decimal digits v's magnitude needs: what converting it
// to a string makes. 1e600000000 is a short literal and a 600 MB string.
func numberBytes(v cty.Value) int64 {
	f := v.AsBigFloat()
	if f.IsInf() {
		return 4
	}
	return int64(math.Abs(float64(f.MantExp(nil))) * math.Log10(2))
}

// describe says what l is, how large, and how the operator raises it.
func (b *budget) describe(l limit) string {
	switch l {
	case valuesLimit:
		return fmt.Sprintf("%d values made (set %s to raise it)", b.limits.MaxValues, EnvMaxValues)
	case bytesLimit:
		return fmt.Sprintf("%d bytes held in strings and collections (set %s to raise it)", b.limits.MaxBytes, EnvMaxBytes)
	default:
		return fmt.Sprintf("%v of evaluation time (set %s to raise it)", b.limits.Timeout, EnvTimeout)
	}
}

// budgetSummary is the summary of the diagnostic of an exceeded budget.
const budgetSummary = "Evaluation budget exceeded"

// diag is the diagnostic of a refusal at rng, the expression that crossed the limit. A
// silent refusal (one after the first) is marked for loader.report to drop.
func (e *budgetError) diag(rng hcl.Range) *hcl.Diagnostic {
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: budgetSummary, Subject: &rng}
	if !e.first {
		d.Extra = silentRefusal{}
		d.Detail = "Evaluation stopped: its budget was exceeded elsewhere."
		return d
	}
	var what, raise string
	switch e.limit {
	case valuesLimit:
		what = fmt.Sprintf("%d values made by for expressions, functions, constructors and locals", e.b.limits.MaxValues)
		raise = EnvMaxValues + "=N"
	case bytesLimit:
		what = fmt.Sprintf("%d bytes (%s) held in strings and collections", e.b.limits.MaxBytes, FormatSize(e.b.limits.MaxBytes))
		raise = EnvMaxBytes + "=SIZE (for example 512MiB)"
	default:
		what = fmt.Sprintf("%v of evaluation time", e.b.limits.Timeout)
		raise = EnvTimeout + "=DURATION (for example 5m)"
	}
	d.Detail = fmt.Sprintf("Evaluating this expression took the configuration past its budget of %s, "+
		"counted over the whole load. Only the operator can raise it, by setting %s in foundry's "+
		"environment; no configuration can.", what, raise)
	return d
}

// silentRefusal marks the diagnostic of a refusal after the first.
type silentRefusal struct{}

// FormatSize writes n bytes in the largest binary unit that divides it, as ParseSize reads it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

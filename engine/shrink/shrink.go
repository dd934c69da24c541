// Package shrink finds a small JSON value that still makes a predicate fail: delta
// debugging over the value (drop array elements and object members, shorten strings, move
// numbers toward zero, true to false) while the predicate says the reduced value still
// fails. The evaluator uses it to report the smallest counterexample it can find of a
// failing case (spec/capability.md §6), each call of the predicate being one more run of
// the candidate, charged as a probe.
//
// Guarantees: Shrink is deterministic (the same value, predicate and budget give the same
// result and the same calls, in the same order); it never calls the predicate more than
// its budget, nor twice with the same value; every reduction it keeps strictly decreases a
// well-founded measure, so it ends even with an unbounded budget; and the value it returns
// is the original (its bytes untouched) or one for which the predicate returned true.
// Object member names are never changed (a contract's schema names them) and a value never
// changes JSON type (a reduced value of another type would mostly be refused by the input
// schema, wasting a run). It imports nothing of Foundry and must never run anything itself.
package shrink

import (
	"fmt"
	"iter"
	"math/big"
	"slices"
	"strings"
)

// Predicate reports whether a candidate value (compact JSON) still fails. An error stops
// the shrinking and is returned.
type Predicate func(value []byte) (fails bool, err error)

// Result is what Shrink found.
type Result struct {
	// Value is the smallest failing value found: the original bytes when nothing smaller
	// failed, otherwise compact JSON (member order and number literals as reduced).
	Value []byte
	// Calls is how many times the predicate was called (each a run of the candidate);
	// Reductions how many of those failed and were kept.
	Calls, Reductions int
}

// Shrinks reports whether the value changed.
func (r Result) Shrunk() bool { return r.Reductions > 0 }

// Shrink reduces value, one JSON value, while fails says the reduction still fails,
// calling fails at most budget times. value itself is assumed to fail (it is not checked).
// It returns an error for a value that is not JSON (or nests deeper than 1000, or holds a
// number whose exponent is beyond ±400), or the first error fails returns.
//
// The reductions are tried first-improvement: candidates are generated from the current
// value, largest reductions first and the outermost first (the whole array emptied, then
// halves of it dropped, then quarters, … single elements, then each element reduced in
// turn), the first that still fails is kept, and generation starts over from it. It stops
// when no candidate of the current value fails, or the budget is spent.
func Shrink(value []byte, fails Predicate, budget int) (Result, error) {
	cur, err := parse(value)
	if err != nil {
		return Result{}, fmt.Errorf("shrinking: %w", err)
	}
	res := Result{Value: value}
	tried := map[string]bool{string(encode(cur)): true}
	for res.Calls < budget {
		improved := false
		for cand := range reductions(cur) {
			b := encode(cand)
			if tried[string(b)] {
				continue
			}
			tried[string(b)] = true
			res.Calls++
			ok, err := fails(b)
			if err != nil {
				return res, err
			}
			if ok {
				cur, res.Value, improved = cand, b, true
				res.Reductions++
				break
			}
			if res.Calls >= budget {
				break
			}
		}
		if !improved {
			break
		}
	}
	return res, nil
}

// reductions yields the values one step smaller than n, largest steps first, n's own
// before those inside it.
func reductions(n *node) iter.Seq[*node] {
	return func(yield func(*node) bool) {
		switch n.kind {
		case kBool:
			if n.b {
				yield(&node{kind: kBool})
			}
		case kNumber:
			for lit := range numberReductions(n.lit) {
				if !yield(&node{kind: kNumber, lit: lit}) {
					return
				}
			}
		case kString:
			for s := range chunksDropped([]rune(n.s)) {
				if !yield(&node{kind: kString, s: string(s)}) {
					return
				}
			}
		case kArray:
			for es := range chunksDropped(n.elems) {
				if !yield(&node{kind: kArray, elems: es}) {
					return
				}
			}
			// Equal elements reduced together: a failure that needs two equal elements
			// (a duplicate) is lost by reducing either alone.
			for _, g := range duplicates(n.elems) {
				for r := range reductions(n.elems[g[0]]) {
					es := append([]*node(nil), n.elems...)
					for _, j := range g {
						es[j] = r
					}
					if !yield(&node{kind: kArray, elems: es}) {
						return
					}
				}
			}
			for i, e := range n.elems {
				for r := range reductions(e) {
					es := append([]*node(nil), n.elems...)
					es[i] = r
					if !yield(&node{kind: kArray, elems: es}) {
						return
					}
				}
			}
		case kObject:
			for ms := range chunksDropped(n.members) {
				if !yield(&node{kind: kObject, members: ms}) {
					return
				}
			}
			for i, m := range n.members {
				for r := range reductions(m.val) {
					ms := append([]member(nil), n.members...)
					ms[i] = member{key: m.key, val: r}
					if !yield(&node{kind: kObject, members: ms}) {
						return
					}
				}
			}
		}
	}
}

// duplicates groups the indexes of equal scalar elements (as encoded), each group in order,
// the groups in the order of their first element; elements without an equal are left out.
func duplicates(es []*node) [][]int {
	at := map[string]int{}
	var groups [][]int
	for i, e := range es {
		if e.kind == kArray || e.kind == kObject {
			continue // scalars only: a duplicate container is rarer than the cost of encoding each
		}
		x := string(encode(e))
		g, ok := at[x]
		if !ok {
			g = len(groups)
			at[x] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return slices.DeleteFunc(groups, func(g []int) bool { return len(g) < 2 })
}

// chunksDropped yields s without one chunk of it: first everything, then each half, each
// quarter, … each single element (ddmin's complements, in order of size).
func chunksDropped[T any](s []T) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		if len(s) == 0 {
			return
		}
		if !yield(s[:0:0]) {
			return
		}
		for size := len(s) / 2; size >= 1; size /= 2 {
			for at := 0; at < len(s); at += size {
				end := min(at+size, len(s))
				if at == 0 && end == len(s) {
					continue // everything, tried first
				}
				out := make([]T, 0, len(s)-(end-at))
				out = append(append(out, s[:at]...), s[end:]...)
				if !yield(out) {
					return
				}
			}
		}
	}
}

// numberReductions yields the literals one step toward zero from lit, largest steps
// first: 0; the magnitude when negative; dropped fraction digits (truncated toward zero,
// the integer first); the fraction without its integer part; and for an integer, the value
// moved toward zero by half its magnitude, a quarter, … 1. Each strictly decreases |x|, or
// keeps it and drops the sign. They are made as they are asked for: a long integer has as
// many as it has bits.
func numberReductions(lit string) iter.Seq[string] {
	return func(yield func(string) bool) {
		r, err := rat(lit)
		if err != nil || r.Sign() == 0 {
			return
		}
		if !yield("0") {
			return
		}
		if r.Sign() < 0 && !yield(decimal(new(big.Rat).Neg(r), fractionDigits(r))) {
			return
		}
		if !r.IsInt() {
			digits := fractionDigits(r)
			for k := 0; k < digits; k++ {
				if !yield(decimal(r, k)) {
					return
				}
			}
			// The fraction alone: a failure that needs a fraction, not the integer part.
			whole := new(big.Rat).SetInt(new(big.Int).Quo(r.Num(), r.Denom()))
			if whole.Sign() != 0 {
				yield(decimal(new(big.Rat).Sub(r, whole), digits))
			}
			return
		}
		x := r.Num()
		mag := new(big.Int).Abs(x)
		for d := new(big.Int).Rsh(mag, 1); d.Sign() > 0; d.Rsh(d, 1) {
			y := new(big.Int).Sub(mag, d)
			if x.Sign() < 0 {
				y.Neg(y)
			}
			if !yield(y.String()) {
				return
			}
		}
	}
}

// fractionDigits is how many decimal digits r's fraction needs: r is a decimal literal's
// value, so its denominator is 2^a·5^b, which needs max(a, b) digits.
func fractionDigits(r *big.Rat) int {
	d := new(big.Int).Set(r.Denom())
	count := func(p int64) int {
		n, q, m := 0, new(big.Int), new(big.Int)
		for {
			q.QuoRem(d, big.NewInt(p), m)
			if m.Sign() != 0 {
				return n
			}
			d.Set(q)
			n++
		}
	}
	return max(count(2), count(5))
}

// decimal writes r truncated toward zero to k fraction digits, without an exponent.
func decimal(r *big.Rat, k int) string {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil)
	n := new(big.Int).Mul(r.Num(), scale)
	n.Quo(n, r.Denom()) // truncates toward zero
	neg := n.Sign() < 0
	digits := new(big.Int).Abs(n).String()
	if k > 0 {
		if len(digits) <= k {
			digits = strings.Repeat("0", k-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-k] + "." + digits[len(digits)-k:]
		digits = strings.TrimRight(strings.TrimRight(digits, "0"), ".")
	}
	if neg && digits != "0" {
		digits = "-" + digits
	}
	return digits
}

package verdict

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// number is a JSON number literal read exactly: value = (-1)^neg × digits × 10^exp, with
// digits free of leading and trailing zeros. Zero is digits "" (and never negative), so -0,
// 0.0 and 0e5 are the same number, as are 1, 1.0, 10e-1 and 0.1e1.
type number struct {
	lit    string // the literal as written, for messages
	neg    bool
	digits string
	exp    int64
}

// maxExp bounds exponent arithmetic: an exponent this large in magnitude only occurs in
// literals that underflow to zero as doubles (an overflowing one is refused by the strict
// JSON check), and saturating it keeps parsing linear and overflow-free.
const maxExp = 1 << 40

// parseNumber reads a literal that is known to match the RFC 8259 number grammar.
func parseNumber(lit string) number {
	n := number{lit: lit}
	s := lit
	if strings.HasPrefix(s, "-") {
		n.neg, s = true, s[1:]
	}
	var e int64
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		es := s[i+1:]
		s = s[:i]
		eneg := strings.HasPrefix(es, "-")
		es = strings.TrimLeft(es, "+-")
		for _, c := range es {
			if e < maxExp {
				e = e*10 + int64(c-'0')
			}
		}
		e = min(e, maxExp)
		if eneg {
			e = -e
		}
	}
	intPart, frac, _ := strings.Cut(s, ".")
	d := strings.TrimLeft(intPart+frac, "0")
	e -= int64(len(frac))
	t := strings.TrimRight(d, "0")
	e += int64(len(d) - len(t))
	if t == "" {
		return number{lit: lit}
	}
	n.digits, n.exp = t, e
	return n
}

// isInt reports whether n is an integer (by value, however it is written) small enough to
// be finite as a double; integers compare exactly.
func (n number) isInt() bool {
	return n.digits == "" || n.exp >= 0 && int64(len(n.digits))+n.exp <= 400
}

// same reports whether a and b denote the same decimal value.
func (a number) same(b number) bool {
	return a.neg == b.neg && a.digits == b.digits && a.exp == b.exp
}

// float returns the double nearest to n (±Inf only for literals the strict check refuses).
func (n number) float() float64 {
	f, _ := strconv.ParseFloat(n.lit, 64)
	return f
}

// bigInt returns n as a big.Float holding the integer exactly; n must satisfy isInt.
func (n number) bigInt() *big.Float {
	i := new(big.Int)
	if n.digits != "" {
		i.SetString(n.digits, 10)
		i.Mul(i, new(big.Int).Exp(big.NewInt(10), big.NewInt(n.exp), nil))
		if n.neg {
			i.Neg(i)
		}
	}
	return new(big.Float).SetPrec(intPrec).SetInt(i)
}

// intPrec holds any integer isInt admits (< 10^400 < 2^1329) times a double's 53-bit
// mantissa exactly, so integer comparisons under tolerance involve no rounding.
const intPrec = 1400

// tolerance is the numeric equivalence's tolerance, sanitized: a NaN or negative bound is 0.
type tolerance struct {
	abs, rel float64
	nanEqual bool
}

func clean(x float64) float64 {
	if !(x >= 0) { // NaN or negative
		return 0
	}
	return x
}

// numbersEqual compares two JSON numbers: integers exactly (with big arithmetic), anything
// else as the nearest doubles, in both cases within |a-b| <= max(abs, rel*max(|a|,|b|)).
// The zero tolerance makes this the json equivalence's number equality.
func numbersEqual(a, b number, tol tolerance) bool {
	if a.same(b) {
		return true
	}
	if a.isInt() && b.isInt() {
		if tol.abs == 0 && tol.rel == 0 {
			return false
		}
		x, y := a.bigInt(), b.bigInt()
		diff := new(big.Float).SetPrec(intPrec).Sub(x, y)
		diff.Abs(diff)
		m := new(big.Float).SetPrec(intPrec).Abs(x)
		if ay := new(big.Float).SetPrec(intPrec).Abs(y); ay.Cmp(m) > 0 {
			m = ay
		}
		bound := new(big.Float).SetPrec(intPrec).SetFloat64(tol.rel)
		bound.Mul(bound, m) // m > 0: a and b differ, so not both are zero
		if abs := new(big.Float).SetPrec(intPrec).SetFloat64(tol.abs); abs.Cmp(bound) > 0 {
			bound = abs
		}
		return diff.Cmp(bound) <= 0
	}
	return floatsEqual(a.float(), b.float(), tol)
}

// floatsEqual compares doubles under the tolerance. Infinities equal only themselves and
// are never within tolerance of anything; NaN equals NaN only when tol.nanEqual.
func floatsEqual(x, y float64, tol tolerance) bool {
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return math.IsNaN(x) && math.IsNaN(y) && tol.nanEqual
	case math.IsInf(x, 0) || math.IsInf(y, 0):
		return x == y
	case x == y: // also -0 == 0
		return true
	}
	bound := max(tol.abs, tol.rel*max(math.Abs(x), math.Abs(y)))
	return math.Abs(x-y) <= bound
}

// Tokens that stand for the non-finite numbers under the numeric equivalence, in expected
// and actual outputs alike (JSON has no literal for them).
const (
	tokenNaN    = "NaN"
	tokenPosInf = "Infinity"
	tokenNegInf = "-Infinity"
)

// special returns the double a token stands for.
func special(s string) (float64, bool) {
	switch s {
	case tokenNaN:
		return math.NaN(), true
	case tokenPosInf:
		return math.Inf(1), true
	case tokenNegInf:
		return math.Inf(-1), true
	}
	return 0, false
}

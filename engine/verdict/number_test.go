package verdict

import (
	"math"
	"testing"
)

func TestParseNumber(t *testing.T) {
	for _, tc := range []struct {
		lit    string
		neg    bool
		digits string
		exp    int64
		isInt  bool
	}{
		{"0", false, "", 0, true},
		{"-0", false, "", 0, true},
		{"-0.0e-7", false, "", 0, true},
		{"1", false, "1", 0, true},
		{"1.0", false, "1", 0, true},
		{"10e-1", false, "1", 0, true},
		{"0.1e1", false, "1", 0, true},
		{"100", false, "1", 2, true},
		{"1.5", false, "15", -1, false},
		{"-0.00120", true, "12", -4, false},
		{"9223372036854775807", false, "9223372036854775807", 0, true},
		{"-9223372036854775808", true, "9223372036854775808", 0, true},
		{"9.223372036854775807E+18", false, "9223372036854775807", 0, true},
		{"1e-99999999999999999999999", false, "1", -maxExp, false},
		{"1e308", false, "1", 308, true},
	} {
		n := parseNumber(tc.lit)
		if n.neg != tc.neg || n.digits != tc.digits || n.exp != tc.exp || n.isInt() != tc.isInt {
			t.Errorf("parseNumber(%s) = %+v isInt=%v, want neg=%v digits=%q exp=%d isInt=%v", tc.lit, n, n.isInt(), tc.neg, tc.digits, tc.exp, tc.isInt)
		}
	}
}

func TestNumbersEqual(t *testing.T) {
	zero := tolerance{}
	for _, tc := range []struct {
		a, b string
		tol  tolerance
		want bool
	}{
		{"9223372036854775807", "9223372036854775806", zero, false},
		{"9223372036854775807", "9223372036854775807.0", zero, true},
		{"-9223372036854775808", "-9.223372036854775808e18", zero, true},
		{"18446744073709551615", "18446744073709551614", zero, false},
		{"9007199254740993", "9007199254740992", zero, false},
		{"0.1", "0.10000000000000001", zero, true}, // same nearest double
		{"1e-400", "0", zero, true},                // underflows to the same double
		{"-0", "0", zero, true},
		{"9223372036854775807", "9223372036854775806", tolerance{abs: 1}, true},
		{"9223372036854775807", "9223372036854775806", tolerance{abs: 0.999}, false},
		{"9223372036854775807", "9223372036854775805", tolerance{rel: 2.1e-19}, false}, // 2 > 2.1e-19 × 9.22e18 ≈ 1.94
		{"9223372036854775807", "9223372036854775805", tolerance{rel: 2.2e-19}, true},  // 2 ≤ ≈ 2.03
		{"1", "1.5", tolerance{abs: 0.5}, true},
		{"1", "1.5000001", tolerance{abs: 0.5}, false},
		{"1e308", "-1e308", tolerance{rel: 1}, false}, // |a-b| overflows to +Inf
		{"1e308", "-1e308", tolerance{rel: 2}, true},
	} {
		a, b := parseNumber(tc.a), parseNumber(tc.b)
		if got := numbersEqual(a, b, tc.tol); got != tc.want {
			t.Errorf("numbersEqual(%s, %s, %+v) = %v, want %v", tc.a, tc.b, tc.tol, got, tc.want)
		}
		if got := numbersEqual(b, a, tc.tol); got != tc.want {
			t.Errorf("numbersEqual(%s, %s, %+v) = %v, want %v (not symmetric)", tc.b, tc.a, tc.tol, got, tc.want)
		}
	}
}

func TestFloatsEqual(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	huge := tolerance{abs: math.MaxFloat64, rel: 1e300}
	for _, tc := range []struct {
		x, y float64
		tol  tolerance
		want bool
	}{
		{nan, nan, tolerance{}, false},
		{nan, nan, tolerance{nanEqual: true}, true},
		{nan, 0, tolerance{nanEqual: true}, false},
		{nan, inf, tolerance{nanEqual: true}, false},
		{inf, inf, tolerance{}, true},
		{-inf, -inf, tolerance{}, true},
		{inf, -inf, huge, false},
		{inf, math.MaxFloat64, huge, false},
		{-inf, -math.MaxFloat64, huge, false},
		{math.Copysign(0, -1), 0, tolerance{}, true},
	} {
		if got := floatsEqual(tc.x, tc.y, tc.tol); got != tc.want {
			t.Errorf("floatsEqual(%v, %v, %+v) = %v, want %v", tc.x, tc.y, tc.tol, got, tc.want)
		}
	}
}

package shrink

import (
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
)

// decode is the test's view of a candidate value.
func decode(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("candidate %s is not JSON: %v", b, err)
	}
	return v
}

func TestShrinkFindsTheSmallestFailingValue(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		fails          func(v any) bool
	}{
		{"a duplicate in a list", `[5,3,9,3,1,7]`, `[0,0]`, func(v any) bool {
			seen := map[string]bool{}
			for _, e := range v.([]any) {
				if seen[e.(json.Number).String()] {
					return true
				}
				seen[e.(json.Number).String()] = true
			}
			return false
		}},
		{"a number above a bound", `[12,7000,-3]`, `[1001]`, func(v any) bool {
			for _, e := range v.([]any) {
				if n, _ := e.(json.Number).Int64(); n > 1000 {
					return true
				}
			}
			return false
		}},
		{"a negative number", `{"a":[1,2],"b":-250,"c":"x"}`, `{"b":-1}`, func(v any) bool {
			m := v.(map[string]any)
			n, ok := m["b"].(json.Number)
			return ok && strings.HasPrefix(n.String(), "-")
		}},
		{"a tab in a string", `["hello","wor\tld","ok"]`, `["\t"]`, func(v any) bool {
			for _, e := range v.([]any) {
				if strings.Contains(e.(string), "\t") {
					return true
				}
			}
			return false
		}},
		{"a fraction", `[3.14159]`, `[0.1]`, func(v any) bool {
			xs := v.([]any)
			if len(xs) == 0 {
				return false
			}
			r, _ := new(big.Rat).SetString(xs[0].(json.Number).String())
			return r != nil && !r.IsInt()
		}},
		{"true stays true when it must", `{"flag":true,"n":4}`, `{"flag":true}`, func(v any) bool {
			return v.(map[string]any)["flag"] == true
		}},
		{"a 64-bit extreme stays exact", `[9223372036854775807,1]`, `[9223372036854775807]`, func(v any) bool {
			for _, e := range v.([]any) {
				if e.(json.Number).String() == "9223372036854775807" {
					return true
				}
			}
			return false
		}},
		{"an empty value", `[1,[2,[3]]]`, `[]`, func(any) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			res, err := Shrink([]byte(tc.in), func(b []byte) (bool, error) {
				calls = append(calls, string(b))
				return tc.fails(decode(t, b)), nil
			}, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Value) != tc.want {
				t.Errorf("shrank %s to %s, want %s", tc.in, res.Value, tc.want)
			}
			if res.Calls != len(calls) {
				t.Errorf("reported %d calls, made %d", res.Calls, len(calls))
			}
			sorted := slices.Clone(calls)
			slices.Sort(sorted)
			if len(slices.Compact(sorted)) != len(calls) {
				t.Errorf("the predicate was called twice with one value: %q", calls)
			}
		})
	}
}

func TestShrinkKeepsTheOriginalBytesWhenNothingSmallerFails(t *testing.T) {
	in := `{ "b" : 1.50, "a" : [ 1e2 ] }`
	res, err := Shrink([]byte(in), func([]byte) (bool, error) { return false, nil }, 100)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != in || res.Shrunk() {
		t.Errorf("got %s (shrunk %v), want the original bytes", res.Value, res.Shrunk())
	}
}

func TestShrinkKeepsMemberOrderAndNames(t *testing.T) {
	// Only "z" matters; the other members go, "z" keeps its name and place.
	res, err := Shrink([]byte(`{"z":"<&>","a":1,"m":2}`), func(b []byte) (bool, error) {
		return strings.Contains(string(b), `"z":"<&>"`), nil
	}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != `{"z":"<&>"}` {
		t.Errorf("got %s", res.Value)
	}
}

func TestShrinkStaysWithinItsBudget(t *testing.T) {
	in := `[` + strings.Repeat(`"abcdefgh",`, 200) + `1]`
	for _, budget := range []int{0, 1, 7, 50} {
		calls := 0
		res, err := Shrink([]byte(in), func(b []byte) (bool, error) {
			calls++
			return strings.Contains(string(b), "1"), nil
		}, budget)
		if err != nil {
			t.Fatal(err)
		}
		if calls > budget || res.Calls != calls {
			t.Errorf("budget %d: %d calls, reported %d", budget, calls, res.Calls)
		}
	}
}

func TestShrinkIsDeterministic(t *testing.T) {
	in := []byte(`{"xs":[4,8,15,16,23,42],"name":"Oceanic","k":-815.5}`)
	run := func() (Result, []string) {
		var calls []string
		res, err := Shrink(in, func(b []byte) (bool, error) {
			calls = append(calls, string(b))
			return strings.Count(string(b), ",") >= 2, nil
		}, 40)
		if err != nil {
			t.Fatal(err)
		}
		return res, calls
	}
	r1, c1 := run()
	r2, c2 := run()
	if string(r1.Value) != string(r2.Value) || !slices.Equal(c1, c2) {
		t.Errorf("two runs differ: %s vs %s", r1.Value, r2.Value)
	}
}

func TestShrinkStopsAtThePredicatesError(t *testing.T) {
	boom := errors.New("sandbox gone")
	_, err := Shrink([]byte(`[1,2]`), func([]byte) (bool, error) { return false, boom }, 10)
	if !errors.Is(err, boom) {
		t.Errorf("got %v, want the predicate's error", err)
	}
}

func TestShrinkRefusesWhatIsNotJSON(t *testing.T) {
	for _, in := range []string{``, `[1,`, `{"a":}`, `1 2`, `1e999999999`, `1e401`, `[1E-401]`, strings.Repeat("[", 1002) + strings.Repeat("]", 1002)} {
		if _, err := Shrink([]byte(in), func([]byte) (bool, error) { return true, nil }, 10); err == nil {
			t.Errorf("%.20q: no error", in)
		}
	}
}

func TestNumberReductions(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want []string
	}{
		{"0", nil},
		{"-0", nil},
		{"8", []string{"0", "4", "6", "7"}},
		{"-8", []string{"0", "8", "-4", "-6", "-7"}},
		{"1", []string{"0"}},
		{"1e2", []string{"0", "50", "75", "88", "94", "97", "99"}},
		{"-2.75", []string{"0", "2.75", "-2", "-2.7", "-0.75"}},
		{"0.05", []string{"0", "0", "0"}},
		{"1.50", []string{"0", "1", "0.5"}},
	} {
		if got := slices.Collect(numberReductions(tc.lit)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.lit, got, tc.want)
		}
	}
}

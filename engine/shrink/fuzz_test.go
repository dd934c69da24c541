package shrink

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzShrink shrinks arbitrary bytes under a predicate the fuzzer picks (the value's
// encoding holds at least k of byte c) and checks the package's guarantees: no panic; what
// is not JSON is an error; within the budget; never the same value twice; every value
// handed to the predicate is JSON of the original's type; the result is the original bytes
// or a value the predicate said fails; the same calls twice over; and, when the budget was
// not what stopped it, a fixpoint: shrinking the result again reduces nothing.
func FuzzShrink(f *testing.F) {
	for _, s := range []string{`[5,3,9,3,1,7]`, `{"a":[1,2],"b":-250,"c":"x"}`, `"wor\tld"`, `[3.14159,-2.5e3,1e-7]`,
		`{"z":{"y":[true,false,null]}}`, `[9223372036854775807,-9223372036854775808]`, `[[],{},""]`, `1e999`} {
		f.Add([]byte(s), byte('1'), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, c byte, k uint8) {
		if len(in) > 256 {
			return
		}
		const budget = 2000
		fails := func(b []byte) bool { return bytes.Count(b, []byte{c}) >= int(k%4) }
		kindOf := func(b []byte) byte { return bytes.TrimLeft(b, " \t\r\n")[0] | 0x20 } // '[', '{', '"', 't'/'f', 'n', digits, '-'
		run := func() (Result, []string, error) {
			var calls []string
			seen := map[string]bool{}
			res, err := Shrink(in, func(b []byte) (bool, error) {
				if !json.Valid(b) {
					t.Fatalf("candidate %q is not JSON", b)
				}
				if seen[string(b)] {
					t.Fatalf("candidate %q tried twice", b)
				}
				seen[string(b)] = true
				calls = append(calls, string(b))
				return fails(b), nil
			}, budget)
			return res, calls, err
		}
		res, calls, err := run()
		if err != nil {
			return // not JSON, too deep, or an exponent out of range
		}
		if !json.Valid(in) {
			t.Fatalf("%q is not JSON, and Shrink took it", in)
		}
		if res.Calls != len(calls) || res.Calls > budget {
			t.Fatalf("%d calls, reported %d", len(calls), res.Calls)
		}
		if !res.Shrunk() && !bytes.Equal(res.Value, in) || res.Shrunk() && !fails(res.Value) {
			t.Fatalf("result %q: shrunk %v, fails %v", res.Value, res.Shrunk(), fails(res.Value))
		}
		if a, b := kindOf(in), kindOf(res.Value); a != b && !(isNumberStart(a) && isNumberStart(b)) && !(a == 't' && b == 'f') {
			t.Fatalf("%q shrank to %q: another type", in, res.Value)
		}
		res2, calls2, _ := run()
		if !bytes.Equal(res.Value, res2.Value) || len(calls) != len(calls2) {
			t.Fatalf("not deterministic: %q then %q", res.Value, res2.Value)
		}
		if res.Calls < budget && res.Shrunk() {
			again, err := Shrink(res.Value, func(b []byte) (bool, error) { return fails(b), nil }, budget)
			if err != nil || again.Shrunk() {
				t.Fatalf("%q is not a fixpoint: shrank again to %q (%v)", res.Value, again.Value, err)
			}
		}
	})
}

func isNumberStart(b byte) bool { return b == '-' || b >= '0' && b <= '9' }

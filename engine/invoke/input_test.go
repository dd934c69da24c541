package invoke

import (
	"errors"
	"strings"
	"testing"
)

// CheckInput refuses what is not JSON in the caller's terms (where in the bytes, what was
// wrong; never Foundry's function names), refuses more than MaxInputValues values before
// decoding them, and hands on the input compacted, with the newline a case's input gets.
func TestCheckInput(t *testing.T) {
	in, err := CheckInput(intSort, []byte(" [3, 1,\n 2] "))
	if err != nil || string(in.stdin) != "[3,1,2]\n" {
		t.Fatalf("valid input: %q %v", in.stdin, err)
	}
	for _, c := range []struct {
		in, want string
		tooLarge bool
	}{
		{`x`, "the input is not JSON: at byte 0: unexpected 'x', want a JSON value", false},
		{`[1, 2`, "the input is not JSON: at byte 5: unexpected end of input, want ',' or ']'", false},
		{strings.Repeat("[", 1001) + strings.Repeat("]", 1001), "the input is not JSON: at byte 1000: nesting deeper than 1000", false},
		{"[" + strings.Repeat("1,", MaxInputValues) + "1]", "the input holds more than 262144 JSON values, the most a call takes", true},
		{"[" + strings.Repeat("1,", MaxInputValues) + "x", "the input holds more than 262144 JSON values, the most a call takes", true},
		{`[1.5]`, "the input violates the input schema: at '/0': got number, want integer", false},
	} {
		_, err := CheckInput(intSort, []byte(c.in))
		var ie *InputError
		if !errors.As(err, &ie) || ie.Reason != c.want || ie.TooLarge != c.tooLarge {
			t.Errorf("%.40s: %v (%+v), want %q (too large %v)", c.in, err, ie, c.want, c.tooLarge)
		}
	}
	// Exactly MaxInputValues values are taken (the outer array is one).
	if _, err := CheckInput(Capability{Kind: "cli"}, []byte("["+strings.Repeat("1,", MaxInputValues-2)+"1]")); err != nil {
		t.Errorf("MaxInputValues values: %v", err)
	}
}

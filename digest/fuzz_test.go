package digest

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalize checks that Canonicalize never panics, that Check rejects
// exactly what it rejects, that every rejection is a *SyntaxError with an
// offset inside the input (anything else means the strict check and jcs
// disagree), and that on success the output is valid UTF-8 and JSON, means
// the same as the input, and is a fixed point.
func FuzzCanonicalize(f *testing.F) {
	seeds := []string{
		rfcExampleInput, rfcSortInput,
		`{}`, `[]`, `null`, `true`, `-0`, `1e400`, `1e-400`, `5e-324`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`,
		`["\udc00\ud800"]`, `"\ud800"`, `"\ud83d\ude00"`, "[\"\xff\"]", "\"\xed\xa0\x80\"",
		`[1,]`, `{} {}`, `01`, `"\u0000"`, `[[[[[[[[]]]]]]]]`, ` {"b" : [1, 2.50, "x"]} `,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Canonicalize(data)
		if cerr := Check(data); (cerr == nil) != (err == nil) {
			t.Fatalf("Check(%q) = %v, but Canonicalize's error is %v", data, cerr, err)
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Canonicalize(%q): non-syntax error %v (strict check and jcs disagree)", data, err)
			}
			if se.Offset < 0 || se.Offset > len(data) {
				t.Fatalf("Canonicalize(%q): offset %d outside input of %d bytes", data, se.Offset, len(data))
			}
			return
		}
		if !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q: not valid UTF-8 JSON", data, out)
		}
		if !json.Valid(data) {
			t.Fatalf("Canonicalize accepted %q, which encoding/json rejects", data)
		}
		var in, canon any
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &canon); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, canon) {
			t.Fatalf("Canonicalize(%q) = %q changed the value: %#v vs %#v", data, out, in, canon)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: Canonicalize(%q) = %q, then %q, %v", data, out, again, err)
		}
	})
}

var digestForm = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// FuzzParse checks that Parse never panics, accepts exactly the documented
// form, and round-trips what it accepts.
func FuzzParse(f *testing.F) {
	for _, s := range []string{emptySHA, abcSHA, "", "sha256:", "sha256:" + abcSHA[7:70] + "G", "sha512:" + abcSHA[7:]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if (err == nil) != digestForm.MatchString(s) {
			t.Fatalf("Parse(%q) = %q, %v; form match %v", s, d, err, digestForm.MatchString(s))
		}
		if err != nil {
			if d != "" {
				t.Fatalf("Parse(%q) returned %q with error %v", s, d, err)
			}
			return
		}
		if d.String() != s || "sha256:"+d.Hex() != s || d.Validate() != nil {
			t.Fatalf("Parse(%q) = %q does not round-trip", s, d)
		}
		// Every digest FromBytes makes parses.
		if _, err := Parse(FromBytes([]byte(s)).String()); err != nil {
			t.Fatal(err)
		}
	})
}

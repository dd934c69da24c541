package digest

import (
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
var appendixB = []struct{ bits, want string }{
	{"0000000000000000", "0"},
	{"8000000000000000", "0"}, // minus zero
	{"0000000000000001", "5e-324"},
	{"8000000000000001", "-5e-324"},
	{"7fefffffffffffff", "1.7976931348623157e+308"},
	{"ffefffffffffffff", "-1.7976931348623157e+308"},
	{"4340000000000000", "9007199254740992"},
	{"c340000000000000", "-9007199254740992"},
	{"4430000000000000", "295147905179352830000"},
	{"44b52d02c7e14af5", "9.999999999999997e+22"},
	{"44b52d02c7e14af6", "1e+23"},
	{"44b52d02c7e14af7", "1.0000000000000001e+23"},
	{"444b1ae4d6e2ef4e", "999999999999999700000"},
	{"444b1ae4d6e2ef4f", "999999999999999900000"},
	{"444b1ae4d6e2ef50", "1e+21"},
	{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
	{"3eb0c6f7a0b5ed8d", "0.000001"},
	{"41b3de4355555553", "333333333.3333332"},
	{"41b3de4355555554", "333333333.33333325"},
	{"41b3de4355555555", "333333333.3333333"},
	{"41b3de4355555556", "333333333.3333334"},
	{"41b3de4355555557", "333333333.33333343"},
	{"becbf647612f3696", "-0.0000033333333333333333"},
	{"43143ff3c1cb0959", "1424953923781206.2"},
}

func TestAppendixBNumbers(t *testing.T) {
	for _, tc := range appendixB {
		u, err := strconv.ParseUint(tc.bits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(u)
		// Feed the number as JSON text in a form that is not already the
		// canonical one (Go's %g spelling, e.g. "1e+21" vs "1e21"), both bare
		// and inside an array, and through Canonical from a float64.
		inputs := []string{
			strconv.FormatFloat(f, 'g', -1, 64),
			strconv.FormatFloat(f, 'e', -1, 64),
			"[ " + strconv.FormatFloat(f, 'g', -1, 64) + " ]",
		}
		for _, in := range inputs {
			got, err := Canonicalize([]byte(in))
			if err != nil {
				t.Errorf("%s: Canonicalize(%q): %v", tc.bits, in, err)
				continue
			}
			want := tc.want
			if strings.HasPrefix(in, "[") {
				want = "[" + want + "]"
			}
			if string(got) != want {
				t.Errorf("%s: Canonicalize(%q) = %q, want %q", tc.bits, in, got, want)
			}
		}
		got, err := Canonical(f)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: Canonical(%v) = %q, %v; want %q", tc.bits, f, got, err, tc.want)
		}
	}
}

func TestNonFiniteRejected(t *testing.T) {
	for _, in := range []string{"1e400", "-1e400", "[1, 1.8e308]", `{"a":-17976931348623159e292}`} {
		_, err := Canonicalize([]byte(in))
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, "overflows") {
			t.Errorf("Canonicalize(%q) = %v, want overflow SyntaxError", in, err)
		}
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := Canonical(v); err == nil {
			t.Errorf("Canonical(%v) succeeded, want error", v)
		}
	}
	// Underflow is rounding, not overflow: RFC 8785 rounds to the nearest double.
	if got, err := Canonicalize([]byte("[1e-400, -1e-400, 2.5e-324]")); err != nil || string(got) != "[0,0,5e-324]" {
		t.Errorf("underflow: got %q, %v", got, err)
	}
}

// RFC 8785 §3.2.2 input; §3.2.4 gives the expected output as hex.
const rfcExampleInput = `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`

const rfcExampleHex = "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72" +
	" 75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a" +
	" 5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31" +
	" 65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37" +
	" 5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30" +
	" 30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d"

// RFC 8785 §3.2.3: members sort by UTF-16 code units, so the emoji (a
// surrogate pair starting 0xD83D) sorts before U+FB33.
const rfcSortInput = `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`

const rfcSortWant = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\"," +
	"\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\"," +
	"\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"

func TestRFC8785Examples(t *testing.T) {
	want, err := hex.DecodeString(strings.ReplaceAll(rfcExampleHex, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Canonicalize([]byte(rfcExampleInput))
	if err != nil || string(got) != string(want) {
		t.Errorf("§3.2.2 example: got %q, %v\nwant %q", got, err, want)
	}
	got, err = Canonicalize([]byte(rfcSortInput))
	if err != nil || string(got) != rfcSortWant {
		t.Errorf("§3.2.3 example: got %q, %v\nwant %q", got, err, rfcSortWant)
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	tests := []struct {
		name, in string
		offset   int
		msg      string
	}{
		// The known bug class in JCS implementations (gowebpki/jcs#5,
		// cyberphone/json-canonicalization#37).
		{"reversed surrogate pair", `["\udc00\ud800"]`, 2, "lone low surrogate"},
		{"reversed surrogate pair in key", `{"\ude00\ud83d":1}`, 2, "lone low surrogate"},
		{"lone high surrogate", `"\ud800"`, 1, "not followed by a low surrogate"},
		{"high surrogate then text", `"\ud800abc"`, 1, "not followed by a low surrogate"},
		{"high surrogate then non-surrogate escape", `"\ud800\u0041"`, 1, "not a low surrogate"},
		{"two high surrogates", `"\ud800\ud800"`, 1, "not a low surrogate"},
		{"lone low surrogate", `"x\udfff"`, 2, "lone low surrogate"},
		{"invalid UTF-8 byte", "[\"a\xffb\"]", 3, "invalid UTF-8"},
		{"invalid UTF-8 outside string", "[1,\xff]", 3, "invalid UTF-8"},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", 1, "invalid UTF-8"},
		{"overlong UTF-8", "\"\xc0\xaf\"", 1, "invalid UTF-8"},
		{"truncated UTF-8", "\"\xe2\x82\"", 1, "invalid UTF-8"},
		{"byte-order mark", "\ufeff{}", 0, "unexpected"},
		{"duplicate key", `{"a":1,"a":2}`, 7, "duplicate"},
		{"duplicate key nested", `{"x":[{"b":1,"c":{"d":1,"e":2,"d":3}}]}`, 30, "duplicate"},
		{"duplicate key after unescaping", `{"a":1,"\u0061":2}`, 7, "duplicate"},
		{"duplicate key non-ASCII escape", `{"é":1,"\u00e9":2}`, 8, "duplicate"},
		{"duplicate key surrogate pair", `{"😀":1,"\ud83d\ude00":2}`, 10, "duplicate"},
		{"duplicate key escaped slash", `{"a/b":1,"a\/b":2}`, 9, "duplicate"},
		{"trailing value", `{} {}`, 3, "trailing"},
		{"trailing number", `1 2`, 2, "trailing"},
		{"trailing bracket", `[]]`, 2, "trailing"},
		{"trailing garbage", `{}x`, 2, "trailing"},
		{"too deep arrays", deep(MaxDepth+1, "[", "]"), MaxDepth, "nesting"},
		{"too deep objects", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), 5 * MaxDepth, "nesting"},
		{"empty", ``, 0, "end of input"},
		{"only space", " \n", 2, "end of input"},
		{"leading zero", `01`, 1, "trailing"},
		{"bare dot", `1.`, 2, "digit"},
		{"leading dot", `.5`, 0, "unexpected"},
		{"plus sign", `+1`, 0, "unexpected"},
		{"empty exponent", `1e`, 2, "exponent"},
		{"minus alone", `-`, 1, "digit"},
		{"NaN", `NaN`, 0, "unexpected"},
		{"Infinity", `[Infinity]`, 1, "unexpected"},
		{"bad literal", `tru`, 0, "literal"},
		{"literal with suffix", `[truex]`, 5, "','"},
		{"trailing comma array", `[1,]`, 3, "unexpected"},
		{"trailing comma object", `{"a":1,}`, 7, "member name"},
		{"missing value", `{"a"}`, 4, "':'"},
		{"single quotes", `'a'`, 0, "unexpected"},
		{"bad escape", `"\x"`, 1, "invalid escape"},
		{"short unicode escape", `"\u12"`, 1, "escape"},
		{"non-hex unicode escape", `"\u12g4"`, 1, "escape"},
		{"unterminated string", `"abc`, 4, "unterminated"},
		{"raw control character", "\"a\tb\"", 2, "control character"},
		{"unquoted key", `{a:1}`, 1, "member name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Canonicalize([]byte(tc.in))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Canonicalize(%.60q) = %q, %v; want *SyntaxError", tc.in, out, err)
			}
			if se.Offset != tc.offset || !strings.Contains(se.Msg, tc.msg) {
				t.Errorf("Canonicalize(%.60q): %v; want offset %d and message containing %q", tc.in, err, tc.offset, tc.msg)
			}
			if !strings.Contains(err.Error(), "byte offset "+strconv.Itoa(tc.offset)) {
				t.Errorf("error %q does not name the byte offset", err)
			}
		})
	}
	if _, err := Canonicalize(nil); err == nil {
		t.Error("Canonicalize(nil) succeeded")
	}
}

func TestCanonicalizeAccepts(t *testing.T) {
	tests := []struct{ in, want string }{
		{" \t\r\n{ \"b\" : [ 1 , 2 ] , \"a\" : null } \n", `{"a":null,"b":[1,2]}`},
		{`"\u0000\u001f\u007f"`, `"\u0000\u001f` + "\x7f" + `"`},
		{`"\/\b\f\n\r\t\"\\"`, `"/\b\f\n\r\t\"\\"`},
		{`"\uD83D\uDE00"`, `"😀"`},                                                      // uppercase hex escapes
		{`{"a":{"a":1},"b":[{"a":1},{"a":1}]}`, `{"a":{"a":1},"b":[{"a":1},{"a":1}]}`}, // same name in different objects
		{`[-0, 0.0, -0.0e5, 1E2, 1.50]`, `[0,0,0,100,1.5]`},
		{`{"\u00e9":1,"e\u0301":2}`, `{"e` + "\u0301" + `":2,"é":1}`}, // no Unicode normalization
		{`"<>&\u2028"`, "\"<>&\u2028\""},
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)},
		{`true`, `true`},
		{` null `, `null`},
	}
	for _, tc := range tests {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%.60q) = %.60q, %v; want %.60q", tc.in, got, err, tc.want)
		}
	}
}

type textKey struct{ s string }

func (k textKey) MarshalText() ([]byte, error) { return []byte(k.s), nil }

type textKeyA struct{ s string }

func (k *textKeyA) MarshalText() ([]byte, error) { return []byte(k.s), nil }

type textKeyB struct{ s string }

func (k *textKeyB) MarshalText() ([]byte, error) { return []byte(k.s), nil }

func TestCanonicalRejectsInvalidUTF8(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type outer struct {
		Items []inner          `json:"items"`
		Tags  map[string]int   `json:"tags,omitempty"`
		Any   any              `json:"any,omitempty"`
		Text  *textKey         `json:"text,omitempty"`
		Skip  string           `json:"-"`
		Raw   []byte           `json:"raw,omitempty"`
		Keyed map[textKey]bool `json:"keyed,omitempty"`
		skip  string
	}
	bad := "a\xffb"
	rejected := []any{
		bad,
		[]string{"ok", bad},
		map[string]int{bad: 1},
		outer{Items: []inner{{Name: "ok"}, {Name: bad}}},
		outer{Tags: map[string]int{bad: 1}},
		outer{Any: map[string]any{"x": []any{bad}}},
		outer{Text: &textKey{bad}},
		outer{Keyed: map[textKey]bool{{bad}: true}},
	}
	for _, v := range rejected {
		if b, err := Canonical(v); err == nil {
			t.Errorf("Canonical(%#v) = %q, want error for invalid UTF-8", v, b)
		}
	}
	// A promoted MarshalText makes the outer struct a TextMarshaler, as it
	// does for encoding/json, so its other fields are not what is encoded.
	type promoted struct {
		textKey
		Name string
	}
	if _, err := Canonical(promoted{textKey{bad}, "x"}); err == nil {
		t.Error("Canonical(promoted MarshalText with invalid UTF-8) succeeded")
	}
	if b, err := Canonical(promoted{textKey{"ok"}, bad}); err != nil || string(b) != `"ok"` {
		t.Errorf("Canonical(promoted) = %q, %v", b, err)
	}
	// Two embedded TextMarshalers cancel out; the walk reaches them through
	// unexported fields, where it cannot call MarshalText, and must not panic.
	type ambiguous struct {
		*textKeyA
		*textKeyB
		Name string
	}
	if _, err := Canonical(ambiguous{&textKeyA{bad}, &textKeyB{bad}, "x"}); err != nil {
		t.Errorf("Canonical(ambiguous) = %v", err)
	}
	if _, err := Canonical(ambiguous{Name: bad}); err == nil {
		t.Error("Canonical(ambiguous with invalid Name) succeeded")
	}
	// Fields encoding/json ignores, and []byte (base64), are not checked.
	ok := outer{Skip: bad, skip: bad, Raw: []byte(bad), Items: []inner{{"é"}}}
	got, err := Canonical(ok)
	if want := `{"items":[{"name":"é"}],"raw":"Yf9i"}`; err != nil || string(got) != want {
		t.Errorf("Canonical(%#v) = %q, %v; want %q", ok, got, err, want)
	}
}

func TestCanonicalAndOf(t *testing.T) {
	type action struct {
		Argv []string          `json:"argv"`
		Env  map[string]string `json:"env"`
		HTML string            `json:"html"`
		N    float64           `json:"n"`
	}
	v := action{Argv: []string{"cc", "-o", "x"}, Env: map[string]string{"Z": "1", "A": "2"}, HTML: "<&>", N: 1e21}
	want := `{"argv":["cc","-o","x"],"env":{"A":"2","Z":"1"},"html":"<&>","n":1e+21}`
	d, b, err := Of(v)
	if err != nil || string(b) != want {
		t.Fatalf("Of = %q, %v; want %q", b, err, want)
	}
	if d != FromBytes([]byte(want)) {
		t.Errorf("Of digest %s is not the digest of the canonical bytes", d)
	}
	// The same value spelled differently as raw JSON has the same digest.
	raw := `{"n":1E21,"html":"\u003c\u0026\u003e","env":{"Z":"1","A":"2"},"argv":["cc","-o","x"]}`
	c, err := Canonicalize([]byte(raw))
	if err != nil || FromBytes(c) != d {
		t.Errorf("raw spelling: %q, %v; want digest %s", c, err, d)
	}
	// Any change to the value changes the digest.
	v.Argv[2] = "y"
	if d2, _, _ := Of(v); d2 == d {
		t.Error("changing argv did not change the digest")
	}
	if _, _, err := Of(make(chan int)); err == nil {
		t.Error("Of(chan) succeeded")
	}
}

// encoded is what a new encoder holds once write has written to it, or its error.
func encoded(write func(*Encoder)) (string, error) {
	e := NewEncoder(0)
	write(e)
	b, err := e.Bytes()
	return string(b), err
}

// The direct encoder writes every string as Canonical does, and refuses one that is not
// UTF-8 wherever its bad byte sits (first, last, beside an escape, after valid text).
func TestEncoderStringsAsCanonical(t *testing.T) {
	for _, s := range []string{"", "plain", "é", "\u00e9\"x", "tab\there", "\x01\x1f", "a\\b", "\U0001F600", "\ue000"} {
		got, err := encoded(func(e *Encoder) { e.String(s) })
		want, werr := Canonical(s)
		if err != nil || werr != nil || got != string(want) {
			t.Errorf("String(%q) = %q, %v; Canonical gives %q, %v", s, got, err, want, werr)
		}
	}
	for _, s := range []string{"\xff", "a\xff", "\xffa", "\"\xff", "\xff\"", "é\xff", "\xe2\x82", "\xed\xa0\x80", "\xc0\xaf", "a\n\xfe"} {
		if b, err := encoded(func(e *Encoder) { e.String(s) }); err == nil {
			t.Errorf("String(%q) = %q, want an error: not UTF-8", s, b)
		}
	}
}

// A Reset encoder writes the next value as a new one would, even after an error or with a
// container left open.
func TestEncoderReset(t *testing.T) {
	e := NewEncoder(0)
	e.Open('{')
	e.Key("a")
	e.String("\xff")
	e.Reset()
	e.Open('[')
	e.String("x")
	e.Int(1)
	e.Close(']')
	got, err := e.Bytes()
	if want := `["x",1]`; err != nil || string(got) != want {
		t.Fatalf("after Reset: %q, %v; want %q", got, err, want)
	}
}

// Int writes integers as RFC 8785 writes the nearest double: digits alone up to 2^53 in
// magnitude (where it skips float formatting), and beyond that what the double prints.
func TestEncoderIntAsCanonical(t *testing.T) {
	ints := []int64{0, 1, -1, 9, 10, 1 << 31, 1<<53 - 1, 1 << 53, -(1 << 53), 1<<53 + 1, -(1<<53 + 1),
		1<<53 + 3, 1 << 62, math.MaxInt64, math.MinInt64, 999999999999999999, 2147483648}
	for i := int64(1); i > 0 && i < math.MaxInt64/7; i = i*7 + 3 {
		ints = append(ints, i, -i)
	}
	for _, i := range ints {
		got, err := encoded(func(e *Encoder) { e.Int(i) })
		want, werr := Canonical(i)
		if err != nil || werr != nil || got != string(want) {
			t.Errorf("Int(%d) = %q, %v; Canonical gives %q, %v", i, got, err, want, werr)
		}
	}
}

// plain tests eight bytes at a time: a byte that needs escaping, or is not ASCII, must be
// found at every position of a word and of the tail, with plain text around it.
func TestEncoderFindsEveryByteToEscape(t *testing.T) {
	special := []string{"\x00", "\x01", "\x1f", "\"", "\\", "\x80", "\xff", "é", "\u2028", "\U0001F600", "\xc3"}
	for n := 0; n <= 24; n++ {
		for at := 0; at <= n; at++ {
			for _, c := range append(special, " ", "~", "\x7f", "!", "#", "[", "]") {
				s := strings.Repeat("a", at) + c + strings.Repeat("z", n-at)
				got, err := encoded(func(e *Encoder) { e.String(s) })
				want, werr := Canonical(s)
				if (err != nil) != (werr != nil) || err == nil && got != string(want) {
					t.Fatalf("String(%q) = %q, %v; Canonical gives %q, %v", s, got, err, want, werr)
				}
				if plain(s) != !slices.Contains(special, c) {
					t.Fatalf("plain(%q) = %v", s, plain(s))
				}
			}
		}
	}
}

// CheckCount counts every value, members' values and not their names, and stops at its
// maximum without reading further (a syntax error past it is not reached).
func TestCheckCount(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want int
		err  bool
	}{
		{`1`, 0, 1, false},
		{`[]`, 0, 1, false},
		{`[1, "a", true, null, {"k": [2]}]`, 0, 8, false},
		{`{"a": 1, "b": {"c": "d"}}`, 0, 4, false},
		{`[1, 2, 3]`, 4, 4, false},
		{`[1, 2, 3]`, 3, 4, false},
		{`[1, 2, 3, x]`, 3, 4, false},
		{`[1, x, 3]`, 3, 3, true},
		{`[1, 2] x`, 0, 3, true},
	} {
		n, err := CheckCount([]byte(c.in), c.max)
		if n != c.want || (err != nil) != c.err {
			t.Errorf("CheckCount(%s, %d) = %d, %v; want %d, error %v", c.in, c.max, n, err, c.want, c.err)
		}
		if c.max == 0 && (Check([]byte(c.in)) != nil) != c.err {
			t.Errorf("Check(%s) disagrees with CheckCount", c.in)
		}
	}
}

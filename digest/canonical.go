package digest

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxDepth is the deepest nesting of arrays and objects Canonicalize accepts.
// The top-level array or object is depth 1.
const MaxDepth = 1000

// SyntaxError is returned by Canonicalize when raw JSON is malformed or falls
// outside the JCS domain (RFC 8785 over I-JSON, RFC 7493). Offset is the byte
// offset into the input where the problem was found.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("digest: canonicalize: byte offset %d: %s", e.Offset, e.Msg)
}

// Canonicalize returns the RFC 8785 (JCS) canonical form of the JSON text raw.
//
// Before handing raw to jcs.Transform it runs its own strict check, so that
// the guarantees below do not depend on the version of the jcs library. It
// rejects, with a *SyntaxError naming the byte offset:
//
//   - anything that is not a single RFC 8259 JSON value (trailing data after
//     the value included; surrounding whitespace is allowed);
//   - invalid UTF-8 anywhere in the input (a byte-order mark is valid UTF-8
//     but is not JSON, so it is rejected too);
//   - lone or reversed UTF-16 surrogates written as \u escapes;
//   - duplicate object member names at any depth, compared after unescaping
//     ("a" and "\u0061" are the same name);
//   - numbers whose magnitude overflows an IEEE 754 double to ±Inf;
//   - nesting deeper than MaxDepth.
//
// Numbers are otherwise rounded to the nearest double, as RFC 8785 requires
// (so 1e-400 canonicalizes to 0, and 0.10000000000000001 to 0.1).
func Canonicalize(raw []byte) ([]byte, error) {
	if _, err := check(raw, 0); err != nil {
		return nil, err
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		// The strict check accepts a subset of what jcs accepts, so this
		// means the two disagree: report it rather than guess.
		return nil, fmt.Errorf("digest: canonicalize: input passed strict check but jcs rejected it: %w", err)
	}
	return out, nil
}

// Check reports whether raw is JSON that Canonicalize accepts, returning the *SyntaxError
// it would, without building the canonical form: for a caller that needs a value exactly
// as strict as content addressing and not its canonical bytes. FuzzCanonicalize checks
// that the two agree.
func Check(raw []byte) error {
	_, err := check(raw, 0)
	return err
}

// CheckCount is Check that also counts the JSON values raw holds: every array, object,
// string, number and literal, members' values included and member names not. It stops
// once there are more than max (max > 0) and returns max+1 and no error, leaving the rest
// of raw unchecked: so that a caller can bound what decoding raw would cost before paying
// it, in time proportional to the part read.
func CheckCount(raw []byte, max int) (int, error) { return check(raw, max) }

// Canonical marshals v with encoding/json and returns the canonical (RFC 8785)
// form of the result.
//
// encoding/json silently replaces invalid UTF-8 in Go strings with U+FFFD,
// which would give two different values the same digest, so Canonical first
// checks every string reachable from v (struct fields, map keys, slice and
// map elements, TextMarshaler output) and returns an error naming the first
// invalid one. The check may be stricter than encoding/json: it also looks at
// exported fields that encoding/json would drop (for instance because of a
// name conflict).
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("digest: canonical: %w", err)
	}
	// json.Marshal has succeeded, so v has no cycles and the walk terminates.
	if err := checkStrings(reflect.ValueOf(v), "value"); err != nil {
		return nil, fmt.Errorf("digest: canonical: %w", err)
	}
	return Canonicalize(raw)
}

// Of returns the digest of Canonical(v) together with the canonical bytes
// that were hashed.
func Of(v any) (Digest, []byte, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", nil, err
	}
	return FromBytes(b), b, nil
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// checkStrings walks v the way encoding/json would and reports the first Go
// string that is not valid UTF-8. path describes where v sits, for the error.
func checkStrings(v reflect.Value, path string) error {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	// A json.Marshaler's output is raw JSON, which Canonicalize checks
	// byte-for-byte, so it needs no check here.
	if t.Implements(jsonMarshalerType) {
		return nil
	}
	// Values read through unexported embedded fields cannot be passed to
	// MarshalText (encoding/json cannot call it either); walk them instead.
	if t.Implements(textMarshalerType) && v.CanInterface() {
		if (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface) && v.IsNil() {
			return nil
		}
		text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return fmt.Errorf("%s: MarshalText: %w", path, err)
		}
		return checkUTF8(string(text), path)
	}
	switch t.Kind() {
	case reflect.String:
		return checkUTF8(v.String(), path)
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkStrings(v.Elem(), path)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return nil // []byte is base64-encoded
		}
		for i := 0; i < v.Len(); i++ {
			if err := checkStrings(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			k := iter.Key()
			if k.Kind() == reflect.String {
				if err := checkUTF8(k.String(), path+" key"); err != nil {
					return err
				}
			} else if err := checkStrings(k, path+" key"); err != nil {
				return err
			}
			if err := checkStrings(iter.Value(), fmt.Sprintf("%s[%v]", path, k)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if (!f.IsExported() && !f.Anonymous) || f.Tag.Get("json") == "-" {
				continue
			}
			if err := checkStrings(v.Field(i), path+"."+f.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkUTF8(s, path string) error {
	if utf8.ValidString(s) {
		return nil
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("%s: string is not valid UTF-8 at byte %d: %s", path, i, quoteShort(s))
		}
		i += size
	}
	return nil // unreachable: ValidString reported an invalid byte
}

// check is the strict pre-pass of Canonicalize. It is a recursive-descent
// validator for RFC 8259 JSON with the I-JSON restrictions that RFC 8785
// relies on; it builds nothing except the decoded member names needed to find
// duplicates.
func check(raw []byte, max int) (int, error) {
	if raw == nil {
		return 0, &SyntaxError{0, "no input"}
	}
	// Validate the encoding first, so that every later error is about JSON
	// and not about bytes that do not form characters.
	for i := 0; i < len(raw); {
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size == 1 {
			return 0, &SyntaxError{i, fmt.Sprintf("invalid UTF-8 byte 0x%02x", raw[i])}
		}
		i += size
	}
	c := &checker{b: raw, max: max}
	c.skipSpace()
	if err := c.value(); err == errTooMany {
		return c.values, nil
	} else if err != nil {
		return c.values, err
	}
	c.skipSpace()
	if c.i < len(c.b) {
		return c.values, c.errorf("trailing data after the JSON value")
	}
	return c.values, nil
}

// errTooMany stops a count at its maximum (CheckCount).
var errTooMany = errors.New("too many values")

type checker struct {
	b      []byte
	i      int
	depth  int
	values int // counted so far
	max    int // stop after this many values; 0: no limit
}

func (c *checker) errorf(format string, args ...any) error {
	return &SyntaxError{c.i, fmt.Sprintf(format, args...)}
}

func (c *checker) skipSpace() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// unexpected reports the byte at the current offset, or the end of input.
func (c *checker) unexpected(want string) error {
	if c.i >= len(c.b) {
		return c.errorf("unexpected end of input, want %s", want)
	}
	r, _ := utf8.DecodeRune(c.b[c.i:])
	return c.errorf("unexpected %q, want %s", r, want)
}

// value checks one JSON value starting at c.i (no leading whitespace).
func (c *checker) value() error {
	if c.i >= len(c.b) {
		return c.unexpected("a JSON value")
	}
	c.values++
	if c.max > 0 && c.values > c.max {
		return errTooMany
	}
	switch b := c.b[c.i]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		_, err := c.str(false)
		return err
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	default:
		return c.unexpected("a JSON value")
	}
}

func (c *checker) enter() error {
	c.depth++
	if c.depth > MaxDepth {
		return c.errorf("nesting deeper than %d", MaxDepth)
	}
	return nil
}

func (c *checker) object() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.i++ // '{'
	c.skipSpace()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		c.depth--
		return nil
	}
	seen := make(map[string]int) // decoded name -> offset of its first use
	for {
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return c.unexpected("a member name")
		}
		at := c.i
		name, err := c.str(true)
		if err != nil {
			return err
		}
		if first, dup := seen[name]; dup {
			return &SyntaxError{at, fmt.Sprintf("duplicate object member name %s (first at byte offset %d)", quoteShort(name), first)}
		}
		seen[name] = at
		c.skipSpace()
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return c.unexpected("':'")
		}
		c.i++
		c.skipSpace()
		if err := c.value(); err != nil {
			return err
		}
		c.skipSpace()
		if c.i < len(c.b) && c.b[c.i] == ',' {
			c.i++
			c.skipSpace()
			continue
		}
		if c.i < len(c.b) && c.b[c.i] == '}' {
			c.i++
			c.depth--
			return nil
		}
		return c.unexpected("',' or '}'")
	}
}

func (c *checker) array() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.i++ // '['
	c.skipSpace()
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		c.depth--
		return nil
	}
	for {
		if err := c.value(); err != nil {
			return err
		}
		c.skipSpace()
		if c.i < len(c.b) && c.b[c.i] == ',' {
			c.i++
			c.skipSpace()
			continue
		}
		if c.i < len(c.b) && c.b[c.i] == ']' {
			c.i++
			c.depth--
			return nil
		}
		return c.unexpected("',' or ']'")
	}
}

func (c *checker) literal(lit string) error {
	if len(c.b)-c.i < len(lit) || string(c.b[c.i:c.i+len(lit)]) != lit {
		return c.errorf("invalid literal, want %q", lit)
	}
	c.i += len(lit)
	return nil
}

// number checks the RFC 8259 number grammar
//
//	[ "-" ] ( "0" / digit1-9 *digit ) [ "." 1*digit ] [ ("e"/"E") ["+"/"-"] 1*digit ]
//
// and that the value is a finite IEEE 754 double.
func (c *checker) number() error {
	start := c.i
	digits := func() int {
		n := 0
		for c.i < len(c.b) && '0' <= c.b[c.i] && c.b[c.i] <= '9' {
			c.i++
			n++
		}
		return n
	}
	if c.b[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(c.b) && c.b[c.i] == '0':
		c.i++
	case c.i < len(c.b) && '1' <= c.b[c.i] && c.b[c.i] <= '9':
		digits()
	default:
		return c.unexpected("a digit")
	}
	if c.i < len(c.b) && c.b[c.i] == '.' {
		c.i++
		if digits() == 0 {
			return c.unexpected("a digit after '.'")
		}
	}
	if c.i < len(c.b) && (c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		c.i++
		if c.i < len(c.b) && (c.b[c.i] == '+' || c.b[c.i] == '-') {
			c.i++
		}
		if digits() == 0 {
			return c.unexpected("a digit in the exponent")
		}
	}
	f, err := strconv.ParseFloat(string(c.b[start:c.i]), 64)
	if math.IsInf(f, 0) {
		return &SyntaxError{start, fmt.Sprintf("number %s overflows an IEEE 754 double", quoteShort(string(c.b[start:c.i])))}
	}
	if err != nil {
		return &SyntaxError{start, fmt.Sprintf("number %s: %v", quoteShort(string(c.b[start:c.i])), err)}
	}
	return nil
}

// str checks a string starting at the opening quote. When decode is true it
// also returns the unescaped value (for member names); otherwise it returns "".
func (c *checker) str(decode bool) (string, error) {
	c.i++ // opening '"'
	var out []byte
	for {
		if c.i >= len(c.b) {
			return "", c.errorf("unterminated string")
		}
		b := c.b[c.i]
		switch {
		case b == '"':
			c.i++
			return string(out), nil
		case b < 0x20:
			return "", c.errorf("control character 0x%02x in string must be escaped", b)
		case b != '\\':
			// Raw bytes are already known to be valid UTF-8.
			if decode {
				out = append(out, b)
			}
			c.i++
			continue
		}
		// Escape sequence.
		at := c.i
		if c.i+1 >= len(c.b) {
			c.i++
			return "", c.errorf("unterminated escape")
		}
		e := c.b[c.i+1]
		c.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := c.hex4(at)
			if err != nil {
				return "", err
			}
			switch {
			case 0xDC00 <= r && r <= 0xDFFF:
				return "", &SyntaxError{at, fmt.Sprintf("lone low surrogate \\u%04x", r)}
			case 0xD800 <= r && r <= 0xDBFF:
				lowAt := c.i
				if c.i+1 >= len(c.b) || c.b[c.i] != '\\' || c.b[c.i+1] != 'u' {
					return "", &SyntaxError{at, fmt.Sprintf("high surrogate \\u%04x not followed by a low surrogate", r)}
				}
				c.i += 2
				r2, err := c.hex4(lowAt)
				if err != nil {
					return "", err
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return "", &SyntaxError{at, fmt.Sprintf("high surrogate \\u%04x followed by \\u%04x, not a low surrogate", r, r2)}
				}
				r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
			}
			out = utf8.AppendRune(out, r)
		default:
			r, _ := utf8.DecodeRune(c.b[at+1:])
			return "", &SyntaxError{at, fmt.Sprintf("invalid escape %q", "\\"+string(r))}
		}
		if !decode {
			out = out[:0]
		}
	}
}

// hex4 reads the four hex digits of a \u escape that began at offset at.
func (c *checker) hex4(at int) (rune, error) {
	if len(c.b)-c.i < 4 {
		return 0, &SyntaxError{at, "truncated \\u escape"}
	}
	var r rune
	for _, h := range c.b[c.i : c.i+4] {
		r <<= 4
		switch {
		case '0' <= h && h <= '9':
			r |= rune(h - '0')
		case 'a' <= h && h <= 'f':
			r |= rune(h - 'a' + 10)
		case 'A' <= h && h <= 'F':
			r |= rune(h - 'A' + 10)
		default:
			return 0, &SyntaxError{at, fmt.Sprintf("invalid \\u escape %q", string(c.b[at:c.i+4]))}
		}
	}
	c.i += 4
	return r, nil
}

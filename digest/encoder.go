package digest

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Encoder writes RFC 8785 canonical JSON directly, for definitions built by hand. It
// produces exactly the bytes Canonical would for the equivalent Go value, without
// Canonical's marshal → check → parse → transform round trip, which dominated compiling
// large graphs. The caller writes object members in canonical order: fixed keys in the
// order SortKeys gives (which for ASCII keys is byte order), map keys through SortKeys.
//
// Separators are inserted automatically. The first error (invalid UTF-8 in a string) is
// kept and returned by Bytes.
type Encoder struct {
	b        []byte
	counts   []int // values written in each open container
	afterKey bool
	err      error
}

// NewEncoder returns an encoder whose buffer starts with capacity n.
func NewEncoder(n int) *Encoder { return &Encoder{b: make([]byte, 0, n)} }

// Reset empties the encoder and keeps its buffer, for writing another value.
func (e *Encoder) Reset() {
	e.b, e.counts, e.afterKey, e.err = e.b[:0], e.counts[:0], false, nil
}

// Bytes returns the canonical JSON written so far, or the first error. The bytes are the
// encoder's buffer: valid until it is Reset.
func (e *Encoder) Bytes() ([]byte, error) {
	if e.err != nil {
		return nil, e.err
	}
	if len(e.counts) != 0 || e.afterKey {
		return nil, fmt.Errorf("digest: encoder: %d containers left open", len(e.counts))
	}
	return e.b, nil
}

// Len is the number of bytes written so far: where the next value's first byte will be,
// when no separator comes before it (the value of a key just written).
func (e *Encoder) Len() int { return len(e.b) }

func (e *Encoder) sep() {
	if e.afterKey {
		e.afterKey = false
		return
	}
	if n := len(e.counts); n > 0 {
		if e.counts[n-1] > 0 {
			e.b = append(e.b, ',')
		}
		e.counts[n-1]++
	}
}

// Open starts an object ('{') or an array ('[').
func (e *Encoder) Open(c byte) {
	e.sep()
	e.b = append(e.b, c)
	e.counts = append(e.counts, 0)
}

// Close ends the innermost object ('}') or array (']').
func (e *Encoder) Close(c byte) {
	e.counts = e.counts[:len(e.counts)-1]
	e.b = append(e.b, c)
}

// Key writes an object member's name; the next value written is its value.
func (e *Encoder) Key(k string) {
	e.sep()
	e.str(k)
	e.b = append(e.b, ':')
	e.afterKey = true
}

// String writes a string value.
func (e *Encoder) String(s string) {
	e.sep()
	e.str(s)
}

// Int writes an integer the way RFC 8785 does: as the nearest double, in ECMAScript form.
func (e *Encoder) Int(i int64) {
	e.sep()
	if -1<<53 <= i && i <= 1<<53 {
		// Exact as a double, and below 1e21: ECMAScript writes its digits alone. (Every
		// step's limits are five such numbers; formatting them as floats was a tenth of
		// writing its definition.)
		e.b = strconv.AppendInt(e.b, i, 10)
		return
	}
	s, err := jcs.NumberToJSON(float64(i))
	if err != nil && e.err == nil {
		e.err = fmt.Errorf("digest: encoder: %w", err)
	}
	e.b = append(e.b, s...)
}

// OmitEmptyString writes the member key: s unless s is empty, as encoding/json does for a
// field tagged omitempty.
func (e *Encoder) OmitEmptyString(key, s string) {
	if s != "" {
		e.Key(key)
		e.String(s)
	}
}

// OmitEmptyInt writes the member key: i unless i is 0 (omitempty).
func (e *Encoder) OmitEmptyInt(key string, i int64) {
	if i != 0 {
		e.Key(key)
		e.Int(i)
	}
}

// Bool writes true or false.
func (e *Encoder) Bool(v bool) {
	e.sep()
	if v {
		e.b = append(e.b, "true"...)
	} else {
		e.b = append(e.b, "false"...)
	}
}

// Null writes null (what encoding/json writes for a nil map or slice).
func (e *Encoder) Null() {
	e.sep()
	e.b = append(e.b, "null"...)
}

// Strings writes a list of strings; nil is null, as encoding/json writes it.
func (e *Encoder) Strings(list []string) {
	if list == nil {
		e.Null()
		return
	}
	e.Open('[')
	for _, s := range list {
		e.String(s)
	}
	e.Close(']')
}

// StringMap writes a map of strings as an object; nil is null.
func (e *Encoder) StringMap(m map[string]string) {
	if m == nil {
		e.Null()
		return
	}
	e.Open('{')
	for _, k := range SortKeys(m) {
		e.Key(k)
		e.String(m[k])
	}
	e.Close('}')
}

const hexDigits = "0123456789abcdef"

// str writes s as an RFC 8785 string: only '"', '\\' and control characters are escaped,
// with the short forms where JSON has them and lower-case \u00xx otherwise.
func (e *Encoder) str(s string) {
	if plain(s) {
		e.b = append(append(append(e.b, '"'), s...), '"')
		return
	}
	e.b = append(e.b, '"')
	start, ascii := 0, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			ascii = ascii && c < 0x80
			continue
		}
		e.b = append(e.b, s[start:i]...)
		switch c {
		case '"', '\\':
			e.b = append(e.b, '\\', c)
		case '\b':
			e.b = append(e.b, '\\', 'b')
		case '\t':
			e.b = append(e.b, '\\', 't')
		case '\n':
			e.b = append(e.b, '\\', 'n')
		case '\f':
			e.b = append(e.b, '\\', 'f')
		case '\r':
			e.b = append(e.b, '\\', 'r')
		default:
			e.b = append(e.b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	e.b = append(e.b, s[start:]...)
	e.b = append(e.b, '"')
	// Only text with a byte above 0x7f can be invalid: validating in the same pass as
	// escaping saves a second read of every string of a large graph's definitions.
	if !ascii && !utf8.ValidString(s) && e.err == nil {
		e.err = fmt.Errorf("digest: encoder: string %q is not valid UTF-8", s)
	}
}

// plain reports whether s is ASCII with nothing to escape: no control character, '"' or
// '\\'. It tests eight bytes at a time: byte by byte, escaping was a third of writing a
// step's definition.
func plain(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		quote, backslash := x^('"'*ones), x^('\\'*ones)
		// A byte of 0x80 or more; below 0x20; equal to '"'; equal to '\\' (a zero byte of
		// x^c): each test sets the high bit of some byte whenever such a byte is there.
		if (x|(x-0x20*ones)&^x|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// SortKeys returns m's keys in RFC 8785 order: by their UTF-16 code units.
func SortKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUTF16)
	return keys
}

// CompareKeys compares two object keys as RFC 8785 orders them, by their UTF-16 code units.
func CompareKeys(a, b string) int { return compareUTF16(a, b) }

// compareUTF16 compares by UTF-16 code units. UTF-8 byte order agrees with it unless a
// character above U+FFFF (a surrogate pair in UTF-16) meets one in U+E000–U+FFFF; only
// strings with such bytes take the slow path.
func compareUTF16(a, b string) int {
	if !hasHighBytes(a) || !hasHighBytes(b) {
		return strings.Compare(a, b)
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return cmp.Compare(ua[i], ub[i])
		}
	}
	return cmp.Compare(len(ua), len(ub))
}

// SortsBytewise reports whether s sorts among keys as its UTF-8 bytes do, whatever the
// other keys: it holds no character at or above U+E000.
func SortsBytewise(s string) bool { return !hasHighBytes(s) }

// hasHighBytes reports whether s may hold a character at or above U+E000 (UTF-8 lead
// bytes 0xEE and up).
func hasHighBytes(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r >= 0xE000 }) >= 0
}

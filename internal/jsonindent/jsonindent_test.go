package jsonindent

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// encoder is what Encode must match: encoding/json's Encoder with SetIndent("", indent).
func encoder(t testing.TB, v any, indent string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pieces of strings that look like JSON's punctuation, escapes and HTML.
var pieces = []string{"", "a", "{", "}", "[", "]", ",", ":", "\"", "\\", "\\\"", "\"\\", " ", "\n", "\t", "<", ">", "&",
	"\u2028", "é", "\U0001F600", "\x00", "\x7f", "null", "1e3"}

func randString(r *rand.Rand) string {
	var b strings.Builder
	for n := r.Intn(5); n > 0; n-- {
		b.WriteString(pieces[r.Intn(len(pieces))])
	}
	return b.String()
}

func randValue(r *rand.Rand, depth int) any {
	switch k := r.Intn(9); {
	case depth > 4 || k < 2:
		return randString(r)
	case k == 2:
		return r.Float64()*1e6 - 5e5
	case k == 3:
		return []any{true, false, nil}[r.Intn(3)]
	case k < 6:
		m := map[string]any{}
		for n := r.Intn(4); n > 0; n-- {
			m[randString(r)] = randValue(r, depth+1)
		}
		return m
	default:
		var l []any
		if r.Intn(4) > 0 {
			l = []any{}
		}
		for n := r.Intn(4); n > 0; n-- {
			l = append(l, randValue(r, depth+1))
		}
		return l
	}
}

// raw is a value whose MarshalJSON writes spaced-out JSON: encoding/json compacts what a
// marshaler writes before indenting it, and so must Encode.
type raw struct{}

func (raw) MarshalJSON() ([]byte, error) {
	return []byte("{ \"a\" : [ 1 , { } , [ ] ] ,\n \"b<\" : \"x\" }"), nil
}

func TestEncodeIsEncoder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	values := []any{nil, "", 0, []int{}, map[string]int{}, []any{[]any{}, map[string]any{}}, raw{},
		struct {
			A []string          `json:"a"`
			B map[string]string `json:"b"`
			C *int              `json:"c,omitempty"`
			D raw               `json:"d"`
		}{A: []string{"x", "}{"}, B: map[string]string{"k:": "v,"}}}
	for i := 0; i < 3000; i++ {
		values = append(values, randValue(r, 0))
	}
	for _, v := range values {
		for _, indent := range []string{"  ", "\t", ""} {
			var got bytes.Buffer
			if err := Encode(&got, v, indent); err != nil {
				t.Fatal(err)
			}
			if want := encoder(t, v, indent); !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("Encode(%#v, %q):\n%s\nEncoder:\n%s", v, indent, got.Bytes(), want)
			}
		}
	}
}

func TestEncodeReportsMarshalErrors(t *testing.T) {
	var b bytes.Buffer
	if err := Encode(&b, make(chan int), "  "); err == nil || b.Len() != 0 {
		t.Fatalf("Encode(chan) = %v, wrote %q", err, b.Bytes())
	}
}

// The strings of keys and values may hold anything; the output must still be what the
// Encoder writes.
func FuzzEncodeIsEncoder(f *testing.F) {
	f.Add("a", "b", "  ")
	f.Add("{\"}", "\\\",[]:", "\t")
	f.Fuzz(func(t *testing.T, k, v, indent string) {
		if strings.Trim(indent, " \t") != "" {
			t.Skip() // the Encoder accepts only whitespace as indentation
		}
		val := map[string]any{k: []any{v, map[string]string{v: k}, []string{}}, "n": []any{}}
		var got bytes.Buffer
		if err := Encode(&got, val, indent); err != nil {
			t.Fatal(err)
		}
		if want := encoder(t, val, indent); !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("Encode:\n%s\nEncoder:\n%s", got.Bytes(), want)
		}
	})
}

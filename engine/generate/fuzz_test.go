package generate

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzValues makes values from arbitrary schema texts: no panic or hang, and for a schema
// it takes, exactly the values asked for, each JSON, the same for the same seed.
func FuzzValues(f *testing.F) {
	for _, s := range schemas {
		f.Add([]byte(s), "seed")
	}
	f.Add([]byte(`{"type":"array","items":{"enum":[1]},"uniqueItems":true,"minItems":5}`), "u")
	f.Add([]byte(`{"type":"integer","minimum":9007199254740993,"maximum":-1e308}`), "b")
	f.Fuzz(func(t *testing.T, schema []byte, seed string) {
		if len(schema) > 4096 {
			return
		}
		a, err := Values(schema, seed, 5)
		if err != nil {
			return
		}
		if len(a) != 5 {
			t.Fatalf("%d values, want 5", len(a))
		}
		for _, v := range a {
			if !json.Valid(v) {
				t.Fatalf("%q is not JSON", v)
			}
		}
		b, _ := Values(schema, seed, 5)
		if !slices.EqualFunc(a, b, bytes.Equal) {
			t.Fatal("not deterministic")
		}
	})
}

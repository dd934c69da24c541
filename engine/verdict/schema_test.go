package verdict

import (
	"strings"
	"sync"
	"testing"
)

func TestSchemaCompiledOnce(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := schemaFor(`{"type":"array","x-once":true}`)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		}()
	}
	wg.Wait()
	for _, s := range got {
		if s != got[0] || s == nil {
			t.Fatal("schema compiled more than once or not at all")
		}
	}
	if _, err := schemaFor(`{"$ref":"https://example.com/s.json"}`); err == nil {
		t.Error("external $ref was loaded")
	}
}

// A bound's message names the numbers exactly: as doubles, 2^63 and 2^63-1 print alike,
// and a count is not written 1,001.
func TestBoundMessagesAreExact(t *testing.T) {
	const schema = `{"type":"array","items":{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807,"multipleOf":1},"maxItems":1000}`
	for in, want := range map[string]string{
		`[9223372036854775808]`:                 "maximum: got 9223372036854775808, want 9223372036854775807",
		`[-9223372036854775809]`:                "minimum: got -9223372036854775809, want -9223372036854775808",
		"[" + strings.Repeat("1,", 1000) + "1]": "maxItems: got 1001, want 1000",
	} {
		v, err := DecodeJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(schema, v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

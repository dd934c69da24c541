package plan

import (
	"encoding/json"
	"testing"
)

// FuzzDiffJSON: diffing never panics, a document never differs from itself, and two
// documents that differ in any way produce at least one change.
func FuzzDiffJSON(f *testing.F) {
	f.Add(`{"argv":["a","b"],"inputs":{"/src":{"digest":"x"}}}`, `{"argv":["a","c"],"inputs":{"/src":{"digest":"y"}}}`)
	f.Add(`[1,2,{"a":null}]`, `[1,2]`)
	f.Add(`{"a b":{"":1}}`, `{"a b":{"":2}}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		if !json.Valid([]byte(a)) || !json.Valid([]byte(b)) {
			return
		}
		self, err := DiffJSON([]byte(a), []byte(a))
		if err != nil || len(self) != 0 {
			t.Fatalf("diff of %s with itself: %v, %v", a, self, err)
		}
		ch, err := DiffJSON([]byte(a), []byte(b))
		if err != nil {
			t.Fatalf("diff: %v", err)
		}
		var x, y any
		json.Unmarshal([]byte(a), &x)
		json.Unmarshal([]byte(b), &y)
		xa, _ := json.Marshal(x)
		yb, _ := json.Marshal(y)
		if string(xa) != string(yb) && len(ch) == 0 {
			t.Fatalf("%s and %s differ but no change was reported", a, b)
		}
		for _, c := range ch {
			if c.Path == "" {
				t.Fatalf("empty path in %+v", c)
			}
		}
	})
}

package verdict

import (
	"fmt"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/lang"
)

func unordered(eq string, tol *lang.Tolerance) *lang.Capability {
	c := capability(eq, "", "", tol)
	c.Unordered = true
	return c
}

func TestUnorderedCollections(t *testing.T) {
	runJudge(t, unordered("json", nil), []judgeCase{
		{"any order", `{"input":null,"output":[1,2,3]}`, "[3,1,2]", true, ""},
		{"duplicates counted", `{"input":null,"output":[1,1,2]}`, "[1,2,2]", false, "no element of the output matches the expected element 1"},
		{"length", `{"input":null,"output":[1,2]}`, "[2,1,1]", false, "got 3 elements, want 2 (as an unordered collection)"},
		{"nested arrays too", `{"input":null,"output":{"tags":[["b","a"],["c"]]}}`, `{"tags":[["c"],["a","b"]]}`, true, ""},
		{"objects as elements", `{"input":null,"output":[{"k":1,"v":"x"},{"k":2,"v":"y"}]}`, `[{"v":"y","k":2},{"k":1,"v":"x"}]`, true, ""},
		{"integers exactly", `{"input":null,"output":[9223372036854775807,1]}`, "[1,9223372036854775806]", false, "9223372036854775807"},
		{"types differ", `{"input":null,"output":[1,"1"]}`, `["1","1"]`, false, ""},
		{"mixed types in any order", `{"input":null,"output":[null,true,"s",1,[],{}]}`, `[{},[],1,"s",true,null]`, true, ""},
	})
	tol := unordered("numeric", &lang.Tolerance{Absolute: 0.06})
	runJudge(t, tol, []judgeCase{
		{"within tolerance in any order", `{"input":null,"output":[1,2,3]}`, "[3.05,0.95,2.01]", true, ""},
		{"beyond tolerance", `{"input":null,"output":[1,2]}`, "[2,1.1]", false, "no element of the output matches"},
		{"non-finite tokens in any order", `{"input":null,"output":["Infinity",1]}`, `[1.05,"Infinity"]`, true, ""},
	})
	// Ordered stays the default.
	runJudge(t, capability("json", "", "", nil), []judgeCase{
		{"ordered by default", `{"input":null,"output":[1,2]}`, "[2,1]", false, "at $[0]"},
	})
}

// Sorted order can pair wrongly under a tolerance (it is not transitive); the matching
// finds the pairing, and only arrays longer than maxMatched are left to sorted order.
func TestUnorderedMatchingBeatsSortedOrder(t *testing.T) {
	c := unordered("numeric", &lang.Tolerance{Absolute: 1})
	// Sorted by "a", {"a":0,"b":0} meets {"a":0.5,"b":5} (b differs); the pairing with
	// {"a":0.9,"b":0} and {"a":1,"b":5} with {"a":0.5,"b":5} exists.
	k := mustCase(t, c, `{"input":null,"output":[{"a":0,"b":0},{"a":1,"b":5}]}`)
	if v := Judge(c, k, ok(`[{"a":0.9,"b":0},{"a":0.5,"b":5}]`)); !v.Pass {
		t.Fatalf("a pairing exists: %+v", v)
	}
	if v := Judge(c, k, ok(`[{"a":0.9,"b":0},{"a":0.5,"b":6.5}]`)); v.Pass {
		t.Fatal("no pairing exists, and it passed")
	}
	// Longer than maxMatched: still judged, never passing what cannot be paired.
	var want, got []string
	for i := range maxMatched + 10 {
		want = append(want, fmt.Sprint(i))
		got = append(got, fmt.Sprint(maxMatched+9-i))
	}
	k = mustCase(t, c, `{"input":null,"output":[`+strings.Join(want, ",")+`]}`)
	if v := Judge(c, k, ok("["+strings.Join(got, ",")+"]")); !v.Pass {
		t.Fatalf("a reversed long array: %+v", v)
	}
	got[0] = "1000"
	if v := Judge(c, k, ok("["+strings.Join(got, ",")+"]")); v.Pass {
		t.Fatal("a long array with an element out of tolerance passed")
	}
}

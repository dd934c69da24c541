package evaluate

import (
	"testing"

	"github.com/foundry-build/foundry/lang"
)

// A generator that makes the same input twice yields one case: a signed test result names
// each case once (found by a sealed batch that drew [0] twice).
func TestGeneratedCasesAreDistinct(t *testing.T) {
	capb := &lang.Capability{Name: "c", Interface: &lang.Interface{Kind: "cli", InputSchema: `{"type":"array","items":{"enum":[0,1]},"minItems":1,"maxItems":1}`}}
	for _, suite := range []string{"dev", "sealed"} {
		cases, err := generatedCases(capb, suite, "s", 50)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, c := range cases {
			if names[string(c.digest)] {
				t.Fatalf("%s: %s generated twice", suite, c.c.Input)
			}
			names[string(c.digest)] = true
		}
		if len(cases) != 2 {
			t.Errorf("%s: %d cases, want the 2 distinct inputs [0] and [1]", suite, len(cases))
		}
	}
}

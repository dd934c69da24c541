package verdict

import (
	"testing"

	"github.com/foundry-build/foundry/lang"
)

const intList = `{"items":{"type":"integer"},"maxItems":1000,"type":"array"}`

// capability returns a cli contract with the int-sort errors.
func capability(eq, in, out string, tol *lang.Tolerance) *lang.Capability {
	return &lang.Capability{
		Name:        "t",
		Equivalence: eq,
		Tolerance:   tol,
		Interface: &lang.Interface{
			Kind:         "cli",
			Entrypoint:   []string{"/bin/t"},
			InputSchema:  in,
			OutputSchema: out,
			Errors:       map[string]int{"invalid_input": 2, "too_large": 3},
		},
	}
}

func mustCase(t *testing.T, c *lang.Capability, file string) *Case {
	t.Helper()
	k, err := ParseCase("case.json", []byte(file), c)
	if err != nil {
		t.Fatalf("ParseCase(%s): %v", file, err)
	}
	return k
}

func ok(stdout string) Observation { return Observation{Stdout: []byte(stdout)} }

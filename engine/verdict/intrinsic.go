package verdict

import (
	"fmt"

	"github.com/foundry-build/foundry/lang"
)

// Intrinsic names how an observation of a cli capability fails whatever the case expected,
// or returns "" when it does not: killed at the deadline or for memory, stdout cut off, an
// exit code that is neither 0 nor a declared error, or success with stdout that is not JSON
// (when the contract's output schema or equivalence needs JSON) or that violates the output
// schema. No input valid for the contract excuses any of these, so the evaluator may shrink
// a case that failed this way while the smaller input still fails the same way, with no
// expected output for it (spec/capability.md §6); a failure that depends on the expectation
// (a wrong output, a declared error) is not intrinsic. Two observations fail the same way
// exactly when Intrinsic returns the same text for both.
func Intrinsic(c *lang.Capability, o Observation) string {
	switch {
	case c == nil || c.Interface == nil || c.Interface.Kind != "cli":
		return ""
	case o.TimedOut:
		return "timed out"
	case o.OOMKilled:
		return "killed for exceeding its memory limit"
	case o.StdoutTruncated:
		return "stdout exceeded the output limit"
	}
	if o.ExitCode != 0 {
		for _, code := range c.Interface.Errors {
			if code == o.ExitCode {
				return "" // a declared error may be right for this input
			}
		}
		return fmt.Sprintf("exited with %d (not a declared error code)", o.ExitCode)
	}
	schema := c.Interface.OutputSchema
	if eq := equivalence(c); schema == "" && eq != "json" && eq != "numeric" {
		return ""
	}
	v, err := decodeStrict(o.Stdout)
	if err != nil {
		return "stdout is not JSON"
	}
	if schema != "" && validate(schema, v) != nil {
		return "output violates the output schema"
	}
	return ""
}

// ValidInput reports whether in, a JSON value, is an input the contract accepts: strict
// JSON (the rules of case files) that validates against the input schema when there is
// one. A shrunk input must be one, or a candidate could rightly refuse it.
func ValidInput(c *lang.Capability, in []byte) bool {
	v, err := decodeStrict(in)
	if err != nil {
		return false
	}
	return c.Interface.InputSchema == "" || validate(c.Interface.InputSchema, v) == nil
}

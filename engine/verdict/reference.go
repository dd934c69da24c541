package verdict

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/foundry-build/foundry/lang"
)

// ExpectationOf is what a reference's run on an input (o) makes a differential case expect
// of capability c's candidates: its output (compact JSON under the json and numeric
// equivalences, its stdout under bytes and lines), or the declared error it exited with.
// why is set, and the expectation unusable, when the run cannot be an expectation: the
// reference failed whatever the input (Intrinsic), or printed what the equivalence cannot
// compare. A reference that fails this way and a contract that calls the input valid
// disagree.
func ExpectationOf(c *lang.Capability, o Observation) (e Expectation, why string) {
	if c == nil || c.Interface == nil || c.Interface.Kind != "cli" {
		return e, "not a cli capability"
	}
	if why := Intrinsic(c, o); why != "" {
		got := ""
		if len(o.Stderr) > 0 {
			got = "; stderr " + quoted(o.Stderr, maxShown/2)
		}
		return e, why + got
	}
	if o.ExitCode != 0 {
		for name, code := range c.Interface.Errors {
			if code == o.ExitCode {
				return Expectation{Error: name}, ""
			}
		}
	}
	switch equivalence(c) {
	case "json", "numeric":
		v := compact(o.Stdout)
		if v == nil || !json.Valid(v) {
			return e, "stdout is not JSON: " + quoted(o.Stdout, maxShown/2)
		}
		return Expectation{Output: json.RawMessage(bytes.Clone(v))}, ""
	default:
		s := string(o.Stdout)
		return Expectation{Stdout: &s}, ""
	}
}

// Describe is the verdict's failure in one line: its reason, what was expected and what
// came ("" when it passed).
func (v Verdict) Describe() string {
	if v.Pass {
		return ""
	}
	return fmt.Sprintf("%s (expected %s, got %s)", v.Reason, v.Expected, v.Got)
}

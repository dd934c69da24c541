package verdict

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/foundry-build/foundry/lang"
)

// Observation is what the evaluator saw a candidate do on one case. It carries no identity
// of the candidate or of whoever built it.
type Observation struct {
	Stdout          []byte // as captured, up to the evaluator's output limit
	Stderr          []byte // shown, truncated, only to explain a failing exit status
	ExitCode        int
	TimedOut        bool // the wall-clock deadline killed it
	OOMKilled       bool // the memory limit killed it
	StdoutTruncated bool // stdout exceeded the output limit; Stdout holds a prefix
}

// Verdict is the judgment of one case. Expected and Got are short and human-readable
// (quoted text for bytes and lines, compact JSON for json and numeric, the exit status and a
// little stdout or stderr for exit-status failures; all truncated), meant to be shown as a
// counterexample; they are empty when the case passes.
type Verdict struct {
	Pass     bool
	Reason   string // why it failed; empty on a pass
	Expected string
	Got      string
}

// Judge judges one observation against one case of capability c, by the rules of
// spec/capability-cases.md. It is deterministic and never fails open: a case or contract it
// cannot judge (not cli, an expectation the case parser would refuse) is a failing verdict
// whose reason begins "cannot judge".
func Judge(c *lang.Capability, k *Case, o Observation) Verdict {
	if c == nil || c.Interface == nil || c.Interface.Kind != "cli" || k == nil {
		return Verdict{Reason: "cannot judge: not a case of a cli capability"}
	}
	want := k.Expect.Text()
	if k.Expect.Contract {
		if why := Intrinsic(c, o); why != "" {
			got := "exit " + exitMeaning(o.ExitCode, c.Interface.Errors)
			if len(o.Stderr) > 0 {
				got += "; stderr " + quoted(o.Stderr, maxShown/2)
			} else if o.ExitCode == 0 {
				got += "; stdout " + quoted(o.Stdout, maxShown/2)
			}
			return Verdict{Reason: why, Expected: want, Got: got}
		}
		return Verdict{Pass: true}
	}
	switch {
	case o.TimedOut:
		return Verdict{Reason: "timed out", Expected: want, Got: "killed at the deadline"}
	case o.OOMKilled:
		return Verdict{Reason: "killed for exceeding its memory limit", Expected: want, Got: "killed: out of memory"}
	case o.StdoutTruncated:
		return Verdict{Reason: "stdout exceeded the output limit", Expected: want, Got: quoted(o.Stdout, maxShown)}
	}

	errs := c.Interface.Errors
	if name := k.Expect.Error; name != "" {
		code, ok := errs[name]
		if !ok {
			return Verdict{Reason: fmt.Sprintf("cannot judge: error %q is not declared by the contract", name)}
		}
		if o.ExitCode == code {
			return Verdict{Pass: true}
		}
		got := "exit " + exitMeaning(o.ExitCode, errs)
		if o.ExitCode == 0 {
			got += "; stdout " + quoted(o.Stdout, maxShown/2)
		}
		return Verdict{Reason: fmt.Sprintf("exited with %s, want %d (error %q)", exitMeaning(o.ExitCode, errs), code, name), Expected: want, Got: got}
	}

	if o.ExitCode != 0 {
		got := "exit " + exitMeaning(o.ExitCode, errs)
		if len(o.Stderr) > 0 {
			got += "; stderr " + quoted(o.Stderr, maxShown/2)
		}
		return Verdict{Reason: fmt.Sprintf("exited with %s, want 0 (success)", exitMeaning(o.ExitCode, errs)), Expected: want, Got: got}
	}

	return judgeOutput(c, &k.Expect, o.Stdout, "stdout")
}

// judgeOutput judges what a successful run produced (a cli's stdout, a service's response
// body, named by what) against the expectation: the output schema first (schema-invalid
// output fails whatever the equivalence), then the equivalence.
func judgeOutput(c *lang.Capability, e *Expectation, out []byte, what string) Verdict {
	want := e.Text()
	var got any
	parsed := false
	if c.Interface.OutputSchema != "" {
		v, err := decodeStrict(out)
		if err != nil {
			return Verdict{Reason: what + " is not JSON: " + short(err.Error(), maxShown), Expected: want, Got: quoted(out, maxShown)}
		}
		if err := validate(c.Interface.OutputSchema, v); err != nil {
			return Verdict{Reason: "output violates the output schema: " + err.Error(), Expected: want, Got: short(string(compact(out)), maxShown)}
		}
		got, parsed = v, true
	}

	switch eq := equivalence(c); eq {
	case "bytes":
		return judgeBytes(e, out, what)
	case "lines":
		return judgeLines(e, out)
	case "json", "numeric":
		if e.Output == nil {
			return Verdict{Reason: fmt.Sprintf("cannot judge: the %s equivalence needs an expected output", eq)}
		}
		wantV, err := decodeStrict(e.Output)
		if err != nil {
			return Verdict{Reason: "cannot judge: expected output is not JSON"}
		}
		if !parsed {
			v, err := decodeStrict(out)
			if err != nil {
				return Verdict{Reason: what + " is not JSON: " + short(err.Error(), maxShown), Expected: want, Got: quoted(out, maxShown)}
			}
			got = v
		}
		r := relation{numeric: eq == "numeric", unordered: c.Unordered}
		if eq == "numeric" && c.Tolerance != nil {
			r.tol = tolerance{abs: clean(c.Tolerance.Absolute), rel: clean(c.Tolerance.Relative), nanEqual: c.Tolerance.NaNEqual}
		}
		if m := compareValues(got, wantV, "$", r); m != nil {
			return Verdict{Reason: "output differs " + m.String(), Expected: want, Got: short(string(compact(out)), maxShown)}
		}
		return Verdict{Pass: true}
	default:
		return Verdict{Reason: fmt.Sprintf("cannot judge: unknown equivalence %q", eq)}
	}
}

// Text describes an expectation, as Verdict.Expected shows it.
func (e *Expectation) Text() string {
	switch {
	case e.Contract:
		return "exit 0 with output the contract allows, or a declared error"
	case e.Error != "":
		return fmt.Sprintf("error %q", e.Error)
	case e.Stdout != nil:
		return quoted([]byte(*e.Stdout), maxShown)
	default:
		return short(string(e.Output), maxShown)
	}
}

// exitMeaning names an exit status: success, a declared error, or neither.
func exitMeaning(code int, errs map[string]int) string {
	if code == 0 {
		return "0 (success)"
	}
	var names []string
	for n, c := range errs {
		if c == code {
			names = append(names, fmt.Sprintf("%q", n))
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("%d (not a declared error code)", code)
	}
	sort.Strings(names)
	return fmt.Sprintf("%d (error %s)", code, strings.Join(names, ", "))
}

// expectedBytes returns the text the output must equal under bytes and lines, and whether a
// missing final newline is tolerated (true when the case gives output rather than stdout).
func expectedBytes(e *Expectation) ([]byte, bool) {
	if e.Stdout != nil {
		return []byte(*e.Stdout), false
	}
	return append(append([]byte{}, e.Output...), '\n'), true
}

func judgeBytes(e *Expectation, got []byte, what string) Verdict {
	want, lenient := expectedBytes(e)
	if bytes.Equal(got, want) || lenient && bytes.Equal(got, want[:len(want)-1]) {
		return Verdict{Pass: true}
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	line := bytes.Count(want[:i], []byte{'\n'}) + 1
	var reason string
	switch {
	case i == len(got):
		reason = fmt.Sprintf("%s ends at byte %d (line %d); want %d bytes", what, i, line, len(want))
	case i == len(want):
		reason = fmt.Sprintf("%s has %d bytes after the expected %d", what, len(got)-i, len(want))
	default:
		reason = fmt.Sprintf("%s differs at byte %d (line %d)", what, i, line)
	}
	return Verdict{Reason: reason, Expected: window(want, i), Got: window(got, i)}
}

// splitLines splits text into lines: "\n" and "\r\n" end a line, a final line ending does
// not start another line, and a lone "\r" is part of a line. "" has no lines; "\n" has one,
// empty.
func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	parts := strings.Split(string(b), "\n")
	for i := 0; i < len(parts)-1; i++ {
		parts[i] = strings.TrimSuffix(parts[i], "\r")
	}
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

func judgeLines(e *Expectation, got []byte) Verdict {
	wantText, _ := expectedBytes(e)
	w, g := splitLines(wantText), splitLines(got)
	for i := 0; i < len(w) && i < len(g); i++ {
		if w[i] != g[i] {
			return Verdict{Reason: fmt.Sprintf("line %d differs", i+1), Expected: quoted([]byte(w[i]), maxShown), Got: quoted([]byte(g[i]), maxShown)}
		}
	}
	switch {
	case len(g) > len(w):
		return Verdict{Reason: fmt.Sprintf("got %d lines, want %d", len(g), len(w)), Expected: "no line " + fmt.Sprint(len(w)+1), Got: quoted([]byte(g[len(w)]), maxShown)}
	case len(g) < len(w):
		return Verdict{Reason: fmt.Sprintf("got %d lines, want %d", len(g), len(w)), Expected: quoted([]byte(w[len(g)]), maxShown), Got: "no line " + fmt.Sprint(len(g)+1)}
	}
	return Verdict{Pass: true}
}

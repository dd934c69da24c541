package invoke

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/verdict"
)

var intSort = Capability{Name: "int-sort", Address: "capability.int-sort", Kind: "cli",
	InputSchema: json.RawMessage(intList), OutputSchema: json.RawMessage(intList), Errors: map[string]int{"invalid_input": 2}}

// A run is read under the contract: a declared error is a result, anything else that
// breaks the contract an *OutputError, and the output is returned as printed.
func TestJudgeReadsARunUnderTheContract(t *testing.T) {
	res, err := judge(intSort, verdict.Observation{Stdout: []byte("[-9223372036854775808, 3.0,\n 9223372036854775807]\n"), Stderr: []byte("note")})
	if err != nil || string(res.Output) != `[-9223372036854775808,3.0,9223372036854775807]` || res.Error != "" || res.Stderr != "note" {
		t.Fatalf("success: %+v %v", res, err)
	}
	res, err = judge(intSort, verdict.Observation{ExitCode: 2, Stderr: []byte("int-sort: bad")})
	if err != nil || res.Error != "invalid_input" || res.ExitCode != 2 || res.Output != nil || res.Stderr != "int-sort: bad" {
		t.Fatalf("declared error: %+v %v", res, err)
	}
	for _, c := range []struct {
		o    verdict.Observation
		want string
	}{
		{verdict.Observation{ExitCode: 3, Stderr: []byte("boom")}, "exited with 3, which is not a declared error code; stderr: boom"},
		{verdict.Observation{TimedOut: true, ExitCode: -1}, "killed at the deadline"},
		{verdict.Observation{OOMKilled: true, ExitCode: 137}, "memory limit"},
		{verdict.Observation{StdoutTruncated: true, Stdout: []byte("[1,")}, "more than the output limit"},
		{verdict.Observation{Stdout: []byte("sorted!")}, "the output is not JSON"},
		{verdict.Observation{Stdout: []byte(`[1.5]`)}, "the output violates the output schema"},
		{verdict.Observation{Stdout: []byte(`[9223372036854775808]`)}, "the output violates the output schema"},
		{verdict.Observation{Stdout: []byte(`{"a":1,"a":2}`)}, "the output is not JSON"},
	} {
		res, err := judge(intSort, c.o)
		var oe *OutputError
		if !errors.As(err, &oe) || !strings.Contains(oe.Reason, c.want) {
			t.Errorf("%+v: %+v %v, want an OutputError saying %q", c.o, res, err, c.want)
		}
	}
	long := strings.Repeat("x", StderrTail) + "END"
	if res, _ := judge(intSort, verdict.Observation{ExitCode: 2, Stderr: []byte(long)}); len(res.Stderr) != StderrTail || !strings.HasSuffix(res.Stderr, "END") {
		t.Errorf("stderr kept: %d bytes, want its last %d", len(res.Stderr), StderrTail)
	}
}

func TestCheckKeepsNumbersExact(t *testing.T) {
	for in, ok := range map[string]bool{
		`[9223372036854775807,-9223372036854775808]`: true, `[3.0]`: true, `[1e2]`: true, `[]`: true,
		`[9223372036854775808]`: false, `[-9223372036854775809]`: false, `[1.5]`: false, `[null]`: false, `{}`: false,
	} {
		if err := check(intSort.InputSchema, []byte(in), "input"); (err == nil) != ok {
			t.Errorf("check(%s) = %v, want valid %v", in, err, ok)
		}
	}
	if err := check(nil, []byte(`"anything"`), "input"); err != nil {
		t.Errorf("no schema: %v", err)
	}
}

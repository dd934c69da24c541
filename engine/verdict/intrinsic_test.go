package verdict

import "testing"

func TestIntrinsic(t *testing.T) {
	withSchema := capability("json", intList, intList, nil)
	bytesNoSchema := capability("bytes", "", "", nil)
	for _, tc := range []struct {
		name  string
		bytes bool
		o     Observation
		want  string
	}{
		{"a right or wrong output is not intrinsic", false, ok(`[1,2]`), ""},
		{"timed out", false, Observation{TimedOut: true, ExitCode: 137}, "timed out"},
		{"oom", false, Observation{OOMKilled: true}, "killed for exceeding its memory limit"},
		{"cut off", false, Observation{StdoutTruncated: true, Stdout: []byte("[1")}, "stdout exceeded the output limit"},
		{"an undeclared exit code", false, Observation{ExitCode: 7}, "exited with 7 (not a declared error code)"},
		{"another undeclared exit code differs", false, Observation{ExitCode: 9}, "exited with 9 (not a declared error code)"},
		{"a declared error may be right", false, Observation{ExitCode: 2}, ""},
		{"not JSON", false, ok(`[1,`), "stdout is not JSON"},
		{"schema violation", false, ok(`["a"]`), "output violates the output schema"},
		{"bytes without schema: any text may be right", true, ok(`[1,`), ""},
		{"bytes: an undeclared exit still is", true, Observation{ExitCode: 1}, "exited with 1 (not a declared error code)"},
	} {
		c := withSchema
		if tc.bytes {
			c = bytesNoSchema
		}
		if got := Intrinsic(c, tc.o); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	if Intrinsic(service("json", "", ""), Observation{ExitCode: 7}) != "" {
		t.Error("a service observation is judged by its responses, not here")
	}
}

func TestValidInput(t *testing.T) {
	c := capability("json", intList, intList, nil)
	for in, want := range map[string]bool{`[1,2]`: true, `[]`: true, `["a"]`: false, `{}`: false, `[1,`: false, `[1,1.5]`: false} {
		if got := ValidInput(c, []byte(in)); got != want {
			t.Errorf("%s: got %v, want %v", in, got, want)
		}
	}
	if !ValidInput(capability("bytes", "", "", nil), []byte(`"anything"`)) {
		t.Error("without an input schema any JSON is valid")
	}
}

func TestJudgeContractExpectation(t *testing.T) {
	c := capability("json", intList, intList, nil)
	k := &Case{Name: "generated", Input: []byte(`[1]`), Expect: Expectation{Contract: true}}
	for _, tc := range []struct {
		o    Observation
		pass bool
	}{
		{ok(`[1]`), true}, {ok(`[2,3]`), true}, {Observation{ExitCode: 2}, true},
		{Observation{ExitCode: 9, Stderr: []byte("boom")}, false}, {ok(`["x"]`), false}, {ok(`[1`), false},
		{Observation{TimedOut: true}, false},
	} {
		if v := Judge(c, k, tc.o); v.Pass != tc.pass || !v.Pass && v.Reason != Intrinsic(c, tc.o) {
			t.Errorf("%+v: %+v, want pass %v", tc.o, v, tc.pass)
		}
	}
}

package verdict

import (
	"strings"
	"testing"

	"github.com/foundry-build/foundry/lang"
)

type judgeCase struct {
	name   string
	file   string // case file
	stdout string
	pass   bool
	reason string // substring of Reason when failing
}

func runJudge(t *testing.T, c *lang.Capability, cases []judgeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := mustCase(t, c, tc.file)
			v := Judge(c, k, ok(tc.stdout))
			if v.Pass != tc.pass {
				t.Fatalf("stdout %q: Pass = %v, want %v (%+v)", tc.stdout, v.Pass, tc.pass, v)
			}
			if v.Pass && (v.Reason != "" || v.Expected != "" || v.Got != "") {
				t.Fatalf("passing verdict carries text: %+v", v)
			}
			if !v.Pass && (v.Reason == "" || !strings.Contains(v.Reason, tc.reason)) {
				t.Fatalf("stdout %q: Reason %q does not contain %q", tc.stdout, v.Reason, tc.reason)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	c := capability("bytes", "", "", nil)
	text := `{"input":null,"stdout":"a\nb\n"}`
	empty := `{"input":null,"stdout":""}`
	out := `{"input":[2,1],"output":[ 1, 2 ]}`
	order := `{"input":null,"output":{"b":1,"a":2}}`
	runJudge(t, c, []judgeCase{
		{"exact", text, "a\nb\n", true, ""},
		{"missing final newline", text, "a\nb", false, "ends at byte 3"},
		{"extra newline", text, "a\nb\n\n", false, "1 bytes after"},
		{"CRLF", text, "a\r\nb\r\n", false, "differs at byte 1 (line 1)"},
		{"reordered", text, "b\na\n", false, "differs at byte 0"},
		{"empty ok", empty, "", true, ""},
		{"empty vs newline", empty, "\n", false, "after the expected 0"},
		{"output compact", out, "[1,2]", true, ""},
		{"output one newline", out, "[1,2]\n", true, ""},
		{"output two newlines", out, "[1,2]\n\n", false, "after the expected"},
		{"output CRLF", out, "[1,2]\r\n", false, "differs at byte 5"},
		{"output whitespace", out, "[1, 2]\n", false, "differs at byte 3"},
		{"output as written order", order, `{"b":1,"a":2}`, true, ""},
		{"output other key order", order, `{"a":2,"b":1}`, false, "differs at byte 2"},
	})
}

func TestJSON(t *testing.T) {
	c := capability("json", "", "", nil)
	sorted := `{"input":[3,2,2,1],"output":[1,2,2,3]}`
	obj := `{"input":null,"output":{"a":1,"b":[true,null,"x"]}}`
	max := `{"input":null,"output":[9223372036854775807,-9223372036854775808]}`
	runJudge(t, c, []judgeCase{
		{"equal", sorted, "[1,2,2,3]", true, ""},
		{"whitespace", sorted, " [ 1 ,\n2,\t2 , 3 ]\n\n", true, ""},
		{"duplicate dropped", sorted, "[1,2,3]", false, "at $[2]: got 3, want 2"},
		{"extra duplicate", sorted, "[1,2,2,2,3]", false, "at $[3]: got 2, want 3"},
		{"too long", sorted, "[1,2,2,3,4]", false, "at $: got 5 elements, want 4"},
		{"unsorted", sorted, "[1,2,3,2]", false, "at $[2]"},
		{"empty array", `{"input":[],"output":[]}`, "[]", true, ""},
		{"empty vs one", `{"input":[],"output":[]}`, "[0]", false, "got 1 elements, want 0"},
		{"empty vs null", `{"input":[],"output":[]}`, "null", false, "got null null, want array"},
		{"key order", obj, `{"b":[true,null,"x"],"a":1}`, true, ""},
		{"escaped string", obj, `{"a":1,"b":[true,null,"\u0078"]}`, true, ""},
		{"missing member", obj, `{"a":1}`, false, `missing member "b"`},
		{"extra member", obj, `{"a":1,"b":[true,null,"x"],"c":0}`, false, `unexpected member "c"`},
		{"type", obj, `{"a":"1","b":[true,null,"x"]}`, false, "at $.a: got string"},
		{"duplicate key", obj, `{"a":1,"a":1,"b":[true,null,"x"]}`, false, "not JSON"},
		{"trailing data", obj, `{"a":1,"b":[true,null,"x"]} 1`, false, "not JSON"},
		{"empty stdout", obj, ``, false, "not JSON"},
		{"minus zero", `{"input":0,"output":0}`, "-0", true, ""},
		{"one point zero", `{"input":0,"output":1}`, "1.0", true, ""},
		{"exponent", `{"input":0,"output":100}`, "1e2", true, ""},
		{"nearest double", `{"input":0,"output":0.1}`, "0.10000000000000001", true, ""},
		{"not nearest double", `{"input":0,"output":0.1}`, "0.1000001", false, "got 0.1000001, want 0.1"},
		{"int64 extremes", max, "[9223372036854775807,-9223372036854775808]", true, ""},
		{"int64 max minus one", max, "[9223372036854775806,-9223372036854775808]", false, "at $[0]: got 9223372036854775806, want 9223372036854775807"},
		{"int64 as double", max, "[9223372036854775808,-9223372036854775808]", false, "at $[0]"},
		{"int64 rounded by a float printer", max, "[9223372036854776000,-9223372036854775808]", false, "at $[0]"},
		{"int64 in exponent form", max, "[9.223372036854775807e18,-9223372036854775808]", true, ""},
		{"2^53+1", `{"input":0,"output":9007199254740993}`, "9007199254740992", false, "got 9007199254740992"},
		{"NaN is a string here", `{"input":0,"output":"NaN"}`, `"NaN"`, true, ""},
		{"bare NaN is not JSON", `{"input":0,"output":"NaN"}`, `NaN`, false, "not JSON"},
	})
}

func TestLines(t *testing.T) {
	c := capability("lines", "", "", nil)
	two := `{"input":null,"stdout":"a\nb\n"}`
	runJudge(t, c, []judgeCase{
		{"exact", two, "a\nb\n", true, ""},
		{"no final newline", two, "a\nb", true, ""},
		{"CRLF", two, "a\r\nb\r\n", true, ""},
		{"mixed endings", two, "a\r\nb", true, ""},
		{"lone CR is content", two, "a\rb\n", false, "line 1 differs"},
		{"CR at end is content", two, "a\nb\r", false, "line 2 differs"},
		{"extra empty line", two, "a\nb\n\n", false, "got 3 lines, want 2"},
		{"order", two, "b\na\n", false, "line 1 differs"},
		{"duplicate", two, "a\na\nb\n", false, "line 2 differs"},
		{"trailing space", two, "a \nb\n", false, "line 1 differs"},
		{"missing line", two, "a\n", false, "got 1 lines, want 2"},
		{"no lines", `{"input":null,"stdout":""}`, "", true, ""},
		{"no lines vs one empty line", `{"input":null,"stdout":""}`, "\n", false, "got 1 lines, want 0"},
		{"one empty line", `{"input":null,"stdout":"\n"}`, "\r\n", true, ""},
		{"one empty line vs none", `{"input":null,"stdout":"\n"}`, "", false, "got 0 lines, want 1"},
		{"output is one line", `{"input":null,"output":[1, 2]}`, "[1,2]", true, ""},
	})
}

func TestNumeric(t *testing.T) {
	exact := capability("numeric", "", "", &lang.Tolerance{})
	max := `{"input":null,"output":[9223372036854775807]}`
	runJudge(t, exact, []judgeCase{
		{"int64 exact", max, "[9223372036854775807]", true, ""},
		{"int64 off by one", max, "[9223372036854775806]", false, "got 9223372036854775806, want 9223372036854775807"},
		{"int64 extremes", `{"input":null,"output":[-9223372036854775808]}`, "[9223372036854775807]", false, "at $[0]"},
		{"minus zero", `{"input":null,"output":0}`, "-0.0", true, ""},
		{"one point zero", `{"input":null,"output":1}`, "1.0", true, ""},
		{"structure", `{"input":null,"output":[1,2]}`, "[1,2,3]", false, "got 3 elements, want 2"},
		{"number vs numeric string", `{"input":null,"output":{"x":1}}`, `{"x":"1"}`, false, "at $.x: got string"},
		{"plain strings", `{"input":null,"output":["abc"]}`, `["abc"]`, true, ""},
		{"Inf equals Inf", `{"input":null,"output":["Infinity"]}`, `["Infinity"]`, true, ""},
		{"+Inf vs -Inf", `{"input":null,"output":"Infinity"}`, `"-Infinity"`, false, `got "-Infinity", want "Infinity"`},
		{"-Inf", `{"input":null,"output":"-Infinity"}`, `"-Infinity"`, true, ""},
		{"Inf vs finite", `{"input":null,"output":"Infinity"}`, `1e308`, false, `got 1e308`},
		{"NaN vs number", `{"input":null,"output":1}`, `"NaN"`, false, `got "NaN", want 1`},
	})

	abs := capability("numeric", "", "", &lang.Tolerance{Absolute: 1e-6})
	runJudge(t, abs, []judgeCase{
		{"within absolute", `{"input":null,"output":1}`, "1.0000005", true, ""},
		{"beyond absolute", `{"input":null,"output":1}`, "1.000002", false, "got 1.000002, want 1"},
		{"absolute near zero", `{"input":null,"output":0}`, "-0.0000009", true, ""},
		{"int64 beyond absolute", `{"input":null,"output":9223372036854775807}`, "9223372036854775806", false, "want 9223372036854775807"},
		{"Inf never within tolerance", `{"input":null,"output":"Infinity"}`, "1.7976931348623157e308", false, ""},
	})

	rel := capability("numeric", "", "", &lang.Tolerance{Relative: 1e-3})
	runJudge(t, rel, []judgeCase{
		{"within relative", `{"input":null,"output":1000}`, "1000.9", true, ""},
		{"beyond relative", `{"input":null,"output":1000}`, "1001.1", false, ""},
		{"relative is small near zero", `{"input":null,"output":0.001}`, "0.0011", false, ""},
		{"relative of the larger", `{"input":null,"output":1000}`, "999", true, ""},
		{"int64 within relative", `{"input":null,"output":9223372036854775807}`, "9223372036854775806", true, ""},
		{"int64 extremes beyond relative", `{"input":null,"output":9223372036854775807}`, "-9223372036854775808", false, ""},
	})

	both := capability("numeric", "", "", &lang.Tolerance{Absolute: 0.1, Relative: 0.01})
	runJudge(t, both, []judgeCase{
		{"relative dominates", `{"input":null,"output":100}`, "100.9", true, ""},
		{"absolute dominates", `{"input":null,"output":1}`, "1.09", true, ""},
		{"neither", `{"input":null,"output":1}`, "1.2", false, ""},
		{"integer within absolute", `{"input":null,"output":[3]}`, "[3.05]", true, ""},
		{"integers one apart", `{"input":null,"output":[3]}`, "[4]", false, ""},
	})

	nan := capability("numeric", "", "", &lang.Tolerance{NaNEqual: true})
	runJudge(t, nan, []judgeCase{
		{"NaN equals NaN", `{"input":null,"output":["NaN",1]}`, `["NaN",1]`, true, ""},
		{"NaN vs zero", `{"input":null,"output":"NaN"}`, `0`, false, ""},
		{"NaN vs Inf", `{"input":null,"output":"NaN"}`, `"Infinity"`, false, ""},
		{"bare NaN is not JSON", `{"input":null,"output":"NaN"}`, `NaN`, false, "not JSON"},
	})

	// Without nan_equal no output can match an expected NaN: ParseCase refuses such a case
	// (see TestParseCaseRefuses), and a hand-built one still fails.
	k := &Case{Name: "nan", Input: []byte("null"), Expect: Expectation{Output: []byte(`"NaN"`)}}
	if v := Judge(exact, k, ok(`"NaN"`)); v.Pass {
		t.Fatalf("NaN equalled NaN without nan_equal: %+v", v)
	}
}

func TestExitCodes(t *testing.T) {
	c := capability("json", intList, intList, nil)
	wantErr := mustCase(t, c, `{"input":"x","error":"invalid_input"}`)
	wantOut := mustCase(t, c, `{"input":[2,1],"output":[1,2]}`)
	for _, tc := range []struct {
		name   string
		k      *Case
		o      Observation
		pass   bool
		reason string
	}{
		{"error code, stdout ignored", wantErr, Observation{ExitCode: 2, Stdout: []byte("not json at all")}, true, ""},
		{"other declared error", wantErr, Observation{ExitCode: 3}, false, `exited with 3 (error "too_large"), want 2 (error "invalid_input")`},
		{"success instead of error", wantErr, Observation{ExitCode: 0, Stdout: []byte("[]")}, false, "exited with 0 (success)"},
		{"undeclared code for error", wantErr, Observation{ExitCode: 1}, false, "1 (not a declared error code)"},
		{"declared error instead of success", wantOut, Observation{ExitCode: 2}, false, `exited with 2 (error "invalid_input"), want 0`},
		{"crash instead of success", wantOut, Observation{ExitCode: 139, Stderr: []byte("segfault")}, false, "139 (not a declared error code)"},
		{"success", wantOut, ok("[1,2]\n"), true, ""},
		{"timed out with right output", wantOut, Observation{Stdout: []byte("[1,2]"), TimedOut: true}, false, "timed out"},
		{"timed out with right code", wantErr, Observation{ExitCode: 2, TimedOut: true}, false, "timed out"},
		{"OOM with right output", wantOut, Observation{Stdout: []byte("[1,2]"), OOMKilled: true}, false, "memory"},
		{"truncated", wantOut, Observation{Stdout: []byte("[1,2]"), StdoutTruncated: true}, false, "output limit"},
		{"truncated with right code", wantErr, Observation{ExitCode: 2, StdoutTruncated: true}, false, "output limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(c, tc.k, tc.o)
			if v.Pass != tc.pass || !v.Pass && !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("got %+v, want pass=%v reason containing %q", v, tc.pass, tc.reason)
			}
		})
	}
	v := Judge(c, wantOut, Observation{ExitCode: 139, Stderr: []byte("segfault")})
	if !strings.Contains(v.Got, "segfault") {
		t.Errorf("Got %q does not show stderr", v.Got)
	}
}

func TestOutputSchema(t *testing.T) {
	c := capability("json", intList, intList, nil)
	k := mustCase(t, c, `{"input":[9223372036854775807,1],"output":[1,9223372036854775807]}`)
	for _, tc := range []struct {
		stdout string
		pass   bool
		reason string
	}{
		{"[1,9223372036854775807]", true, ""},
		{`[1,"9223372036854775807"]`, false, "violates the output schema"},
		{"[1.5]", false, "violates the output schema"},
		{`{"a":1}`, false, "violates the output schema"},
		{"[" + strings.Repeat("1,", 1000) + "1]", false, "violates the output schema"},
		{"[1,9223372036854775806]", false, "output differs at $[1]"},
		{"[1,2", false, "not JSON"},
	} {
		v := Judge(c, k, ok(tc.stdout))
		if v.Pass != tc.pass || !v.Pass && !strings.Contains(v.Reason, tc.reason) {
			t.Errorf("stdout %.40q: got %+v, want pass=%v reason containing %q", tc.stdout, v, tc.pass, tc.reason)
		}
	}

	// The schema applies whatever the equivalence: bytes with an output schema.
	b := capability("bytes", "", intList, nil)
	kb := mustCase(t, b, `{"input":null,"stdout":"[1]"}`)
	if v := Judge(b, kb, ok("[1]")); !v.Pass {
		t.Errorf("bytes with schema: %+v", v)
	}
	bad := &Case{Name: "hand-built", Input: []byte("null"), Expect: Expectation{Stdout: new(string)}}
	if v := Judge(b, bad, ok("")); v.Pass || !strings.Contains(v.Reason, "not JSON") {
		t.Errorf("empty stdout under an output schema: %+v", v)
	}
}

func TestCounterexampleIsShort(t *testing.T) {
	c := capability("json", "", "", nil)
	big := "[" + strings.Repeat("1,", 5000) + "2]"
	k := mustCase(t, c, `{"input":null,"output":`+big+`}`)
	got := "[" + strings.Repeat("1,", 5000) + "3]"
	v := Judge(c, k, ok(got))
	if v.Pass {
		t.Fatal("passed")
	}
	if !strings.Contains(v.Reason, "at $[5000]: got 3, want 2") {
		t.Errorf("Reason %q does not locate the difference", v.Reason)
	}
	for _, s := range []string{v.Reason, v.Expected, v.Got} {
		if len(s) > maxShown+40 {
			t.Errorf("counterexample text of %d bytes: %.80q", len(s), s)
		}
	}

	bc := capability("bytes", "", "", nil)
	long := strings.Repeat("x", 10000)
	kb := mustCase(t, bc, `{"input":null,"stdout":"`+long+`"}`)
	v = Judge(bc, kb, ok(long[:5000]+"y"+long[5001:]))
	if v.Pass || len(v.Expected) > 3*maxContext+40 || !strings.Contains(v.Got, "y") {
		t.Errorf("bytes counterexample: %+v", v)
	}
}

func TestCannotJudge(t *testing.T) {
	k := &Case{Name: "x", Input: []byte("null"), Expect: Expectation{Output: []byte("1")}}
	svc := &lang.Capability{Name: "s", Equivalence: "json", Interface: &lang.Interface{Kind: "service"}}
	for _, tc := range []struct {
		c *lang.Capability
		k *Case
	}{
		{nil, k},
		{svc, k},
		{capability("json", "", "", nil), nil},
		{capability("json", "", "", nil), &Case{Expect: Expectation{Error: "nope"}}},
		{capability("json", "", "", nil), &Case{Expect: Expectation{Stdout: new(string)}}},
		{capability("fuzzy", "", "", nil), k},
	} {
		if v := Judge(tc.c, tc.k, ok("1")); v.Pass || !strings.HasPrefix(v.Reason, "cannot judge") {
			t.Errorf("Judge(%v, %v) = %+v, want a failing cannot-judge verdict", tc.c, tc.k, v)
		}
	}
}

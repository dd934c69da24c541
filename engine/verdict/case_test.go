package verdict

import (
	"strings"
	"testing"

	"github.com/foundry-build/foundry/lang"
)

func TestParseCase(t *testing.T) {
	c := capability("json", intList, intList, nil)
	k := mustCase(t, c, "{\n  \"description\": \"extremes\",\n  \"input\": [ 9223372036854775807 , -9223372036854775808, 1.0 ],\n  \"output\": [ -9223372036854775808, 1.0, 9223372036854775807 ]\n}\n")
	if got, want := string(k.Input), `[9223372036854775807,-9223372036854775808,1.0]`; got != want {
		t.Errorf("Input = %s, want %s (exact, compact, not rounded)", got, want)
	}
	if got, want := string(k.Stdin()), "[9223372036854775807,-9223372036854775808,1.0]\n"; got != want {
		t.Errorf("Stdin = %q, want %q", got, want)
	}
	if got, want := string(k.Expect.Output), `[-9223372036854775808,1.0,9223372036854775807]`; got != want {
		t.Errorf("Output = %s, want %s", got, want)
	}
	if k.Description != "extremes" || k.Name != "case.json" || k.Expect.Error != "" || k.Expect.Stdout != nil {
		t.Errorf("case = %+v", k)
	}

	e := mustCase(t, c, `{"input":{"not":"a list"},"error":"invalid_input"}`)
	if e.Expect.Error != "invalid_input" || e.Expect.Output != nil {
		t.Errorf("error case = %+v", e)
	}

	b := mustCase(t, capability("bytes", "", "", nil), `{"input":"x","stdout":"a\r\nb"}`)
	if b.Expect.Stdout == nil || *b.Expect.Stdout != "a\r\nb" {
		t.Errorf("stdout case = %+v", b)
	}
	if s := string(b.Stdin()); s != "\"x\"\n" {
		t.Errorf("Stdin = %q", s)
	}
	// The input keeps its spelling: escapes and member order as written.
	w := mustCase(t, capability("json", "", "", nil), `{"input":{"b":"\u0041", "a":1e0},"output":null}`)
	if got := string(w.Input); got != `{"b":"\u0041","a":1e0}` {
		t.Errorf("Input = %s", got)
	}
}

func TestParseCaseRefuses(t *testing.T) {
	jsonCap := capability("json", intList, intList, nil)
	numNoNaN := capability("numeric", "", "", &lang.Tolerance{})
	svc := &lang.Capability{Name: "s", Interface: &lang.Interface{Kind: "service", Port: 80}}
	for _, tc := range []struct {
		name, file string
		c          *lang.Capability
		want       string
	}{
		{"duplicate key", `{"input":[1],"input":[2],"output":[1]}`, jsonCap, "duplicate object member name"},
		{"duplicate key in input", `{"input":[{"a":1,"a":2}],"error":"invalid_input"}`, jsonCap, "duplicate object member name"},
		{"duplicate key escaped", `{"input":[1],"\u0069nput":[2],"output":[1]}`, jsonCap, "duplicate object member name"},
		{"unknown field", `{"input":[1],"output":[1],"expect":[1]}`, jsonCap, `unknown member "expect"`},
		{"misspelt output", `{"input":[1],"ouput":[1]}`, jsonCap, `unknown member "ouput"`},
		{"output and error", `{"input":[1],"output":[1],"error":"invalid_input"}`, jsonCap, "both output and error"},
		{"output and stdout", `{"input":[1],"output":[1],"stdout":"[1]"}`, capability("bytes", "", "", nil), "both output and stdout"},
		{"no expectation", `{"input":[1]}`, jsonCap, "needs one of output, stdout or error"},
		{"no input", `{"output":[1]}`, jsonCap, "missing input"},
		{"unknown error", `{"input":"x","error":"bad_input"}`, jsonCap, `error "bad_input" is not declared`},
		{"error not a string", `{"input":"x","error":2}`, jsonCap, "error must be the name"},
		{"empty error", `{"input":"x","error":""}`, jsonCap, "error must be the name"},
		{"input violates schema", `{"input":["1"],"output":[1]}`, jsonCap, "input violates the input schema"},
		{"input too long", `{"input":[` + strings.Repeat("1,", 1000) + `1],"output":[1]}`, jsonCap, "input violates the input schema"},
		{"output violates schema", `{"input":[1],"output":[true]}`, jsonCap, "expected output violates the output schema"},
		{"stdout under json", `{"input":[1],"stdout":"[1]"}`, jsonCap, "stdout is for the bytes and lines"},
		{"stdout not JSON under schema", `{"input":[1],"stdout":"one"}`, capability("lines", intList, intList, nil), "requires JSON"},
		{"stdout violates schema", `{"input":[1],"stdout":"[\"a\"]"}`, capability("bytes", "", intList, nil), "violates the output schema"},
		{"stdout not a string", `{"input":[1],"stdout":[1]}`, capability("bytes", "", "", nil), "stdout must be a string"},
		{"description not a string", `{"description":1,"input":[1],"output":[1]}`, jsonCap, "description must be a string"},
		{"NaN without nan_equal", `{"input":null,"output":[1,"NaN"]}`, numNoNaN, "nan_equal"},
		{"not an object", `[{"input":1,"output":1}]`, jsonCap, "a case file is a JSON object"},
		{"null", `null`, jsonCap, "a case file is a JSON object"},
		{"trailing data", `{"input":[1],"output":[1]} {}`, jsonCap, "trailing data"},
		{"invalid UTF-8", "{\"input\":[1],\"output\":[1],\"description\":\"\xff\"}", jsonCap, "invalid UTF-8"},
		{"number overflow", `{"input":[1e400],"error":"invalid_input"}`, jsonCap, "overflows"},
		{"empty file", ``, jsonCap, "not valid JSON"},
		{"too large", `{"input":"` + strings.Repeat("x", MaxCaseBytes) + `","error":"invalid_input"}`, jsonCap, "limited to"},
		{"cli case for a service", `{"input":1,"output":1}`, svc, `unknown member "input", "output"; a service case has requests`},
		{"unknown equivalence", `{"input":1,"output":1}`, capability("approx", "", "", nil), "unknown equivalence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseCase("cases/x.json", []byte(tc.file), tc.c)
			if err == nil {
				t.Fatalf("accepted: %+v", k)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "case cases/x.json: ") {
				t.Fatalf("error %q, want it to name the case and contain %q", err, tc.want)
			}
		})
	}
}

// A case that expects an error may have any JSON input: error cases test rejection.
func TestParseCaseErrorInputUnchecked(t *testing.T) {
	c := capability("json", intList, intList, nil)
	for _, in := range []string{`"x"`, `[1.5]`, `{"a":[1]}`, `null`, `[` + strings.Repeat("1,", 1000) + `1]`} {
		if _, err := ParseCase("e", []byte(`{"input":`+in+`,"error":"too_large"}`), c); err != nil {
			t.Errorf("input %.20s: %v", in, err)
		}
	}
	// But the NaN rule and the schema rules for outputs do not apply to error cases.
	if _, err := ParseCase("n", []byte(`{"input":"NaN","error":"invalid_input"}`), capability("numeric", "", "", &lang.Tolerance{})); err != nil {
		t.Error(err)
	}
}

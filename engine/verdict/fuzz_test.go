package verdict

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/lang"
)

// FuzzParseCase checks that ParseCase never panics and that every case it accepts keeps its
// promises: a name on every error, exactly one expectation, a declared error name, an input
// that is JSON, and stdin that is the input plus one newline.
func FuzzParseCase(f *testing.F) {
	for _, s := range []string{
		`{"input":[3,1,2],"output":[1,2,3]}`,
		`{"input":"x","error":"invalid_input"}`,
		`{"input":[9223372036854775807,-9223372036854775808],"output":[-9223372036854775808,9223372036854775807]}`,
		`{"description":"d","input":null,"stdout":"a\r\nb\n"}`,
		`{"input":[1],"input":[2],"output":[1]}`,
		`{"input":[1],"output":[1],"error":"invalid_input"}`,
		`{"input":[1],"ouput":[1]}`,
		`{"input":[1e400],"error":"too_large"}`,
		`{"input":null,"output":["NaN","Infinity","-Infinity"]}`,
		`[]`, `null`, ``, "{\"input\":\"\xff\"}",
		`{"requests":[{"path":"/sort","input":[2,1],"output":[1,2]},{"method":"GET","path":"/n","body":"1"},{"path":"/sort","input":"x","error":"invalid_input"}]}`,
		`{"requests":[]}`, `{"requests":[{"path":"sort","output":1}]}`,
	} {
		f.Add([]byte(s))
	}
	caps := []*lang.Capability{
		capability("json", intList, intList, nil),
		capability("bytes", "", "", nil),
		capability("lines", "", intList, nil),
		capability("numeric", "", "", &lang.Tolerance{Relative: 1e-9}),
		service("json", intList, intList),
		service("bytes", "", ""),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range caps {
			k, err := ParseCase("f.json", data, c)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "case f.json: ") {
					t.Fatalf("error does not name the case: %v", err)
				}
				continue
			}
			if c.Interface.Kind == "service" {
				checkServiceCase(t, c, k)
				continue
			}
			n := 0
			if k.Expect.Output != nil {
				n++
				if !json.Valid(k.Expect.Output) {
					t.Fatalf("expected output is not JSON: %q", k.Expect.Output)
				}
			}
			if k.Expect.Stdout != nil {
				n++
			}
			if k.Expect.Error != "" {
				n++
				if _, ok := c.Interface.Errors[k.Expect.Error]; !ok {
					t.Fatalf("undeclared error %q accepted", k.Expect.Error)
				}
			}
			if n != 1 {
				t.Fatalf("%d expectations in %+v", n, k)
			}
			if !json.Valid(k.Input) || string(k.Stdin()) != string(k.Input)+"\n" {
				t.Fatalf("input %q, stdin %q", k.Input, k.Stdin())
			}
		}
	})
}

// FuzzJudgeStdout feeds arbitrary stdout to Judge under every equivalence. Judge must not
// panic, must be deterministic, must explain every failure and only failures, must keep its
// counterexample text short, and must pass the expected text itself.
func FuzzJudgeStdout(f *testing.F) {
	for _, s := range []string{
		"[1,2,2,3]", "[1,2,2,3]\n", "[1,2,3]", " [ 1 , 2 , 2 , 3 ] ", "[1,2,2,3.0]", "[1,2,2,3]\r\n",
		"[9223372036854775807]", "[1,\"NaN\"]", `{"a":1,"a":2}`, "", "\n", "\xff", "NaN",
		"[" + strings.Repeat("[", 1200) + "]",
	} {
		f.Add([]byte(s), 0)
	}
	f.Add([]byte("x"), 2)
	f.Add([]byte("x"), 137)
	type setup struct {
		c *lang.Capability
		k *Case
	}
	var setups []setup
	for _, c := range []*lang.Capability{
		capability("json", intList, intList, nil),
		capability("json", "", "", nil),
		capability("bytes", "", "", nil),
		capability("lines", "", "", nil),
		capability("numeric", "", "", &lang.Tolerance{Absolute: 0.5, Relative: 1e-9, NaNEqual: true}),
	} {
		for _, file := range []string{
			`{"input":[3,2,2,1],"output":[1,2,2,3]}`,
			`{"input":"x","error":"invalid_input"}`,
		} {
			k, err := ParseCase("f.json", []byte(file), c)
			if err != nil {
				f.Fatal(err)
			}
			setups = append(setups, setup{c, k})
		}
	}
	f.Fuzz(func(t *testing.T, stdout []byte, exit int) {
		for _, s := range setups {
			o := Observation{Stdout: stdout, ExitCode: exit}
			v := Judge(s.c, s.k, o)
			if v != Judge(s.c, s.k, o) {
				t.Fatal("Judge is not deterministic")
			}
			if v.Pass != (v.Reason == "") {
				t.Fatalf("pass=%v with reason %q", v.Pass, v.Reason)
			}
			for _, txt := range []string{v.Reason, v.Expected, v.Got} {
				if len(txt) > 3*maxShown {
					t.Fatalf("counterexample text of %d bytes: %.80q", len(txt), txt)
				}
			}
			if s.k.Expect.Error != "" && v.Pass != (exit == s.c.Interface.Errors[s.k.Expect.Error]) {
				t.Fatalf("error case, exit %d: %+v", exit, v)
			}
			if s.k.Expect.Error == "" && exit != 0 && v.Pass {
				t.Fatalf("passed with exit %d", exit)
			}
		}
		// The expected text itself always passes.
		for _, s := range setups {
			if s.k.Expect.Output != nil {
				if v := Judge(s.c, s.k, ok(string(s.k.Expect.Output))); !v.Pass {
					t.Fatalf("expected output failed: %+v", v)
				}
			}
		}
	})
}

// FuzzNumbers checks the number comparison against exact rational arithmetic: with zero
// tolerance two integers are equal exactly when their values are, and equality is
// reflexive and symmetric under any tolerance.
func FuzzNumbers(f *testing.F) {
	for _, p := range [][2]string{
		{"9223372036854775807", "9223372036854775806"}, {"1.0", "1"}, {"-0", "0"}, {"1e2", "100"},
		{"0.1", "0.10000000000000001"}, {"1e-400", "0"}, {"123.456e-2", "1.23456"},
	} {
		f.Add(p[0], p[1], 0.0, 0.0)
	}
	f.Fuzz(func(t *testing.T, a, b string, abs, rel float64) {
		va, erra := decodeStrict([]byte(a))
		vb, errb := decodeStrict([]byte(b))
		na, oka := va.(json.Number)
		nb, okb := vb.(json.Number)
		if erra != nil || errb != nil || !oka || !okb || len(a) > 64 || len(b) > 64 {
			return
		}
		x, y := parseNumber(string(na)), parseNumber(string(nb))
		tol := tolerance{abs: clean(abs), rel: clean(rel)}
		if !numbersEqual(x, x, tol) || numbersEqual(x, y, tol) != numbersEqual(y, x, tol) {
			t.Fatalf("%s, %s: not reflexive or not symmetric", a, b)
		}
		if x.isInt() && y.isInt() && small(string(na)) && small(string(nb)) {
			ra, _ := new(big.Rat).SetString(string(na))
			rb, _ := new(big.Rat).SetString(string(nb))
			if got := numbersEqual(x, y, tolerance{}); got != (ra.Cmp(rb) == 0) {
				t.Fatalf("numbersEqual(%s, %s) = %v, exact comparison says %v", a, b, got, !got)
			}
		}
	})
}

// small reports whether a literal's exponent is small enough for big.Rat to parse cheaply.
func small(lit string) bool {
	i := strings.IndexAny(lit, "eE")
	return i < 0 || len(strings.TrimLeft(lit[i+1:], "+-0")) <= 3
}

// FuzzJudgeResponse feeds arbitrary statuses and bodies to JudgeResponse under every
// equivalence: no panic, deterministic, a reason for every failure and only failures, and an
// expected error passes on its status alone.
func FuzzJudgeResponse(f *testing.F) {
	f.Add(200, []byte(`[1,2]`))
	f.Add(400, []byte(`oops`))
	f.Add(201, []byte("[1,\n2]\n"))
	f.Add(500, []byte{0xff})
	caps := []*lang.Capability{service("json", intList, intList), service("bytes", "", ""), service("lines", "", ""), service("numeric", "", "")}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		for _, c := range caps {
			file := `{"requests":[{"path":"/s","input":[2,1],"output":[1,2]},{"path":"/s","input":"x","error":"invalid_input"}]}`
			k, err := ParseCase("f.json", []byte(file), c)
			if err != nil {
				t.Fatal(err)
			}
			for i := range k.Requests {
				r := &k.Requests[i]
				resp := Response{Status: status, Body: body}
				v := JudgeResponse(c, r, resp)
				if v != JudgeResponse(c, r, resp) {
					t.Fatal("not deterministic")
				}
				if v.Pass == (v.Reason != "") {
					t.Fatalf("pass=%v with reason %q", v.Pass, v.Reason)
				}
				if r.Expect.Error != "" && v.Pass != (status == 400) {
					t.Fatalf("expected error: status %d judged %+v", status, v)
				}
				if r.Expect.Error == "" && v.Pass && (status < 200 || status > 299) {
					t.Fatalf("status %d passed a success expectation", status)
				}
				if len(v.Expected) > 600 || len(v.Got) > 600 {
					t.Fatalf("counterexample text too long: %d/%d", len(v.Expected), len(v.Got))
				}
			}
		}
	})
}

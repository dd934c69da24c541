package lang

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// budgetDiags returns the diagnostics of an exceeded budget among diags.
func budgetDiags(diags hcl.Diagnostics) []*hcl.Diagnostic {
	var out []*hcl.Diagnostic
	for _, d := range diags {
		if d.Summary == budgetSummary {
			out = append(out, d)
		}
	}
	return out
}

// An input an honest project might hold is refused under a small budget, at the expression
// that crossed it, and loads once the budget is raised (cmd/foundry raises it from the
// environment: TestEvalBudgetFromEnvironment).
func TestRaisedBudgetAdmitsLargerInput(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": `
locals {
  ids   = flatten([for i in range(100) : [for j in range(1000) : "id-${i}-${j}"]])
  count = length(local.ids)
}
`})
	_, diags := Load(dir, Options{Budget: Budget{MaxValues: 100_000}})
	bd := budgetDiags(diags)
	if len(bd) != 1 || len(diags) != 1 {
		t.Fatalf("with a budget of 100000 values: %v, want one «%s»", diags, budgetSummary)
	}
	if d := bd[0]; d.Subject == nil || d.Subject.Filename != "main.hcl" || d.Subject.Start.Line != 3 ||
		!strings.Contains(d.Detail, EnvMaxValues) || !strings.Contains(d.Detail, "100000 values") {
		t.Fatalf("diagnostic %q at %v: want main.hcl line 3 naming the limit and %s", d.Detail, d.Subject, EnvMaxValues)
	}
	cfg, diags := Load(dir, Options{Budget: Budget{MaxValues: 1_000_000}})
	if diags.HasErrors() {
		t.Fatalf("with a raised budget: %v", diags)
	}
	if n := cfg.Locals["count"].AsBigFloat().String(); n != "100000" {
		t.Fatalf("count = %s", n)
	}
	if u := cfg.EvalUsage; u.Values <= 100_000 || u.Values > 1_000_000 || u.Bytes <= 0 {
		t.Fatalf("usage %+v", u)
	}
}

// Each limit is enforced, and named in the diagnostic with the variable that raises it.
func TestEachLimitIsEnforced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		budget Budget
		env    string
	}{
		{"values", `x = [for i in range(1000) : i]`, Budget{MaxValues: 500}, EnvMaxValues},
		{"bytes", `x = join("", [for i in range(1000) : "0123456789"])`, Budget{MaxBytes: 5000}, EnvMaxBytes},
		{"bytes of a template", `x = "${local.y}${local.y}${local.y}"
  y = join("", [for i in range(100) : "0123456789"])`, Budget{MaxBytes: 4000}, EnvMaxBytes},
		{"time", `x = [for i in range(1000) : [for j in range(1000) : [for k in range(1000) : k]]]`, Budget{MaxValues: 1 << 40, MaxBytes: 1 << 40, Timeout: 50 * time.Millisecond}, EnvTimeout},
		{"a number too long to print", `x = "${1e600000000}"`, Budget{}, EnvMaxBytes},
		{"a conversion of a long tuple", `x = sort(flatten([for i in range(200) : [for j in range(100) : "a"]]))`, Budget{}, EnvMaxValues},
		{"a format that pads", `x = format("%900000000s", "")`, Budget{}, EnvMaxBytes},
		{"a local that holds another twice", strings.Join(doublingLocals(40), "\n  "), Budget{}, EnvMaxValues},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"main.hcl": "locals {\n  " + tc.src + "\n}\n"})
			start := time.Now()
			_, diags := Load(dir, Options{Budget: tc.budget})
			t.Logf("refused in %v", time.Since(start))
			bd := budgetDiags(diags)
			if len(bd) != 1 {
				t.Fatalf("diagnostics %v, want one «%s»", diags, budgetSummary)
			}
			if !strings.Contains(bd[0].Detail, tc.env) || bd[0].Severity != hcl.DiagError || bd[0].Subject == nil {
				t.Fatalf("diagnostic %+v: want an error at the expression naming %s", bd[0], tc.env)
			}
		})
	}
}

// doublingLocals are n locals, each a tuple that holds the one before twice.
func doublingLocals(n int) []string {
	out := []string{"l0 = [1]"}
	for i := 1; i < n; i++ {
		out = append(out, fmt.Sprintf("l%d = [local.l%d, local.l%d]", i, i-1, i-1))
	}
	return out
}

// Once the budget is exceeded, evaluation stops everywhere, and what crossed it is reported
// once, even when many steps are decoded in parallel and each would cross it.
func TestExceededBudgetIsReportedOnce(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 4*parallelDecodeMin; i++ {
		fmt.Fprintf(&b, "step \"s%d\" {\n  image = seed.base\n  run   = flatten([for i in range(1000) : [for j in range(2) : \"${i}${j}\"]])\n}\n", i)
	}
	dir := writeProject(t, map[string]string{"main.hcl": manyMain, "sh": "#!/bin/sh\n", "steps.hcl": b.String()})
	_, diags := Load(dir, Options{Budget: Budget{MaxValues: 100_000}})
	if bd := budgetDiags(diags); len(bd) != 1 || len(diags) != 1 {
		t.Fatalf("%d diagnostics, %d of them the budget's; want just one: %v", len(diags), len(bd), diags)
	}
}

// The expressions the budget wraps keep their meaning: references in them are found (locals
// are evaluated in dependency order, a bad reference is reported as such), for expressions,
// templates, conditionals and constructors evaluate as before, and a variable's type is
// still read from its syntax.
func TestBudgetedExpressionsKeepTheirMeaning(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": `
variable "v" {
  type    = object({ a = list(string) })
  default = { a = ["x", "y"] }
}
locals {
  a = [for x in local.b : "${x}-${local.c}" if x != "skip"]
  m = { for k, v in { p = 1, q = 2 } : k => v * 2 }
  t = [local.b, [local.c], var.v.a]
  o = { (local.c) = local.b, lit = "z" }
  s = true ? local.b : ["other"]
  j = join("+", [for x in var.v.a : upper(x)])
  b = ["one", "skip", "two"]
  c = "C"
}
`})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := map[string]string{}
	for _, n := range []string{"a", "m", "t", "o", "s", "j"} {
		got[n] = fmt.Sprintf("%#v", cfg.Locals[n])
	}
	want := map[string]string{
		"a": `cty.TupleVal([]cty.Value{cty.StringVal("one-C"), cty.StringVal("two-C")})`,
		"m": `cty.ObjectVal(map[string]cty.Value{"p":cty.NumberIntVal(2), "q":cty.NumberIntVal(4)})`,
		"j": `cty.StringVal("X+Y")`,
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("local.%s = %s, want %s", n, got[n], w)
		}
	}
	if !strings.Contains(got["o"], `"C":cty.TupleVal`) || !strings.Contains(got["t"], `cty.StringVal("C")`) || !strings.Contains(got["s"], `"skip"`) {
		t.Errorf("constructors and conditionals: %v", got)
	}

	_, diags = Load(writeProject(t, map[string]string{"main.hcl": "locals {\n  a = [for x in [1] : \"${local.nope}\"]\n}\n"}), Options{})
	if len(diags) != 1 || diags[0].Summary != "Reference to undeclared local value" || diags[0].Subject.Start.Line != 2 {
		t.Fatalf("a bad reference in a for expression: %v", diags)
	}
}

// A file that every step reads is read, held and charged once.
func TestFileReadByManyStepsIsChargedOnce(t *testing.T) {
	script := strings.Repeat("echo building\n", 100)
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, "step \"s%d\" {\n  image  = seed.base\n  run    = [\"sh\", \"/build.sh\"]\n  mounts = { \"/build.sh\" = file(\"build.sh\") }\n}\n", i)
	}
	dir := writeProject(t, map[string]string{"main.hcl": manyMain, "sh": "#!/bin/sh\n", "build.sh": script, "steps.hcl": b.String()})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	// Once per worker that decodes steps, at most.
	if u := cfg.EvalUsage; u.Bytes > 8*int64(len(script)) {
		t.Fatalf("2000 steps reading one %d-byte file charged %d bytes", len(script), u.Bytes)
	}
	if got := string(cfg.Steps["s1999"].Mounts["/build.sh"].Inline); got != script {
		t.Fatalf("mount of s1999 is %q", got)
	}
}

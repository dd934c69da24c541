package lang

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// FuzzLoad feeds arbitrary bytes to the HCL front end as a project's only file: it must
// return diagnostics, never panic, and never read outside the project directory.
func FuzzLoad(f *testing.F) {
	seeds := []string{
		"",
		"step \"a\" {\n  image = seed.b\n  run = [\"x\"]\n}\n",
		"seed \"b\" {\n  layer { files = { \"/bin/sh\" = host_file(\"/bin/sh\") } }\n}\nstep \"a\" {\n  image = seed.b\n  run = [\"sh\"]\n  outputs = [\"/out/x\"]\n  limits { memory = \"1GiB\" }\n}\n",
		"locals { a = local.b\n b = local.a }",
		"variable \"v\" { default = [1, {a = 2}] }\nlocals { x = jsondecode(jsonencode(var.v)) }\n",
		"capability \"c\" {\n  equivalence = \"numeric\"\n  tolerance { absolute = 1e-9 }\n  interface \"cli\" { entrypoint = [\"/x\"] errors = { bad = 2 } }\n}\n",
		"recipe \"r\" {\n  provides = capability.c\n  step \"s\" {\n image = seed.x\n run = [\"a\"] }\n  package { files = { \"/x\" = step.s.output[\"/out/a\"] } }\n}\n",
		"project \"p\" { brief = file(\"../../etc/passwd\") }",
		"locals { a = \"${\"",
		"seed \"b\" {\n  for_each = toset([\"x\", \"y\"])\n  layer { files = { \"/bin/sh\" = host_file(\"/bin/sh\") } }\n}\nstep \"a\" {\n  count = 2\n  image = seed.b[\"x\"]\n  run = [\"${count.index}\"]\n  outputs = [\"/out/x\"]\n}\nstep \"c\" {\n  for_each = { k = \"v\" }\n  image = seed.b[each.key]\n  mounts = { for i, s in step.a : \"/in/${i}\" => s.output[\"/out/x\"] }\n  run = [each.value]\n}\n",
		"module \"m\" {\n  source = \"./m\"\n  for_each = toset([\"a\"])\n  x = each.key\n}\nvariable \"x\" { default = \"\" }\noutput \"o\" { value = var.x }\nlocals { y = module.m[\"a\"].o }\n",
		"module \"m\" {\n  source = \"./\"\n}\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		// The same source is the project's file and a module's, so that module blocks
		// load fuzzed files too.
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "m"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"main.hcl", "m/main.hcl"} {
			if err := os.WriteFile(filepath.Join(dir, p), src, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg, diags := Load(dir, Options{})
		if cfg == nil {
			t.Fatal("Load returned no config")
		}
		for _, d := range diags {
			if d.Summary == "" {
				t.Fatalf("diagnostic without a summary: %#v", d)
			}
		}
		for _, in := range cfg.Inputs {
			if in.Kind == "project_file" || in.Kind == "project_dir" {
				if filepath.IsAbs(in.Path) || len(in.Path) >= 2 && in.Path[:2] == ".." {
					t.Fatalf("read outside the project: %v", in)
				}
			}
		}
	})
}

// budgetExprs writes HCL expressions from fuzz bytes: for expressions, joins, templates,
// tuples, objects and calls nested in each other over range(N), string literals, the
// variables of enclosing for expressions and earlier locals. Each byte picks what comes
// next (expr: its value modulo 12, 11 for a leaf; leaf: modulo 4), and a range's length is
// the byte after it times four.
type budgetExprs struct {
	data []byte
	vars []string // the for variables in scope
	n    int      // for variables made, for their names
}

func (g *budgetExprs) next() int {
	if len(g.data) == 0 {
		return -1
	}
	b := int(g.data[0])
	g.data = g.data[1:]
	return b
}

func (g *budgetExprs) leaf(locals int) string {
	b := g.next()
	switch {
	case b < 0:
		return `"x"`
	case b%4 == 0 && len(g.vars) > 0:
		return g.vars[b/4%len(g.vars)]
	case b%4 == 1 && locals > 0:
		return fmt.Sprintf("local.l%d", b/4%locals)
	case b%4 == 2:
		return fmt.Sprintf("range(%d)", g.next()*4%1024)
	}
	return fmt.Sprintf("%q", strings.Repeat("ab", b%8))
}

func (g *budgetExprs) expr(depth, locals int) string {
	b := g.next()
	if b < 0 || depth == 0 {
		return g.leaf(locals)
	}
	sub := func() string { return g.expr(depth-1, locals) }
	switch b % 12 {
	case 0, 1:
		coll := sub()
		v := fmt.Sprintf("v%d", g.n)
		g.n++
		g.vars = append(g.vars, v)
		defer func() { g.vars = g.vars[:len(g.vars)-1] }()
		if b%12 == 1 {
			return fmt.Sprintf("[for %s in %s : %s if %s != \"\"]", v, coll, sub(), v)
		}
		return fmt.Sprintf("[for %s in %s : %s]", v, coll, sub())
	case 2:
		return fmt.Sprintf("join(\",\", %s)", sub())
	case 3:
		return fmt.Sprintf("\"${%s}${%s}\"", sub(), sub())
	case 4:
		return fmt.Sprintf("[%s, %s]", sub(), sub())
	case 5:
		return fmt.Sprintf("flatten(%s)", sub())
	case 6:
		return fmt.Sprintf("jsonencode(%s)", sub())
	case 7:
		return fmt.Sprintf("{ k = %s, j = %s }", sub(), sub())
	case 8:
		return fmt.Sprintf("format(\"%%s-%%s\", %s, %s)", sub(), sub())
	case 9:
		return fmt.Sprintf("concat(%s, %s)", sub(), sub())
	case 10:
		return fmt.Sprintf("tostring(%s)", sub())
	}
	return g.leaf(locals)
}

// fuzzBudget is small, so that an input that gets around it is caught by the bounds below.
var fuzzBudget = Budget{MaxValues: 5000, MaxBytes: 256 << 10, Timeout: time.Second}

// FuzzEvalBudget evaluates locals built from nested for expressions, joins and templates
// (budgetExprs) under fuzzBudget: whatever they ask for, evaluation must end within a few
// seconds and allocate a bounded amount, and either stay within the budget or report one
// «Evaluation budget exceeded» at an expression of the file.
func FuzzEvalBudget(f *testing.F) {
	// for over range(1000), three deep; joins of fors over range(1000), three deep; a
	// local that doubles the one before, 31 times; a tuple of fors and templates.
	f.Add([]byte{0, 11, 2, 250, 0, 11, 2, 250, 0, 11, 2, 250, 11, 0})
	f.Add([]byte{2, 0, 11, 2, 250, 2, 0, 11, 2, 250, 2, 0, 11, 2, 250, 10, 11, 0})
	doubling := []byte{11, 7}
	for i := 1; i < 32; i++ {
		doubling = append(doubling, 3, 11, byte(4*(i-1)+1), 11, byte(4*(i-1)+1))
	}
	f.Add(doubling)
	f.Add([]byte{4, 0, 11, 2, 250, 1, 11, 2, 250, 3, 11, 0, 11, 0, 5, 0, 11, 2, 100, 4, 11, 0, 11, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &budgetExprs{data: data}
		var src strings.Builder
		src.WriteString("locals {\n")
		for i := 0; i < 32 && len(g.data) > 0; i++ {
			fmt.Fprintf(&src, "  l%d = %s\n", i, g.expr(8, i))
		}
		src.WriteString("}\n")
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		cfg, diags := Load(dir, Options{Budget: fuzzBudget})
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if elapsed > 5*time.Second {
			t.Fatalf("evaluation took %v under a budget of %v:\n%s", elapsed, fuzzBudget.Timeout, src.String())
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
			t.Fatalf("evaluation allocated %d MiB under a budget of %d bytes:\n%s", alloc>>20, fuzzBudget.MaxBytes, src.String())
		}
		var refusals int
		for _, d := range diags {
			if d.Summary != budgetSummary {
				continue
			}
			refusals++
			if d.Severity != hcl.DiagError || d.Subject == nil || d.Subject.Filename != "main.hcl" {
				t.Fatalf("refusal %+v is not an error at an expression of main.hcl", d)
			}
		}
		if refusals > 1 {
			t.Fatalf("%d refusals, want at most one: %v", refusals, diags)
		}
		if u := cfg.EvalUsage; refusals == 0 && (u.Values > fuzzBudget.MaxValues || u.Bytes > fuzzBudget.MaxBytes) {
			t.Fatalf("evaluation used %+v of %+v and was not refused:\n%s", u, fuzzBudget, src.String())
		}
	})
}

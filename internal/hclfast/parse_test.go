package hclfast

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// same checks the contract: when Parse returns a body, hclsyntax.ParseConfig gives no
// diagnostic and a deeply equal body. It reports whether Parse accepted src. With nodes, it
// parses with them (Nodes.Parse).
func same(t testing.TB, src []byte, pos hcl.Pos, nodes ...*Nodes) bool {
	t.Helper()
	parse := Parse
	if len(nodes) > 0 {
		parse = nodes[0].Parse
	}
	got, ok := parse(src, "f.hcl", pos)
	if !ok {
		return false
	}
	want, diags := hclsyntax.ParseConfig(src, "f.hcl", pos)
	if len(diags) > 0 {
		t.Fatalf("accepted input that hclsyntax rejects (%v):\n%s", diags, src)
	}
	if !reflect.DeepEqual(got, want.Body) {
		t.Fatalf("tree differs from hclsyntax's for:\n%s\n(-hclfast +hclsyntax)\n%s", src,
			cmp.Diff(got, want.Body, cmp.Exporter(func(reflect.Type) bool { return true })))
	}
	return true
}

// gen writes random configuration: mostly the subset Parse knows, with some of everything
// it must decline, in varied layout.
type gen struct {
	r     *rand.Rand
	b     strings.Builder
	clean bool // only forms that parse without error; most of them inside the subset
}

func (g *gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }

// odd picks from xs, or returns usual in clean mode.
func (g *gen) odd(usual string, xs ...string) string {
	if g.clean {
		return usual
	}
	return g.pick(xs...)
}

func (g *gen) sp() {
	switch g.r.Intn(12) {
	case 0:
		g.b.WriteString("  ")
	case 1:
		g.b.WriteString("\t")
	case 2:
		g.b.WriteString(" /* c */ ")
	case 3:
		g.b.WriteString("")
	default:
		g.b.WriteString(" ")
	}
}

// gap is what may separate items inside brackets: spaces, line feeds, comments.
func (g *gen) gap() {
	switch g.r.Intn(10) {
	case 0:
		g.b.WriteString("\n  ")
	case 1:
		g.b.WriteString(g.pick(" # note\n", " # é — note\n", " // 日本\n"))
	case 2:
		g.b.WriteString(" // note\n ")
	default:
		g.sp()
	}
}

func (g *gen) ident() string {
	return g.pick("a", "b_1", "step", "seed", "x-y", "output", "for", "true", "null", "in", "_u", "run", "Z9")
}

func (g *gen) str() {
	g.b.WriteByte('"')
	n := g.r.Intn(4)
	for i := 0; i < n; i++ {
		switch g.r.Intn(14) {
		case 0:
			g.b.WriteString("${")
			g.expr(2, false)
			g.b.WriteString("}")
		case 1:
			g.b.WriteString(g.odd(`\n`, `\n`, `\t`, `\"`, `\\`, `\r`, `\u00e9`, `\x`))
			if g.r.Intn(3) == 0 { // non-ASCII right after an escape
				g.b.WriteString(g.pick("é", "\u0301", "\u200d", "日"))
			}
		case 2:
			g.b.WriteString(g.odd("$${", "$${", "%%{", "$", "%", "$$", "$$${", "%{ if a }x%{ endif }", "${~ a ~}", "$$$", "%%"))
		case 3:
			g.b.WriteString(g.pick("echo 1 > /out/o", "/out/o", "sh", "-c", "é", "{}", "a b", "'q'",
				"naïve — dash", "日本語", "e\u0301", "\u0301x", "👩\u200d💻", "🇫🇷", "\u0600x", "x\u0600", "\ufe0f", "ᄀ\u1161", "\u00a0"))
		default:
			g.b.WriteString(g.pick("a", "/in/x", "echo", " ", "1", "."))
		}
	}
	g.b.WriteByte('"')
}

func (g *gen) expr(depth int, nl bool) {
	if depth <= 0 {
		switch g.r.Intn(4) {
		case 0:
			g.b.WriteString(g.pick("1", "0.5", "12e3", "1.", "007", "3.14e-2", "true", "false", "null"))
		case 1:
			g.str()
		default:
			g.b.WriteString(g.ident())
		}
		return
	}
	switch g.r.Intn(16) {
	case 0, 1:
		g.expr(0, nl)
	case 2, 3:
		g.str()
	case 4, 5: // traversal
		g.b.WriteString(g.ident())
		for k := g.r.Intn(4); k > 0; k-- {
			switch g.r.Intn(8) {
			case 0:
				g.b.WriteString("[")
				g.expr(depth-1, false)
				g.b.WriteString("]")
			case 1:
				g.b.WriteString(g.odd("[\"k\"]", ".0", "[*]", ".*", "[\"k\"]", "[0]", "[true]", "[null]", "[\"\"]", "[\"${a}\"]", "[a]"))
			default:
				g.b.WriteString("." + g.ident())
			}
		}
	case 6: // call
		g.b.WriteString(g.odd("dir", "dir", "file", "f", "ns::f", "true"))
		g.b.WriteString("(")
		for k := g.r.Intn(4); k > 0; k-- {
			g.gap()
			g.expr(depth-1, false)
			if k > 1 || g.r.Intn(4) == 0 {
				g.b.WriteString(",")
			}
		}
		if !g.clean && g.r.Intn(12) == 0 {
			g.b.WriteString("...")
		}
		g.b.WriteString(")")
	case 7, 8: // tuple
		g.b.WriteString("[")
		if !g.clean && g.r.Intn(15) == 0 {
			g.b.WriteString("for x in a : x")
		}
		for k := g.r.Intn(4); k > 0; k-- {
			g.gap()
			g.expr(depth-1, false)
			if k > 1 || g.r.Intn(3) == 0 {
				g.b.WriteString(",")
			}
		}
		g.gap()
		g.b.WriteString("]")
	case 9, 10: // object
		g.b.WriteString("{")
		if !g.clean && g.r.Intn(15) == 0 {
			g.b.WriteString("for k, v in a : k => v")
		}
		multi := g.r.Intn(2) == 0
		for k := g.r.Intn(4); k > 0; k-- {
			if multi {
				g.b.WriteString(g.pick("\n", "\n\n", " # c\n", "\n  "))
			} else {
				g.sp()
			}
			switch g.r.Intn(4) {
			case 0:
				g.str()
			case 1:
				g.b.WriteString("(")
				g.expr(depth-1, false)
				g.b.WriteString(")")
			default:
				g.b.WriteString(g.ident())
			}
			g.sp()
			g.b.WriteString(g.odd("=", "=", "=", ":", "=>", "=="))
			g.sp()
			g.expr(depth-1, true)
			if !multi || g.r.Intn(3) == 0 {
				g.b.WriteString(g.pick(",", ",", ""))
			}
		}
		if multi {
			g.b.WriteString("\n")
		}
		g.b.WriteString("}")
	case 11:
		g.b.WriteString("(")
		g.expr(depth-1, false)
		g.b.WriteString(")")
	case 12: // outside the subset
		if g.clean {
			g.expr(0, nl)
			return
		}
		g.expr(depth-1, nl)
		g.b.WriteString(g.pick(" + 1", " == 2", " ? a : b", " && c", "<=1", " -1", "!"))
	case 13:
		if g.clean {
			g.expr(0, nl)
			return
		}
		g.b.WriteString(g.pick("-1", "!a", "<<EOT\nx\nEOT\n", "<<-EOT\n  x\n  EOT\n"))
	default:
		g.expr(0, nl)
	}
}

func (g *gen) body(depth int) {
	for k := g.r.Intn(5); k > 0; k-- {
		g.b.WriteString(g.pick("  ", "", "\t", "    "))
		if depth > 0 && g.r.Intn(3) == 0 {
			g.block(depth - 1)
			continue
		}
		g.b.WriteString(g.ident())
		g.sp()
		g.b.WriteString("=")
		g.sp()
		g.expr(3, true)
		g.b.WriteString(g.pick("\n", "\n", " # c\n", " // c\n", "\n\n", ",\n", " /* c */\n"))
	}
}

func (g *gen) block(depth int) {
	g.b.WriteString(g.pick("step", "seed", "layer", "limits", "b-1"))
	for k := g.r.Intn(3); k > 0; k-- {
		g.b.WriteString(" ")
		if g.r.Intn(4) == 0 {
			g.b.WriteString(g.ident())
		} else {
			g.b.WriteString(g.odd(`"s1"`, `"s1"`, `"a b"`, `"$${x}"`, `"${x}"`, `"\n"`, `""`, `"%%{"`, `"é"`, `"e\u0301"`))
		}
	}
	g.b.WriteString(" {")
	switch g.r.Intn(6) {
	case 0:
		g.b.WriteString(" " + g.ident() + " = ")
		g.expr(2, true)
		g.b.WriteString(g.odd(" }", " }", "}", " }\n", ", }"))
	case 1:
		g.b.WriteString("}")
	default:
		g.b.WriteString(g.pick("\n", " # c\n", "\n\n"))
		g.body(depth)
		g.b.WriteString("}")
	}
	g.b.WriteString(g.odd("\n", "\n", "\n", "\n\n", " # end\n", "", " x\n"))
}

func (g *gen) file() []byte {
	g.b.Reset()
	if g.r.Intn(8) == 0 {
		g.b.WriteString("# a comment\n\n")
	}
	for k := 1 + g.r.Intn(3); k > 0; k-- {
		if !g.clean && g.r.Intn(12) == 0 {
			g.b.WriteString("top = 1\n")
		}
		g.block(2)
	}
	if g.r.Intn(10) == 0 {
		g.b.WriteString(g.pick("  ", "# tail", "/* tail */", "\n\n", "# tail é", "/* é */"))
	}
	return []byte(g.b.String())
}

// mutate changes a byte or two, to reach syntax errors next to valid forms.
func mutate(r *rand.Rand, src []byte) []byte {
	out := append([]byte(nil), src...)
	for k := 1 + r.Intn(2); k > 0 && len(out) > 0; k-- {
		i := r.Intn(len(out))
		switch r.Intn(3) {
		case 0:
			out = append(out[:i], out[i+1:]...)
		case 1:
			const bytes = "{}[]()\"=,.:\n #$%\\/*-\r\x00"
			out[i] = bytes[r.Intn(len(bytes))]
		default:
			out = append(out[:i], append([]byte{out[r.Intn(len(out))]}, out[i:]...)...)
		}
	}
	return out
}

func TestSameTreeAsHCLSyntax(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	g := &gen{r: r}
	positions := []hcl.Pos{hcl.InitialPos, {Line: 40, Column: 1, Byte: 1234}, {Line: 3, Column: 7, Byte: 60}}
	n := 30000
	if testing.Short() {
		n = 3000
	}
	accepted, mutatedAccepted := 0, 0
	var shared Nodes // as a loader's worker shares them, across declined parses too
	for i := 0; i < n; i++ {
		g.clean = i%2 == 0
		src := g.file()
		pos := positions[i%len(positions)]
		if same(t, src, pos, &shared) {
			accepted++
		}
		if same(t, mutate(r, src), pos) {
			mutatedAccepted++
		}
	}
	// The generator is meant to exercise both sides: a change that made Parse decline
	// (almost) everything would otherwise pass here.
	t.Logf("accepted %d of %d generated, %d of %d mutated", accepted, n, mutatedAccepted, n)
	if accepted < n/10 || mutatedAccepted < n/50 {
		t.Fatalf("Parse accepted only %d generated and %d mutated inputs of %d each", accepted, mutatedAccepted, n)
	}
}

// TestAccepts lists forms that must take the fast path (they are what large projects are
// made of), and forms that must not.
func TestAccepts(t *testing.T) {
	for _, src := range []string{
		"step \"s1\" {\n  image   = seed.base\n  run     = [\"sh\", \"-c\", \"echo 1 > /out/o\"]\n  mounts  = { \"/in/0\" = step.s0.output[\"/out/o\"], \"/src\" = dir(\"src\") }\n  outputs = [\"/out/o\"]\n}\n",
		"seed \"base\" {\n  layer { files = { \"/bin/sh\" = host_file(\"/x/tool\") } }\n}\n",
		"# comment\nstep \"a\" {\n  // c\n  run = [\n    \"sh\", # why\n    \"-c\", /* inline */ \"echo $HOME $${X} 100%\",\n  ]\n  env = {\n    A = \"${var.x}/bin\"\n    \"B\": local.y\n  }\n  limits {\n    memory = \"64MiB\"\n    cpus = 1.5\n  }\n}\n",
		"product \"p\" {\n  deliver \"d\" {\n    from = step.x.output[\"/out/a\"]\n  }\n}",
		"step \"é\" { # naïve — dash\n  description = \"日本語, e\u0301, 👩\u200d💻 ${var.x}!\"\n  run = [\"echo\", \"🇫🇷\"] // done\n}\n",
		"locals {\n  xs = [1, 2, 3,]\n  o = {}\n  t = []\n  e = \"\"\n  f = f()\n  n = null\n  i = a[0][\"k\"].b\n  j = (a)\n}\n",
	} {
		if !same(t, []byte(src), hcl.InitialPos) {
			t.Errorf("declined:\n%s", src)
		}
	}
	for _, src := range []string{
		"top = 1\n",                 // a top-level attribute
		"a {\n  x = 1 + 2\n}\n",     // operators
		"a {\n  x = b ? 1 : 2\n}\n", // conditionals
		"a {\n  x = [for v in b : v]\n}\n",
		"a {\n  x = b[*].c\n}\n",
		"a {\n  x = <<EOT\nhi\nEOT\n}\n",
		"a {\n  x = \"%{ if b }c%{ endif }\"\n}\n",
		"a {\n  é = 1\n}\n", // non-ASCII outside strings and line comments
		"a {\n  x = 1 /* é */\n}\n",
		"a {\n  x = \"\\n\u0301\"\n}\n", // a cluster that may span an escape
		"a {\r\n  x = 1\r\n}\r\n",       // carriage returns
		"a {\n  x = 1\n  x = 2\n}\n",    // a duplicate attribute (an error)
		"a {\n  x = 1\n",                // unclosed
		"a {\n  x = \"\\u0041\"\n}\n",   // \u escapes
	} {
		if same(t, []byte(src), hcl.InitialPos) {
			t.Errorf("accepted:\n%s", src)
		}
	}
}

// TestExamples checks the project's own configuration files, which must also take the
// fast path wherever they stay inside the subset.
func TestExamples(t *testing.T) {
	names, _ := filepath.Glob("../../examples/*/*.hcl")
	more, _ := filepath.Glob("../../lang/testdata/*/*.hcl")
	names = append(names, more...)
	if len(names) == 0 {
		t.Fatal("no example configuration found")
	}
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// Whole files often hold a construct outside the subset somewhere; their blocks
		// one by one are what the loader hands over, so check every block-sized piece too.
		same(t, src, hcl.InitialPos)
		for _, piece := range strings.SplitAfter(string(src), "\n}\n") {
			same(t, []byte(piece), hcl.InitialPos)
		}
	}
}

func FuzzSameTreeAsHCLSyntax(f *testing.F) {
	names, _ := filepath.Glob("../../examples/*/*.hcl")
	for _, name := range names {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(src)
		}
	}
	g := &gen{r: rand.New(rand.NewSource(2))}
	for i := 0; i < 50; i++ {
		f.Add(g.file())
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		same(t, src, hcl.InitialPos)
	})
}

func ExampleParse() {
	src := []byte("step \"hello\" {\n  run = [\"echo\", \"hi\"]\n}\n")
	body, ok := Parse(src, "main.hcl", hcl.InitialPos)
	fmt.Println(ok, body.Blocks[0].Type, body.Blocks[0].Labels, body.Blocks[0].Body.Attributes["run"].SrcRange)
	// Output: true step [hello] main.hcl:2,3-23
}

// benchSource is a file of 100 steps like the plan benchmark's.
func benchSource() []byte {
	var b strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "step \"s%d\" {\n  image   = seed.base\n  run     = [\"sh\", \"-c\", \"echo %d > /out/o\"]\n  mounts  = { \"/in/1\" = step.s1.output[\"/out/o\"], \"/in/2\" = step.s2.output[\"/out/o\"], \"/src\" = dir(\"src\") }\n  outputs = [\"/out/o\"]\n}\n", i, i)
	}
	return []byte(b.String())
}

// BenchmarkParse and BenchmarkHCLSyntax parse the same file; compare them with
// go test -bench . -benchmem ./internal/hclfast.
func BenchmarkParse(b *testing.B) {
	src := benchSource()
	b.SetBytes(int64(len(src)))
	for i := 0; i < b.N; i++ {
		if _, ok := Parse(src, "f.hcl", hcl.InitialPos); !ok {
			b.Fatal("declined")
		}
	}
}

func BenchmarkHCLSyntax(b *testing.B) {
	src := benchSource()
	b.SetBytes(int64(len(src)))
	for i := 0; i < b.N; i++ {
		if _, diags := hclsyntax.ParseConfig(src, "f.hcl", hcl.InitialPos); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

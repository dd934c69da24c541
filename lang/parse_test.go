package lang

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// syntaxTree writes every node of a parsed file with its type and source range, and the
// diagnostics, so that two parses can be compared exactly.
func syntaxTree(f *hcl.File, diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "diag %v %q %q %v\n", d.Severity, d.Summary, d.Detail, d.Subject)
	}
	if f == nil {
		return b.String() + "no file\n"
	}
	body := f.Body.(*hclsyntax.Body)
	fmt.Fprintf(&b, "file %v end %v bytes %d\n", body.SrcRange, body.EndRange, len(f.Bytes))
	writeBody(&b, body)
	return b.String()
}

func writeBody(b *strings.Builder, body *hclsyntax.Body) {
	fmt.Fprintf(b, "body %v end %v\n", body.SrcRange, body.EndRange)
	names := make([]string, 0, len(body.Attributes))
	for n := range body.Attributes {
		names = append(names, n)
	}
	sort.Strings(names) // attributes are a map: visit them in a stable order
	for _, n := range names {
		a := body.Attributes[n]
		fmt.Fprintf(b, "attribute %s %v %v %v\n", a.Name, a.SrcRange, a.NameRange, a.EqualsRange)
		hclsyntax.VisitAll(a.Expr, func(n hclsyntax.Node) hcl.Diagnostics {
			fmt.Fprintf(b, "  %T %v", n, n.Range())
			if l, ok := n.(*hclsyntax.LiteralValueExpr); ok {
				fmt.Fprintf(b, " %#v", l.Val)
			}
			b.WriteByte('\n')
			return nil
		})
	}
	for _, bl := range body.Blocks {
		fmt.Fprintf(b, "block %s %q %v %v %v %v\n", bl.Type, bl.Labels, bl.TypeRange, bl.LabelRanges, bl.OpenBraceRange, bl.CloseBraceRange)
		writeBody(b, bl.Body)
	}
}

// parseInPieces is what parseFiles does to one file, in order: cut, parse each piece, join.
func parseInPieces(src []byte, filename string, least int) (*hcl.File, hcl.Diagnostics) {
	b := newBudget(Budget{})
	ps := cutPieces(src, least)
	for i := range ps {
		ps[i].parse(filename, b)
	}
	return joinPieces(src, filename, ps, b)
}

// parseWhole is hclsyntax.ParseConfig of the whole file, rewritten for a budget as a
// piece is.
func parseWhole(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if len(diags) == 0 && f != nil {
		newBudget(Budget{}).rewriteBody(f.Body.(*hclsyntax.Body), "")
	}
	return f, diags
}

// checkSameParse fails when parsing src in pieces differs in any node, range or diagnostic
// from parsing it whole, and returns the number of pieces tried.
func checkSameParse(t *testing.T, src []byte, minPiece int) int {
	t.Helper()
	whole := syntaxTree(parseWhole(src, "main.hcl"))
	pieced := syntaxTree(parseInPieces(src, "main.hcl", minPiece))
	if whole != pieced {
		w, p := strings.Split(whole, "\n"), strings.Split(pieced, "\n")
		for i := range min(len(w), len(p)) {
			if w[i] != p[i] {
				t.Fatalf("parsing %q in pieces of %d differs at line %d:\nwhole:     %s\nin pieces: %s", src, minPiece, i+1, w[i], p[i])
			}
		}
		t.Fatalf("parsing %q in pieces of %d: %d lines whole, %d in pieces", src, minPiece, len(w), len(p))
	}
	return len(cutPieces(src, minPiece))
}

func TestParseInPiecesMatchesWhole(t *testing.T) {
	step := func(name string) string {
		return fmt.Sprintf("step %q {\n  image = seed.base\n  run   = [\"sh\", \"-c\", \"echo ${var.x} > /out/o\"]\n  limits {\n    memory = \"64MiB\"\n  }\n}\n", name)
	}
	cases := map[string]string{
		"blocks":           step("a") + "\n# a comment\n" + step("b") + step("c"),
		"crlf":             strings.ReplaceAll(step("a")+step("b"), "\n", "\r\n"),
		"bom":              "\ufeff" + step("a") + step("b"),
		"no final newline": step("a") + strings.TrimSuffix(step("b"), "\n"),
		// A "}" line inside a heredoc, a comment, or a nested block is no boundary: the piece
		// before it does not parse, and the whole file is parsed instead.
		"heredoc":  "locals {\n  x = <<EOT\n}\nstep \"evil\" {\n  run = [\"x\"]\n}\nEOT\n}\n" + step("a"),
		"comment":  "/*\n}\nstep \"evil\" {\n}\n*/\n" + step("a"),
		"nested":   "recipe \"r\" {\n  step \"s\" {\n    run = [\"a\"]\n}\nstep \"t\" {\n  }\n}\n" + step("a"),
		"brackets": "locals {\n  x = [\n}\n]\n}\n" + step("a"),
		"template": "locals {\n  x = \"${\n}\n\"\n}\n" + step("a"),
		// Top-level attributes and errors in a later piece: reported as by hclsyntax.
		"attribute":       step("a") + "x = 1\n" + step("b"),
		"duplicate attrs": "x = 1\n}\nx = 2\n",
		"error later":     step("a") + "step \"b\" {\n  run = [\n}\n",
		"stray brace":     step("a") + "}\n" + step("b"),
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			for _, min := range []int{1, 64, 512} {
				checkSameParse(t, []byte(src), min)
			}
		})
	}
	// The split happens where it should, or the test above proves nothing.
	if n := checkSameParse(t, []byte(cases["blocks"]), 1); n != 3 {
		t.Fatalf("blocks: %d pieces, want 3", n)
	}
}

// The examples are real configurations: parsing them in pieces must change nothing.
func TestParseExamplesInPieces(t *testing.T) {
	files, _ := filepath.Glob("../examples/*/*.hcl")
	if len(files) == 0 {
		t.Fatal("no example configurations found")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkSameParse(t, src, 1)
	}
}

func FuzzParseInPieces(f *testing.F) {
	f.Add([]byte("step \"a\" {\n}\nstep \"b\" {\n  x = <<EOT\n}\nEOT\n}\n"))
	f.Add([]byte("/*\n}\n*/\nx = 1\n}\ny {\n}\n"))
	f.Add([]byte("a {\r\n}\r\nb \"c\" {\r\n  d = \"${e}\"\r\n}\r\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		checkSameParse(t, src, 1)
	})
}

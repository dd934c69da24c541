package lang

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// randomProject writes a project whose step expressions mix the forms configuration is
// mostly made of (literals, templates, references, calls, tuples, objects) with bad
// references, wrong types, nulls, unknown functions, operators, conditionals and for
// expressions. With clean set it writes only valid forms.
func randomProject(t *testing.T, r *rand.Rand, clean bool, steps int) string {
	pick := func(xs ...string) string { return xs[r.Intn(len(xs))] }
	expr := func(kind string) string {
		if clean {
			switch kind {
			case "string":
				return pick(`"plain"`, `"${var.name}-x"`, `"${local.n}"`, `"${var.num}"`, `"${true}"`, `upper("x")`, `"a${"b"}c"`, `"x" == "y" ? "a" : "b"`,
					"\"cafe\u0301\"") // decomposed: cty normalizes it to NFC
			case "list":
				return pick(`["sh", "-c", "echo 1 > /out/o"]`, `["sh", "-c", "echo ${var.name} > /out/o"]`, `local.l`, `concat(["a"], ["b"])`,
					`[upper("a"), format("%d", 2)]`, `[for x in local.l : x]`, `["x", 1, true]`)
			case "map":
				return pick(`{ A = "1", "B" = "2" }`, `{ (var.name) = "k" }`, `{}`, `local.m`, `{ "${var.name}" = "v" }`, `merge({ A = "1" }, { B = "2" })`, `{ A = 1 }`)
			case "mounts":
				return pick(`{ "/src" = dir("src") }`, `{ "/f" = file("src/a.txt") }`, `{ "/t" = "inline text" }`,
					`{ "/in/a" = step.s0.output["/out/o"], "/src" = dir("src") }`, `{ "/in/a" = step.s0.output[local.key] }`)
			}
		}
		switch kind {
		case "string":
			return pick(`"plain"`, `"${var.name}-x"`, `"${local.n}"`, `"${var.num}"`, `"${true}"`, `"${local.nothing}"`,
				`upper("x")`, `"a${"b"}c"`, `"${local.m}"`, `1`, `["a"]`, `var.name`, `"x" == "y" ? "a" : "b"`, `"${nope.x}"`, `"/"`, `"/w"`)
		case "list":
			return pick(`["sh", "-c", "echo 1 > /out/o"]`, `["sh", "-c", "echo ${var.name} > /out/o"]`, `[]`, `["x", 1, true]`,
				`local.l`, `"sh"`, `[for x in local.l : x]`, `["a", local.nothing]`, `concat(["a"], ["b"])`, `[upper("a"), format("%d", 2)]`, `[step.s0]`)
		case "map":
			return pick(`{ A = "1", "B" = "2" }`, `{ A = 1 }`, `{ (var.name) = "k" }`, `{ A = "1", A = "2" }`, `{}`, `local.m`, `{ a.b = "x" }`,
				`{ "${var.name}" = "v" }`, `{ A = local.nothing }`, `{ true = "t" }`, `"x"`, `merge({ A = "1" }, { B = "2" })`)
		case "mounts":
			return pick(`{ "/in/a" = step.s0.output["/out/o"] }`, `{ "/in/a" = step.s0.output["/out/nope"] }`, `{ "/in/a" = step.sX.output["/out/o"] }`,
				`{ "/src" = dir("src") }`, `{ "/src" = dir("missing") }`, `{ "/f" = file("src/a.txt") }`, `{ "/in" = step.s0.output }`,
				`{ "/in/a" = step.s0.output["/out/o"], "/src" = dir("src"), "/t" = "inline text" }`, `{ "/x" = seed.base }`,
				`{ "out" = step.s0.output["/out/o"] }`, `{ "/in/a" = step.s0.outputs["/out/o"] }`, `{ "/in/a" = step.s0.output[local.key] }`,
				`{ "/s" = step.s1.output["/out/o"] }`, `{ "/n" = 5 }`, `{ "/c" = capability.none }`)
		}
		return `"?"`
	}
	dir := writeProject(t, map[string]string{
		"src/a.txt": "a\n",
		"main.hcl": `
variable "name" {
  default = "n"
}
variable "num" {
  type    = number
  default = 3
}
locals {
  n       = 7
  l       = ["sh", "-c", "true"]
  m       = { K = "v" }
  key     = "/out/o"
  nothing = null
}
seed "base" {
  layer { files = { "/bin/sh" = file("src/a.txt") } }
}
`,
	})
	var b strings.Builder
	for i := 0; i < steps; i++ {
		fmt.Fprintf(&b, "step \"s%d\" {\n  image = %s\n  run = %s\n", i, map[bool]string{true: "seed.base", false: pick("seed.base", "seed.base", "seed.nope", `"x"`)}[clean], expr("list"))
		for _, a := range []string{"description", "workdir", "user", "platform"} {
			if r.Intn(3) == 0 && (!clean || a == "description") {
				fmt.Fprintf(&b, "  %s = %s\n", a, expr("string"))
			}
		}
		if r.Intn(2) == 0 {
			fmt.Fprintf(&b, "  env = %s\n", expr("map"))
		}
		if m := expr("mounts"); r.Intn(3) > 0 && !(clean && i == 0 && strings.Contains(m, "step.s0")) {
			fmt.Fprintf(&b, "  mounts = %s\n", m)
		}
		if !clean && r.Intn(4) == 0 {
			b.WriteString(pick("  imagee = seed.base\n", "  limits \"x\" {\n  }\n", "  limit {\n  }\n", "  limits {\n    memory = \"1GiB\"\n  }\n", "  mounts {\n  }\n"))
		}
		if clean && r.Intn(4) == 0 {
			b.WriteString("  limits {\n    memory = \"64MiB\"\n  }\n")
		}
		outputs := pick(`["/out/o"]`, `["/out/o"]`, `["/out/o", "/out/p"]`, `[]`, `["/out/${var.name}"]`, `local.l`,
			`["out/x"]`, `["/out/o", "/out/o"]`, `[step.s0.output["/out/o"]]`, `[file("nope.txt")]`)
		if clean {
			outputs = pick(`["/out/o"]`, `["/out/o", "/out/p"]`, `["/out/o", "/out/${var.name}"]`)
		}
		fmt.Fprintf(&b, "  outputs = %s\n}\n", outputs)
	}
	if err := os.WriteFile(filepath.Join(dir, "steps.hcl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func renderDiags(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "%v %q %q %v %v\n", d.Severity, d.Summary, d.Detail, d.Subject, d.Context)
	}
	return b.String()
}

// TestParallelDecodeSameAsSequential loads projects large enough to be decoded on several
// workers, and requires what decoding them one by one gives: configuration, input records
// and diagnostics in the same order.
func TestParallelDecodeSameAsSequential(t *testing.T) {
	defer func() { parallelDecode = true }()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // two workers even on one processor
	r := rand.New(rand.NewSource(3))
	for i, clean := range []bool{true, false, true, false} {
		dir := randomProject(t, r, clean, 4*parallelDecodeMin+i)
		parallelDecode = false
		want, wantDiags := Load(dir, Options{})
		parallelDecode = true
		got, gotDiags := Load(dir, Options{})
		if g, w := renderDiags(gotDiags), renderDiags(wantDiags); g != w {
			t.Fatalf("diagnostics differ: parallel\n%s\nsequential:\n%s", g, w)
		}
		if clean == wantDiags.HasErrors() {
			t.Fatalf("project %d: clean=%v but diagnostics: %v", i, clean, wantDiags)
		}
		// What evaluation took of its budget differs: each worker reads a file once.
		got.EvalUsage, want.EvalUsage = Usage{}, Usage{}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("configuration of project %d differs", i)
		}
	}
}

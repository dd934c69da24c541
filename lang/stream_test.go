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
)

// loadBothWays loads dir classically and with streaming, requires the same configuration and
// diagnostics, and reports whether the stream itself succeeded (rather than falling back),
// whether it decoded any step the classic way, and whether the project is valid.
func loadBothWays(t *testing.T, dir string) (streamed, deferred, clean bool) {
	t.Helper()
	defer func() { streamLoad = true }()
	streamLoad = false
	want, wantDiags := Load(dir, Options{})
	streamLoad = true
	got, gotDiags := Load(dir, Options{})
	if g, w := renderDiags(gotDiags), renderDiags(wantDiags); g != w {
		t.Fatalf("diagnostics differ in %s: streamed\n%s\nclassic:\n%s", dir, g, w)
	}
	if !reflect.DeepEqual(got, want) {
		for name, s := range want.Steps {
			if !reflect.DeepEqual(got.Steps[name], s) {
				t.Errorf("step %s: streamed %+v\nclassic %+v", name, got.Steps[name], s)
			}
		}
		t.Fatalf("configuration of %s differs between streamed and classic loads", dir)
	}
	// Whether the stream went through, asked of it directly.
	in, err := newInputs(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := newLoader(in)
	files := l.readFiles()
	streamed = l.stream(files, Options{})
	if streamed && len(l.diags) > 0 {
		t.Fatalf("a stream that succeeded reported %v", l.diags)
	}
	return streamed, streamed && l.deferred > 0, !wantDiags.HasErrors()
}

// TestStreamedLoadSameAsClassic loads random projects, valid and not, small and large enough
// for several chunks on several workers, both ways. Every valid one must stream, some with
// steps it decodes the classic way; the others must fall back and give exactly the classic
// diagnostics.
func TestStreamedLoadSameAsClassic(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // two workers even on one processor
	r := rand.New(rand.NewSource(5))
	n := 120
	if testing.Short() {
		n = 30
	}
	var streamed, deferred, clean, large int
	for i := 0; i < n; i++ {
		steps := 6
		if i%10 == 0 {
			steps = 4*streamChunk + i
		}
		s, d, c := loadBothWays(t, randomProject(t, r, i%2 == 0, steps))
		if s != c {
			t.Fatalf("project %d: streamed %v, valid %v", i, s, c)
		}
		streamed, deferred, clean = streamed+btoi(s), deferred+btoi(d), clean+btoi(c)
		large += btoi(s && steps > 6)
	}
	t.Logf("%d of %d projects valid and streamed, %d of them with steps decoded the classic way, %d large", streamed, n, deferred, large)
	if streamed == 0 || streamed == n || deferred == 0 || deferred == streamed || large == 0 {
		t.Fatal("the generator no longer covers every path")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// manySteps returns n steps s0... that each mount the output of the one before, and the
// first one's mounts given.
func manySteps(n int, first string) string { return namedSteps("s", n, first) }

// namedSteps is manySteps with another prefix of names than "s".
func namedSteps(prefix string, n int, first string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		mounts := first
		if i > 0 {
			mounts = fmt.Sprintf(`{ "/in" = step.%s%d.output["/out/o"] }`, prefix, i-1)
		}
		fmt.Fprintf(&b, "step \"%s%d\" {\n  image   = seed.base\n  run     = [\"sh\", \"-c\", \"echo %d > /out/o\"]\n  mounts  = %s\n  outputs = [\"/out/o\"]\n}\n", prefix, i, i, mounts)
	}
	return b.String()
}

const streamMain = `
locals {
  key = "/out/o"
}
seed "base" {
  layer { files = { "/bin/sh" = file("sh") } }
}
`

// Each way a streamed load must give up, and one where it must not, loaded both ways.
func TestStreamedLoadFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		stream bool // the stream goes through
		errors bool // the project has errors
	}{
		{"valid", map[string]string{"steps.hcl": manySteps(200, "{}")}, true, false},
		{"a step among other blocks refers to streamed steps and is referred to by them",
			map[string]string{"steps.hcl": manySteps(200, `{ "/in" = step.early.output["/out/e"] }`),
				"a.hcl": `locals {
  extra = 1
}
step "early" {
  image   = seed.base
  run     = ["true"]
  mounts  = { "/in" = step.s150.output["/out/o"] }
  outputs = ["/out/e"]
}
`}, true, false},
		{"a reference to an undeclared output of a later step",
			map[string]string{"steps.hcl": manySteps(200, `{ "/in" = step.s199.output["/out/nope"] }`)}, false, true},
		{"a reference to an undeclared step",
			map[string]string{"steps.hcl": manySteps(200, `{ "/in" = step.nope.output["/out/o"] }`)}, false, true},
		{"a reference the stream cannot evaluate, to a later step",
			map[string]string{"steps.hcl": manySteps(200, `{ "/in" = step.s199.output[local.key] }`)}, true, false},
		{"a whole output map",
			map[string]string{"steps.hcl": manySteps(200, `{ for k, v in step.s199.output : "/in${k}" => v }`)}, true, false},
		{"a held step with an error",
			map[string]string{"steps.hcl": manySteps(200, `{ "/in" = step.s199.output[local.nope] }`)}, false, true},
		{"a held step referring to an undeclared step",
			map[string]string{"steps.hcl": manySteps(200, `{ "/in" = step.s199.output[local.key], "/x" = step.nope.output }`)}, false, true},
		{"a held step declared twice",
			map[string]string{"steps.hcl": manySteps(200, `{ "/in" = step.s199.output[local.key] }`), "z.hcl": manySteps(1, `{ "/in" = step.s2.output }`)}, false, true},
		{"a held step with the name of a streamed one",
			map[string]string{"steps.hcl": manySteps(200, "{}"), "z.hcl": "step \"s5\" {\n  image   = seed.base\n  run     = [\"true\"]\n  mounts  = { \"/in\" = step.s2.output[local.key] }\n}\n"}, false, true},
		{"a streamed step with the name of a held one before it",
			map[string]string{"steps.hcl": manySteps(200, "{}"), "a.hcl": "step \"s5\" {\n  image   = seed.base\n  run     = [\"true\"]\n  mounts  = { \"/in\" = step.s2.output[local.key] }\n}\n"}, false, true},
		{"a step whose name is not an identifier",
			map[string]string{"steps.hcl": manySteps(200, "{}") + "step \"a.b\" {\n  image = seed.base\n  run   = [\"true\"]\n}\n"}, false, true},
		{"the same step twice in different files",
			map[string]string{"steps.hcl": manySteps(200, "{}"), "z.hcl": manySteps(1, "{}")}, false, true},
		{"the same step among other blocks, then streamed",
			map[string]string{"steps.hcl": manySteps(200, "{}"), "a.hcl": "locals {\n  extra = 1\n}\n" + manySteps(1, "{}")}, false, true},
		{"the same step streamed, then among other blocks",
			map[string]string{"steps.hcl": manySteps(200, "{}"), "z.hcl": "locals {\n  extra = 1\n}\n" + manySteps(1, "{}")}, false, true},
		{"a block other than a step among steps, indented so that the text looks like steps only",
			map[string]string{"steps.hcl": manySteps(100, "{}") + "  locals {\n    more = 2\n  }\n" + namedSteps("t", 200, "{}")}, false, false},
		{"a heredoc with a line of a lone brace, far enough into it to be cut there",
			map[string]string{"steps.hcl": manySteps(100, "{}") + "step \"h\" {\n  image = seed.base\n  run = [\"sh\", \"-c\", <<EOT\necho {\n" +
				strings.Repeat("echo\n", 2*minPiece/5) + "}\nEOT\n  ]\n}\n" + namedSteps("t", 100, "{}")}, false, false},
		{"a step with an error far from the others",
			map[string]string{"steps.hcl": manySteps(200, "{}") + "step \"bad\" {\n  image = seed.nope\n  run = [\"true\"]\n}\n"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.files["main.hcl"] = streamMain
			tc.files["sh"] = "#!/bin/sh\n"
			streamed, _, clean := loadBothWays(t, writeProject(t, tc.files))
			if streamed != tc.stream || clean == tc.errors {
				t.Fatalf("streamed %v, valid %v; want streamed %v, valid %v", streamed, clean, tc.stream, !tc.errors)
			}
		})
	}
}

// The guess of which pieces hold only steps.
func TestStepsOnly(t *testing.T) {
	for src, want := range map[string]bool{
		"step \"a\" {\n  run = [\"x\"]\n}\n":              true,
		"step\"a\"{\n}\n# note\n// note\n\nstep \"b\" {}": true,
		"":                                   true,
		"locals {\n}\n":                      false,
		"step \"a\" {\n}\nseed \"b\" {\n}\n": false,
		"steps \"a\" {\n}\n":                 false,
		"ste":                                false,
		"step \"a\" {\nrun = [\"x\"]\n}\n":   false, // an attribute at the margin: parsed first, still correct
	} {
		if got := stepsOnly([]byte(src)); got != want {
			t.Errorf("stepsOnly(%q) = %v, want %v", src, got, want)
		}
	}
}

// The configuration a stream gives keeps the project's files for rendering diagnostics.
func TestStreamedLoadKeepsFiles(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.hcl": streamMain, "sh": "x", "steps.hcl": manySteps(50, "{}")})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, name := range []string{"main.hcl", "steps.hcl"} {
		src, _ := os.ReadFile(filepath.Join(dir, name))
		if f := cfg.Files[name]; f == nil || string(f.Bytes) != string(src) {
			t.Errorf("Files[%q] is not the file's text", name)
		}
	}
}

// FuzzStreamedSameAsClassic loads arbitrary step files beside a fixed main.hcl both ways: a
// streamed load must give exactly what the classic load gives, whatever the input.
func FuzzStreamedSameAsClassic(f *testing.F) {
	for _, s := range []string{
		manySteps(3, "{}"),
		manySteps(40, `{ "/in" = step.s39.output["/out/o"] }`),
		manySteps(20, `{ "/in" = step.s9.output[local.key] }`),
		manySteps(20, "{}") + "locals {\n  x = 1\n}\n" + namedSteps("t", 20, "{}"),
		manySteps(20, "{}") + manySteps(1, "{}"),
		"step \"h\" {\n  image = seed.base\n  run = [\"sh\", \"-c\", <<EOT\n}\nEOT\n  ]\n}\n" + manySteps(20, "{}"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		loadBothWays(t, writeProject(t, map[string]string{"main.hcl": streamMain, "sh": "#!/bin/sh\n", "steps.hcl": string(src)}))
	})
}

// A step among other blocks is decoded in the stream too, not held until every step is
// known: a main.hcl with seeds and a few steps is the common case, and holding any step
// made the load build a scope of every step.
func TestStreamedLoadDecodesStepsAmongOtherBlocks(t *testing.T) {
	dir := writeProject(t, map[string]string{"sh": "#!/bin/sh\n",
		"main.hcl":  streamMain + "step \"early\" {\n  image   = seed.base\n  run     = [\"true\"]\n  mounts  = { \"/in\" = step.s150.output[\"/out/o\"] }\n  outputs = [\"/out/e\"]\n}\n",
		"steps.hcl": manySteps(200, `{ "/in" = step.early.output["/out/e"] }`)})
	streamed, deferred, clean := loadBothWays(t, dir)
	if !streamed || deferred || !clean {
		t.Fatalf("streamed %v, some steps decoded the classic way %v, valid %v; want streamed, none, valid", streamed, deferred, clean)
	}
}

// EachStep gives a loaded configuration's top-level steps in declaration order, streamed or
// not, a held step in its place.
func TestEachStepInDeclarationOrder(t *testing.T) {
	step := func(name, mounts string) string {
		return fmt.Sprintf("step %q {\n  image   = seed.base\n  run     = [\"true\"]\n  mounts  = %s\n  outputs = [\"/out/o\"]\n}\n", name, mounts)
	}
	files := map[string]string{"sh": "#!/bin/sh\n",
		"main.hcl": streamMain + step("m", "{}"),
		"a.hcl":    step("zz", "{}") + step("held", `{ "/in" = step.zz.output[local.key] }`) + step("aa", "{}"),
		"b.hcl":    namedSteps("t", 150, "{}")}
	want := []string{"zz", "held", "aa"}
	for i := 0; i < 150; i++ {
		want = append(want, fmt.Sprintf("t%d", i))
	}
	want = append(want, "m")
	dir := writeProject(t, files)
	streamed, deferred, clean := loadBothWays(t, dir)
	if !streamed || !deferred || !clean {
		t.Fatalf("streamed %v, held %v, valid %v; want all three", streamed, deferred, clean)
	}
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	cfg.EachStep(func(s *Step) { got = append(got, s.Name) })
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("EachStep order:\n got %v\nwant %v", got, want)
	}
}

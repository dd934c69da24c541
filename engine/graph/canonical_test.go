package graph

import (
	"bytes"
	"math"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
)

// pieces from which random strings are built: JSON's escapes, characters encoding/json
// escapes but RFC 8785 does not, and the characters where UTF-8 and UTF-16 order disagree.
var pieces = []string{"", "a", "Z", "/out/o", "\"", "\\", "\b", "\t", "\n", "\f", "\r", "\x00", "\x1f", "\x7f",
	"<", ">", "&", "\u2028", "\u2029", "é", "\ue000", "\uffff", "\U0001f600", "\U00010000", " ", "sha256:ab"}

func randString(r *rand.Rand) string {
	var b strings.Builder
	for n := r.Intn(4); n > 0; n-- {
		b.WriteString(pieces[r.Intn(len(pieces))])
	}
	return b.String()
}

func randRef(r *rand.Rand) inputRef {
	ref := inputRef{Kind: randString(r)}
	if r.Intn(2) == 0 {
		ref.Digest = digest.Digest(randString(r))
	}
	if r.Intn(2) == 0 {
		ref.From = digest.Digest(randString(r))
	}
	if r.Intn(2) == 0 {
		ref.Path = randString(r)
	}
	ref.Dir = r.Intn(2) == 0
	if r.Intn(2) == 0 {
		ref.Mode = r.Uint32()
	}
	return ref
}

var bigInts = []int64{0, 1, -1, 1 << 53, 1<<53 + 1, 1<<63 - 1, -1 << 63, 2 << 30, 1e15, 123456789012345678}

func randStep(r *rand.Rand) StepDefinition {
	d := StepDefinition{Kind: randString(r), V: r.Intn(5), Image: randRef(r), Workdir: randString(r),
		User: randString(r), Platform: randString(r), Network: randString(r),
		Limits: LimitsDefinition{MemoryBytes: bigInts[r.Intn(len(bigInts))], CPUs: randString(r),
			Pids: r.Int63(), TimeMillis: bigInts[r.Intn(len(bigInts))], OutputBytes: r.Int63n(1 << 40)}}
	if r.Intn(4) > 0 {
		d.Argv = []string{}
		for n := r.Intn(4); n > 0; n-- {
			d.Argv = append(d.Argv, randString(r))
		}
	}
	if r.Intn(4) > 0 {
		d.Outputs = []string{}
		for n := r.Intn(3); n > 0; n-- {
			d.Outputs = append(d.Outputs, randString(r))
		}
	}
	if r.Intn(4) > 0 {
		d.Env = map[string]string{}
		for n := r.Intn(5); n > 0; n-- {
			d.Env[randString(r)] = randString(r)
		}
	}
	if r.Intn(4) > 0 {
		m := map[string]inputRef{}
		for n := r.Intn(5); n > 0; n-- {
			m[randString(r)] = randRef(r)
		}
		d.Inputs = inputListOf(m)
	}
	return d
}

// The hand-written step encoding must be byte-for-byte what the generic canonicalizer gives,
// or every step digest would silently change meaning.
func TestStepCanonicalMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 20000; i++ {
		d := randStep(r)
		want, werr := digest.Canonical(d)
		got, gerr := d.canonical()
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("errors differ for %#v: generic %v, direct %v", d, werr, gerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encodings differ for %#v:\ngeneric %s\ndirect  %s", d, want, got)
		}
	}
	bad := StepDefinition{Argv: []string{"ok", "\xff"}}
	if _, err := bad.canonical(); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
}

func FuzzStepCanonical(f *testing.F) {
	f.Add("sh", "/out/o", "PATH", "/bin", int64(1<<53+1))
	f.Add("\"\\\x01", "\ue000", "\U0001f600", "\xff", int64(-1))
	f.Fuzz(func(t *testing.T, a, b, c, d string, n int64) {
		def := StepDefinition{Kind: "step", Argv: []string{a, b}, Env: map[string]string{c: d, d: a},
			Inputs:  inputListOf(map[string]inputRef{b: {Kind: c, Path: d, Mode: uint32(n)}, c: {Kind: a, Digest: digest.Digest(b)}}),
			Outputs: []string{d}, Workdir: c, Limits: LimitsDefinition{MemoryBytes: n, CPUs: a}}
		want, werr := digest.Canonical(def)
		got, gerr := def.canonical()
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("generic %s (%v)\ndirect  %s (%v)", want, werr, got, gerr)
		}
	})
}

// cpusText writes whole numbers without formatting a float: it must agree with FormatFloat.
func TestCPUsTextIsFormatFloat(t *testing.T) {
	for _, x := range []float64{0, math.Copysign(0, -1), 0.5, 1, 2, 3.25, 64, 1e15, 1 << 53, 1<<53 + 2, -1, -2.5, math.Inf(1), math.NaN(), math.SmallestNonzeroFloat64} {
		if got, want := cpusText(x), strconv.FormatFloat(x, 'f', -1, 64); got != want {
			t.Errorf("cpusText(%v) = %q, want %q", x, got, want)
		}
	}
}

// inputListOf is m as an input list.
func inputListOf(m map[string]inputRef) inputList {
	if m == nil {
		return nil
	}
	out := make(inputList, 0, len(m))
	for _, k := range digest.SortKeys(m) {
		out = append(out, pathRef{k, m[k]})
	}
	return out
}

// Compile writes a step's definition before the nodes it reads from are digested, and then
// copies their digests in (stepTemplate, fillTemplate). Every step's definition must be
// the generic encoding of stepDefinition, which looks each producer up by address: for
// every kind of input, keys that UTF-16 and UTF-8 sort differently, and checks in recipes.
func TestStepTemplatesMatchGeneric(t *testing.T) {
	dirs := []string{graphtest.InputKindsProject(t), filepath.Join("..", "..", "examples", "greeter")}
	for _, d := range dirs {
		g, diags := Compile(graphtest.LoadConfig(t, d))
		if diags.HasErrors() {
			t.Fatalf("%s: %s", d, diags.Error())
		}
		steps := 0
		for _, n := range g.Nodes {
			if n.Kind != KindStep && n.Kind != KindCheck {
				continue
			}
			steps++
			want, err := digest.Canonical(g.stepDefinition(n))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(n.Definition, want) || n.Digest != digest.FromBytes(want) {
				t.Errorf("%s: %s\nwritten %s\ngeneric %s", d, n.Address, n.Definition, want)
			}
		}
		if steps == 0 {
			t.Fatalf("%s has no steps", d)
		}
	}
}

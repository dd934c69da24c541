// Package graphtest writes and loads the projects the tests of engine/graph and engine/plan
// compile: random DAGs of steps, large sparse graphs, and a project with every kind of input.
// It imports no package of the engine, so that those packages' own tests can use it.
package graphtest

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/lang"
)

// Project describes a random DAG of steps on one seed; Blocks writes it as HCL.
type Project struct {
	Steps []Step
	Srcs  int // project directories src0..srcN-1
}

// Step is one step of a Project.
type Step struct {
	Argv   string
	Env    string
	Memory string
	Deps   []int // earlier steps whose output this step mounts
	Src    int   // -1 or a src directory it mounts
}

// RandomProject is a Project of n steps, each mounting the output of earlier ones at random.
func RandomProject(r *rand.Rand, n int) *Project {
	p := &Project{Srcs: 3}
	for i := 0; i < n; i++ {
		s := Step{Argv: fmt.Sprintf("echo %d", i), Env: "a", Memory: "64MiB", Src: -1}
		for j := 0; j < i; j++ {
			if r.Intn(4) == 0 {
				s.Deps = append(s.Deps, j)
			}
		}
		if r.Intn(2) == 0 {
			s.Src = r.Intn(p.Srcs)
		}
		p.Steps = append(p.Steps, s)
	}
	return p
}

// Blocks renders each top-level block separately so tests can reorder and re-space them.
func (p *Project) Blocks(seedFile string, spaces string) []string {
	var out []string
	out = append(out, fmt.Sprintf("seed \"base\" {\n%slayer {\n files = { \"/bin/tool\" = host_file(%q) }\n }\n}\n", spaces, seedFile))
	for i, s := range p.Steps {
		var b strings.Builder
		fmt.Fprintf(&b, "step \"s%d\" {\n%simage = seed.base\n", i, spaces)
		fmt.Fprintf(&b, "  run = [\"sh\", \"-c\", %q]\n", s.Argv)
		fmt.Fprintf(&b, "  env = { MODE = %q }\n", s.Env)
		mounts := []string{}
		for _, d := range s.Deps {
			mounts = append(mounts, fmt.Sprintf("%q = step.s%d.output[\"/out/o\"]", fmt.Sprintf("/in/%d", d), d))
		}
		if s.Src >= 0 {
			mounts = append(mounts, fmt.Sprintf("\"/src\" = dir(\"src%d\")", s.Src))
		}
		fmt.Fprintf(&b, "  mounts = {%s%s}\n", spaces, strings.Join(mounts, ",\n"))
		fmt.Fprintf(&b, "  outputs = [\"/out/o\"]\n  limits {\n memory = %q\n }\n}\n", s.Memory)
		out = append(out, b.String())
	}
	return out
}

// Write lays the project out in dir: blocks spread over files in the given order.
func (p *Project) Write(t *testing.T, dir string, blocks []string, files int) {
	t.Helper()
	for i := 0; i < p.Srcs; i++ {
		d := filepath.Join(dir, fmt.Sprintf("src%d", i))
		Must(t, os.MkdirAll(d, 0o755))
		Must(t, os.WriteFile(filepath.Join(d, "main.c"), []byte(fmt.Sprintf("int main(){return %d;}\n", i)), 0o644))
	}
	per := make([][]string, files)
	for i, b := range blocks {
		per[i%files] = append(per[i%files], b)
	}
	for i, bs := range per {
		Must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.hcl", i)), []byte(strings.Join(bs, "\n")), 0o644))
	}
}

// Must fails the test on err.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// LoadConfig loads the project in dir, failing the test on any diagnostic.
func LoadConfig(t *testing.T, dir string) *lang.Config {
	t.Helper()
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("%s: %s", dir, diags.Error())
	}
	return cfg
}

// SeedFile writes an executable file holding content, for a seed to take as a host file,
// and returns its path.
func SeedFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "tool")
	Must(t, os.WriteFile(p, []byte(content), 0o755))
	return p
}

// Descendants returns step k and every step that depends on it, transitively.
func (p *Project) Descendants(k int) map[string]bool {
	out := map[string]bool{fmt.Sprintf("step.s%d", k): true}
	for i := k + 1; i < len(p.Steps); i++ {
		for _, d := range p.Steps[i].Deps {
			if out[fmt.Sprintf("step.s%d", d)] {
				out[fmt.Sprintf("step.s%d", i)] = true
			}
		}
	}
	return out
}

// LoadSparse writes and loads a project of n steps, each mounting the outputs of up to
// deps random earlier steps (and maybe a source directory), spread over the given number of
// files: large graphs with few edges, as the plan benchmark makes.
func LoadSparse(t *testing.T, r *rand.Rand, n, deps, files int) *lang.Config {
	t.Helper()
	p := &Project{Srcs: 3}
	for i := 0; i < n; i++ {
		s := Step{Argv: fmt.Sprintf("echo %d", i), Env: "a", Memory: "64MiB", Src: r.Intn(4) - 1}
		for k := 0; k < deps && i > 0; k++ {
			if d := r.Intn(i); !contains(s.Deps, d) {
				s.Deps = append(s.Deps, d)
			}
		}
		p.Steps = append(p.Steps, s)
	}
	dir := t.TempDir()
	p.Write(t, dir, p.Blocks(SeedFile(t, "tool"), "  "), files)
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// InputKindsProject writes a project whose steps read every kind of input, under keys that
// UTF-16 and UTF-8 sort differently, with a product's step and check; it returns its
// directory.
func InputKindsProject(t *testing.T) string {
	t.Helper()
	host := SeedFile(t, "tool")
	dir := t.TempDir()
	Must(t, os.MkdirAll(filepath.Join(dir, "src"), 0o755))
	Must(t, os.WriteFile(filepath.Join(dir, "src", "main.c"), []byte("int main(){}\n"), 0o644))
	Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(fmt.Sprintf(`
seed "base" {
  layer {
    files = { "/bin/tool" = host_file(%[1]q) }
  }
}
step "a" {
  image   = seed.base
  run     = ["sh", "-c", "x"]
  outputs = ["/out/o", "/out/d"]
}
step "b" {
  image  = seed.base
  run    = ["tool", "\"quoted\"\n"]
  env    = { Z = "1", A = "\u00e9" }
  mounts = {
    "/in/a" = step.a.output["/out/o"], "/in/d" = step.a.output["/out/d"], "/src" = dir("src"),
    "/f" = file("src/main.c"), "/t" = "inline text", "/a<&>" = "x",
    "/\ue000" = step.a.output["/out/o"], "/\U0001f600" = file("src/main.c"),
  }
  outputs = ["/out/o"]
  limits {
    cpus   = 0.5
    memory = "64MiB"
  }
}
product "p" {
  step "assemble" {
    image   = seed.base
    mounts  = { "/src" = dir("src") }
    run     = ["true"]
    outputs = ["/out/o"]
  }
  check "smoke" {
    image  = seed.base
    mounts = { "/app" = step.assemble.output["/out/o"] }
    run    = ["test", "-s", "/app"]
  }
}
`, host)), 0o644))
	return dir
}

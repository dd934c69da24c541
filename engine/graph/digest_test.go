package graph

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph/graphtest"
	"github.com/foundry-build/foundry/lang"
)

func compileDir(t *testing.T, dir string) map[string]digest.Digest {
	t.Helper()
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	g, diags := Compile(cfg)
	if diags.HasErrors() {
		t.Fatalf("compile: %s", diags.Error())
	}
	out := map[string]digest.Digest{}
	for a, n := range g.Nodes {
		out[a] = n.Digest
	}
	return out
}

// Same inputs in any file order, block order or whitespace give the same digests.
func TestDigestStability(t *testing.T) {
	tool := graphtest.SeedFile(t, "#!/bin/sh\n")
	for seed := int64(1); seed <= 8; seed++ {
		r := rand.New(rand.NewSource(seed))
		p := graphtest.RandomProject(r, 12)
		a := t.TempDir()
		p.Write(t, a, p.Blocks(tool, "  "), 1)
		want := compileDir(t, a)

		blocks := p.Blocks(tool, "\n\n    ")
		r.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
		b := t.TempDir()
		p.Write(t, b, blocks, 1+r.Intn(4))
		got := compileDir(t, b)
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d nodes, want %d", seed, len(got), len(want))
		}
		for addr, d := range want {
			if got[addr] != d {
				t.Errorf("seed %d: %s digest %s after reordering, want %s", seed, addr, got[addr], d)
			}
		}
	}
}

// Changing one input of one step changes exactly that step's digest and its dependents'.
func TestDigestSensitivity(t *testing.T) {
	tool := graphtest.SeedFile(t, "#!/bin/sh\n")
	mutations := []struct {
		name  string
		apply func(p *graphtest.Project, k int, dir string)
	}{
		{"argv", func(p *graphtest.Project, k int, _ string) { p.Steps[k].Argv += " changed" }},
		{"env", func(p *graphtest.Project, k int, _ string) { p.Steps[k].Env = "b" }},
		{"limit", func(p *graphtest.Project, k int, _ string) { p.Steps[k].Memory = "65MiB" }},
		{"input byte", func(p *graphtest.Project, k int, dir string) {
			// Point the step at a source directory of its own, then flip one byte in it.
			p.Steps[k].Src = p.Srcs
			p.Srcs++
		}},
	}
	for seed := int64(1); seed <= 6; seed++ {
		for _, m := range mutations {
			r := rand.New(rand.NewSource(seed))
			p := graphtest.RandomProject(r, 10)
			k := r.Intn(len(p.Steps))
			if m.name == "input byte" {
				m.apply(p, k, "")
			}
			a := t.TempDir()
			p.Write(t, a, p.Blocks(tool, "  "), 1)
			before := compileDir(t, a)
			if m.name == "input byte" {
				f := filepath.Join(a, fmt.Sprintf("src%d", p.Srcs-1), "main.c")
				b, _ := os.ReadFile(f)
				b[0] ^= 1
				graphtest.Must(t, os.WriteFile(f, b, 0o644))
			} else {
				m.apply(p, k, a)
				p.Write(t, a, p.Blocks(tool, "  "), 1)
			}
			after := compileDir(t, a)
			want := p.Descendants(k)
			var changed []string
			for addr := range before {
				if before[addr] != after[addr] {
					changed = append(changed, addr)
				}
			}
			sort.Strings(changed)
			for _, addr := range changed {
				if !want[addr] {
					t.Errorf("seed %d, %s of s%d: %s changed but does not depend on it", seed, m.name, k, addr)
				}
			}
			for addr := range want {
				if before[addr] == after[addr] {
					t.Errorf("seed %d, %s of s%d: %s did not change", seed, m.name, k, addr)
				}
			}
		}
	}
}

// Changing the seed's host file changes the seed and every step.
func TestDigestSeedChangePropagates(t *testing.T) {
	tool := graphtest.SeedFile(t, "v1")
	p := graphtest.RandomProject(rand.New(rand.NewSource(3)), 5)
	a := t.TempDir()
	p.Write(t, a, p.Blocks(tool, "  "), 1)
	before := compileDir(t, a)
	graphtest.Must(t, os.WriteFile(tool, []byte("v2"), 0o755))
	after := compileDir(t, a)
	for addr := range before {
		if before[addr] == after[addr] {
			t.Errorf("%s unchanged after the seed's host file changed", addr)
		}
	}
}

// A recipe's digest covers every one of its steps, including one its package does not use.
func TestRecipeDigestCoversAllSteps(t *testing.T) {
	tool := graphtest.SeedFile(t, "x")
	src := func(arg string) string {
		return fmt.Sprintf(`
seed "b" {
  layer { files = { "/bin/sh" = host_file(%q) } }
}
capability "c" {
  interface "cli" { entrypoint = ["/bin/c"] }
}
recipe "r" {
  provides = capability.c
  step "used" {
    image   = seed.b
    run     = ["sh"]
    outputs = ["/out/c"]
  }
  step "unused" {
    image = seed.b
    run   = ["sh", %q]
  }
  package { files = { "/bin/c" = step.used.output["/out/c"] } }
}
`, tool, arg)
	}
	dir := t.TempDir()
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src("a")), 0o644))
	before := compileDir(t, dir)
	graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src("b")), 0o644))
	after := compileDir(t, dir)
	if before["recipe.r"] == after["recipe.r"] {
		t.Error("changing a recipe step did not change the recipe's digest")
	}
	if before["recipe.r.package"] != after["recipe.r.package"] {
		t.Error("changing a step the package does not use changed the package's digest")
	}
}

// Every attribute of a service interface is part of the contract's identity; its suites
// and summary are not.
func TestServiceContractDigest(t *testing.T) {
	base := map[string]string{"port": "8080", "ready": `"/healthz"`, "errors": "{ bad = 400 }", "entrypoint": `["/bin/s"]`}
	src := func(over map[string]string, extra string) string {
		a := map[string]string{}
		for k, v := range base {
			a[k] = v
		}
		for k, v := range over {
			a[k] = v
		}
		body := ""
		for _, k := range []string{"entrypoint", "port", "ready", "errors"} {
			if a[k] != "" {
				body += fmt.Sprintf("    %s = %s\n", k, a[k])
			}
		}
		return fmt.Sprintf("capability \"s\" {\n%s  interface \"service\" {\n%s  }\n}\n", extra, body)
	}
	digestOf := func(hcl string) digest.Digest {
		dir := t.TempDir()
		graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o644))
		return compileDir(t, dir)["capability.s"]
	}
	ref := digestOf(src(nil, ""))
	for _, over := range []map[string]string{
		{"port": "8081"}, {"ready": `"/ready"`}, {"ready": ""}, {"errors": "{ bad = 422 }"}, {"errors": "{ worse = 400 }"}, {"entrypoint": `["/bin/t"]`},
	} {
		if digestOf(src(over, "")) == ref {
			t.Errorf("changing %v left the contract digest unchanged", over)
		}
	}
	if digestOf(src(nil, "  summary = \"documentation\"\n")) != ref {
		t.Error("the summary changed the contract digest")
	}
}

// TestOrderIsKahnByAddress checks Graph.Order against Kahn's algorithm on addresses: every
// node after its dependencies, ties broken by the smallest address.
func TestOrderIsKahnByAddress(t *testing.T) {
	cfg := graphtest.LoadSparse(t, rand.New(rand.NewSource(11)), 300, 2, 3)
	g, diags := Compile(cfg)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	placed := map[string]bool{}
	var want []string
	for len(want) < len(g.Nodes) {
		var ready []string
		for a, n := range g.Nodes {
			if placed[a] {
				continue
			}
			ok := true
			for _, d := range n.Deps {
				ok = ok && placed[d]
			}
			if ok {
				ready = append(ready, a)
			}
		}
		sort.Strings(ready)
		// Kahn's algorithm takes one ready node at a time; a node that becomes ready after
		// it competes with those still waiting, so take only the smallest each round.
		placed[ready[0]] = true
		want = append(want, ready[0])
	}
	if strings.Join(g.Order, " ") != strings.Join(want, " ") {
		t.Fatalf("Order differs from Kahn's algorithm by address:\n got %v\nwant %v", g.Order[:10], want[:10])
	}
}

// References to nodes that do not exist (lang rejects them; a configuration built another
// way may hold them) are reported in the order of the step's mount paths, however its map
// is iterated.
func TestUnknownNodesAreReportedInOrder(t *testing.T) {
	mounts := map[string]*lang.Artifact{}
	for _, p := range []string{"/c", "/a", "/d", "/b"} {
		mounts[p] = &lang.Artifact{Kind: lang.ArtifactStepOutput, Node: "step.missing" + p[1:], Path: "/out/o"}
	}
	cfg := &lang.Config{Steps: map[string]*lang.Step{
		"s": {Name: "s", Kind: "step", Mounts: mounts, Outputs: []string{"/out/o"}},
	}}
	for i := 0; i < 20; i++ {
		_, diags := Compile(cfg)
		var got []string
		for _, d := range diags {
			got = append(got, d.Detail)
		}
		want := []string{
			"step.s refers to step.missinga, which does not exist.",
			"step.s refers to step.missingb, which does not exist.",
			"step.s refers to step.missingc, which does not exist.",
			"step.s refers to step.missingd, which does not exist.",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// limits.disk and limits.inodes enter a step's digest only when they are not the defaults:
// a step naming the defaults has the digest of one naming none (and of every step defined
// before they existed), and any other bound changes it.
func TestDiskLimitsDigest(t *testing.T) {
	tool := graphtest.SeedFile(t, "#!/bin/sh\n")
	digestWith := func(limits string) digest.Digest {
		dir := t.TempDir()
		src := `seed "s" {
  layer { files = { "/bin/tool" = host_file("` + tool + `") } }
}
step "a" {
  image = seed.s
  run   = ["/bin/tool"]
` + limits + `
}
`
		graphtest.Must(t, os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644))
		return compileDir(t, dir)["step.a"]
	}
	none := digestWith("")
	if d := digestWith(`limits {
    disk   = "1GiB"
    inodes = 262144
  }`); d != none {
		t.Errorf("the default bounds changed the digest: %s, want %s", d, none)
	}
	for _, l := range []string{`limits { disk = "2GiB" }`, `limits { inodes = 1000 }`} {
		if d := digestWith(l); d == none {
			t.Errorf("%s left the digest unchanged", l)
		}
	}
}

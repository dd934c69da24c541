package plan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/lang"
)

// FuzzPlan drives arbitrary HCL through load, compile and plan: errors are diagnostics,
// never panics, and a graph that compiles always has a complete, acyclic order.
func FuzzPlan(f *testing.F) {
	f.Add([]byte("seed \"b\" {\n  layer { files = { \"/bin/sh\" = host_file(\"/bin/sh\") } }\n}\nstep \"a\" {\n  image = seed.b\n  run = [\"sh\"]\n  outputs = [\"/out/x\"]\n}\nstep \"c\" {\n  image = seed.b\n  run = [\"sh\"]\n  mounts = { \"/x\" = step.a.output[\"/out/x\"] }\n}\n"))
	f.Add([]byte("seed \"b\" {\n  layer { from = seed.c }\n}\nseed \"c\" {\n  layer { from = seed.b }\n}\n"))
	f.Add([]byte("capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/x\"] }\n}\nrecipe \"r\" {\n  provides = capability.c\n  cost = 2\n  step \"s\" {\n    image = seed.b\n    run = [\"a\"]\n    outputs = [\"/out/a\"]\n  }\n  package { files = { \"/x\" = step.s.output[\"/out/a\"] } }\n}\nseed \"b\" {\n  layer { files = { \"/bin/sh\" = host_file(\"/bin/sh\") } }\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, diags := lang.Load(dir, lang.Options{})
		if diags.HasErrors() {
			return
		}
		g, diags := graph.Compile(cfg)
		if diags.HasErrors() {
			return
		}
		if len(g.Order) != len(g.Nodes) {
			t.Fatalf("order has %d of %d nodes", len(g.Order), len(g.Nodes))
		}
		seen := map[string]bool{}
		for _, a := range g.Order {
			for _, d := range g.Nodes[a].Deps {
				if !seen[d] {
					t.Fatalf("%s ordered before its dependency %s", a, d)
				}
			}
			seen[a] = true
		}
		if _, err := Make(g, Options{}); err != nil {
			t.Fatal(err)
		}
	})
}

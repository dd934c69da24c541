package lang

import (
	"os"
	"path/filepath"
	"testing"
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
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), src, 0o644); err != nil {
			t.Fatal(err)
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

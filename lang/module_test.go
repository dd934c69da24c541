package lang

import (
	"strings"
	"testing"
)

const toolModule = `
variable "platform" {
  type = string
}
variable "src" {}
seed "base" {
  layer { files = { "/bin/busybox" = host_file("/bin/sh") } }
}
step "build" {
  image   = seed.base
  mounts  = { "/src" = var.src, "/notes" = dir("notes") }
  run     = ["build", var.platform]
  outputs = ["/out/app"]
}
output "app" {
  value = step.build.output["/out/app"]
}
`

// A module's nodes are addressed under it, its paths are its directory's, and the
// configuration that uses it mounts its outputs; a module with for_each is one instance per
// key, each with its own inputs.
func TestModulesLoadUnderTheirAddress(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"modules/tool/main.hcl": toolModule,
		"modules/tool/notes/a":  "a\n",
		"main.hcl": busyboxSeed + `
step "src" {
  image   = seed.bb
  run     = ["x"]
  outputs = ["/out/src"]
}
module "tool" {
  for_each = toset(["amd64", "arm64"])
  source   = "./modules/tool"
  platform = "linux/${each.key}"
  src      = step.src.output["/out/src"]
}
module "one" {
  source   = "./modules/tool"
  platform = "linux/riscv64"
  src      = module.tool["amd64"].app
}
step "test" {
  image  = seed.bb
  mounts = { "/a" = module.tool["arm64"].app, "/b" = module.one.app }
  run    = ["test"]
}
`})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var addrs []string
	cfg.EachStep(func(s *Step) { addrs = append(addrs, s.Address()) })
	want := `module.one.step.build module.tool["amd64"].step.build module.tool["arm64"].step.build step.src step.test`
	if got := strings.Join(sortedStrings(addrs), " "); got != want {
		t.Fatalf("steps:\n%s\nwant\n%s", got, want)
	}
	b := cfg.Steps[`module.tool["arm64"].step.build`]
	if b == nil || strings.Join(b.Run, " ") != "build linux/arm64" || b.Mounts["/src"].Node != "step.src" || b.Image.Node != `module.tool["arm64"].seed.base` {
		t.Fatalf("module.tool[arm64]'s build: %+v", b)
	}
	if n := b.Mounts["/notes"]; n.Kind != ArtifactProjectDir || n.Path != "modules/tool/notes" {
		t.Errorf("dir() in a module reads the module's directory: %v", n)
	}
	if s := cfg.Seeds[`module.one.seed.base`]; s == nil || s.Address() != "module.one.seed.base" {
		t.Errorf("module seeds: %v", sortedKeys(cfg.Seeds))
	}
	if m := cfg.Steps["module.one.step.build"].Mounts["/src"]; m.Node != `module.tool["amd64"].step.build` || m.Path != "/out/app" {
		t.Errorf("a module's output as another's input: %v", m)
	}
	test := cfg.Steps["test"].Mounts
	if test["/a"].Node != `module.tool["arm64"].step.build` || test["/b"].Node != "module.one.step.build" {
		t.Errorf("the project's step mounts %v", test)
	}
}

func sortedStrings(xs []string) []string {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return sortedKeys(m)
}

// Each misuse of a module gets its own diagnostic, where it is written.
func TestModuleDiagnostics(t *testing.T) {
	use := func(extra string) string {
		return busyboxSeed + `
step "src" {
  image   = seed.bb
  run     = ["x"]
  outputs = ["/out/src"]
}
` + extra
	}
	cases := []struct {
		name, main string
		files      map[string]string
		summary    string
		file       string
		detail     string
	}{
		{"wrong input type", use(`module "t" {
  source   = "./m"
  platform = ["a", "b"]
  src      = step.src.output["/out/src"]
}`), map[string]string{"m/main.hcl": toolModule}, "Invalid value for module input", "main.hcl", `variable "platform" of the module at ./m is of type string`},
		{"missing input", use(`module "t" {
  source = "./m"
  src    = step.src.output["/out/src"]
}`), map[string]string{"m/main.hcl": toolModule}, "Missing module input", "m/main.hcl", "module.t needs platform = VALUE"},
		{"unknown input", use(`module "t" {
  source   = "./m"
  platfrom = "x"
  platform = "x"
  src      = step.src.output["/out/src"]
}`), map[string]string{"m/main.hcl": toolModule}, "Unsupported module input", "main.hcl", `Did you mean "platform"?`},
		{"undeclared output", use(`module "t" {
  source   = "./m"
  platform = "x"
  src      = step.src.output["/out/src"]
}
step "u" {
  image  = seed.bb
  mounts = { "/a" = module.t.ap }
  run    = ["x"]
}`), map[string]string{"m/main.hcl": toolModule}, "Reference to undeclared module output", "main.hcl", `module "t" has no output "ap"`},
		{"cycle of inputs", use(`module "a" {
  source   = "./m"
  platform = "x"
  src      = module.b.app
}
module "b" {
  source   = "./m"
  platform = "x"
  src      = module.a.app
}`), map[string]string{"m/main.hcl": toolModule}, "Module cycle", "main.hcl", "module.a → module.b → module.a"},
		{"cycle of sources", use(`module "a" {
  source = "./m"
}`), map[string]string{"m/main.hcl": `module "again" {
  source = "../m"
}`}, "Module cycle", "m/main.hcl", "./m → ./m"},
		{"source outside", use(`module "a" {
  source = "../elsewhere"
}`), nil, "Invalid module source", "main.hcl", "leaves the project directory"},
		{"block not allowed", use(`module "a" {
  source = "./m"
}`), map[string]string{"m/main.hcl": `project "p" {}`}, "Block not allowed in a module", "m/main.hcl", "a project block belongs"},
		{"output at the top", use(`output "x" {
  value = 1
}`), nil, "Output outside a module", "main.hcl", "output blocks say"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"main.hcl": c.main}
			for k, v := range c.files {
				files[k] = v
			}
			_, diags := Load(writeProject(t, files), Options{})
			for _, d := range diags {
				if d.Summary == c.summary && strings.Contains(d.Detail, c.detail) && d.Subject != nil && d.Subject.Filename == c.file {
					return
				}
			}
			t.Fatalf("want %q in %s saying %q; got:\n%s", c.summary, c.file, c.detail, renderDiags(diags))
		})
	}
}

package lang

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// reconstructCap is a capability with a sealed suite and the given reconstruct body.
func reconstructCap(body string) string {
	return busyboxSeed + "capability \"c\" {\n  interface \"cli\" { entrypoint = [\"/bin/x\"] }\n  suite \"sealed\" { cases = \"sealed/*.json\" }\n  reconstruct {\n" + body + "  }\n}\n"
}

const goodBuilder = "    builder {\n      image   = seed.bb\n      run     = [\"/bin/sh\", \"/src/propose.sh\"]\n      mounts  = { \"/src\" = dir(\"builder\") }\n      outputs = [\"/out/x\"]\n      limits { time = \"30s\" }\n    }\n"

// A reconstruct block decodes to a builder step, a package of its outputs and a budget.
func TestReconstructDecodes(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"main.hcl":           reconstructCap(goodBuilder + "    package {\n      base  = seed.bb\n      files = { \"/bin/x\" = \"/out/x\" }\n    }\n    budget {\n      candidates = 2\n      probes = 7\n      wall = \"90s\"\n      scratch = \"1MiB\"\n      spend = 2.5\n    }\n"),
		"sealed/1.json":      "{}",
		"builder/propose.sh": "true\n",
	})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	rc := cfg.Capabilities["c"].Reconstruct
	if rc == nil || rc.Builder == nil || rc.Package == nil {
		t.Fatalf("reconstruct %+v", rc)
	}
	if rc.Builder.Image.Node != "seed.bb" || rc.Builder.Network != "none" || strings.Join(rc.Builder.Outputs, ",") != "/out/x" || rc.Builder.Mounts["/src"] == nil {
		t.Errorf("builder %+v", rc.Builder)
	}
	f := rc.Package.Files["/bin/x"]
	if f == nil || f.Kind != ArtifactStepOutput || f.Node != "capability.c.reconstruct.builder" || f.Path != "/out/x" || rc.Package.Base.Node != "seed.bb" {
		t.Errorf("package %+v", rc.Package)
	}
	if want := (ReconstructBudget{Candidates: 2, Probes: 7, Wall: 90 * time.Second, Scratch: 1 << 20, Spend: 2.5}); rc.Budget != want {
		t.Errorf("budget %+v, want %+v", rc.Budget, want)
	}
	// Without a budget block, the default.
	dir = writeProject(t, map[string]string{
		"main.hcl":           reconstructCap(goodBuilder + "    package {\n      files = { \"/bin/x\" = \"/out/x\" }\n    }\n"),
		"sealed/1.json":      "{}",
		"builder/propose.sh": "true\n",
	})
	if cfg, diags = Load(dir, Options{}); diags.HasErrors() {
		t.Fatal(diags.Error())
	} else if b := cfg.Capabilities["c"].Reconstruct.Budget; b != DefaultReconstructBudget {
		t.Errorf("default budget %+v", b)
	}
}

// Each mistake in a reconstruct block gets one diagnostic at its line; a builder that would
// see sealed cases is refused like any step.
func TestReconstructDiagnostics(t *testing.T) {
	pkg := "    package {\n      files = { \"/bin/x\" = \"/out/x\" }\n    }\n"
	cases := []struct {
		name, body, summary string
		line                int
		detail              string
	}{
		{"no builder", pkg, "Missing builder", 8, "proposes candidates"},
		{"no package", goodBuilder, "Missing package", 8, "builder's outputs"},
		{"unknown output", goodBuilder + "    package {\n      files = { \"/bin/x\" = \"/out/y\" }\n    }\n", "Unknown builder output", 17, `a proposal holds no "/out/y"`},
		{"no outputs", "    builder {\n      image = seed.bb\n      run   = [\"true\"]\n    }\n" + pkg, "Builder without outputs", 9, "under /out"},
		{"network", "    builder {\n      image = seed.bb\n      run   = [\"true\"]\n      outputs = [\"/out/x\"]\n      network = \"host\"\n    }\n" + pkg, "Network not granted", 13, "grant"},
		{"job mount", "    builder {\n      image = seed.bb\n      run   = [\"true\"]\n      outputs = [\"/out/x\"]\n      mounts = { \"/job\" = \"text\" }\n    }\n" + pkg, "Reserved mount path", 13, "/job"},
		{"sealed mount", "    builder {\n      image = seed.bb\n      run   = [\"true\"]\n      outputs = [\"/out/x\"]\n      mounts = { \"/s\" = dir(\"sealed\") }\n    }\n" + pkg, "Configuration reads sealed cases", 13, `dir("sealed") reaches sealed/1.json`},
		{"bad candidates", goodBuilder + pkg + "    budget { candidates = 0 }\n", "Invalid candidates", 19, "from 1 to 100"},
		{"builder and proposals", goodBuilder + "    proposals { outputs = [\"/out/x\"] }\n" + pkg, "Builder and proposals", 16, "not both"},
		{"proposal path", "    proposals { outputs = [\"/bin/x\"] }\n" + pkg, "Invalid output path", 9, "under /out"},
		{"no proposal outputs", "    proposals { outputs = [] }\n" + pkg, "Empty outputs", 9, "at least one file"},
		{"bad probes", goodBuilder + pkg + "    budget { probes = 1.5 }\n", "Invalid probes", 19, "from 1 to 100000"},
		{"bad wall", goodBuilder + pkg + "    budget { wall = \"soon\" }\n", "Invalid duration", 19, "wall = \"soon\""},
		{"bad scratch", goodBuilder + pkg + "    budget { scratch = \"0\" }\n", "Invalid size", 19, "must be positive"},
		{"bad spend", goodBuilder + pkg + "    budget { spend = -1 }\n", "Invalid spend", 19, "at least 0"},
		{"duplicate budget", goodBuilder + pkg + "    budget { candidates = 1 }\n    budget { candidates = 2 }\n", "Duplicate budget block", 20, "one budget block"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"main.hcl": reconstructCap(c.body), "sealed/1.json": "{}", "builder/propose.sh": "true\n"})
			_, diags := Load(dir, Options{})
			for _, d := range diags {
				if d.Summary != c.summary {
					continue
				}
				if d.Subject == nil || d.Subject.Filename != "main.hcl" || d.Subject.Start.Line != c.line {
					t.Errorf("want main.hcl:%d, got %v", c.line, d.Subject)
				}
				if !strings.Contains(d.Detail, c.detail) {
					t.Errorf("detail %q does not contain %q", d.Detail, c.detail)
				}
				return
			}
			t.Fatalf("want %q, got: %v", c.summary, diags)
		})
	}
}

// A builder mounts a capability (a tool it builds with), but not a step's output: it sees
// no step (a step is not what a reconstruction waits for).
func TestBuilderMounts(t *testing.T) {
	builder := func(mount string) string {
		return "    builder {\n      image = seed.bb\n      run   = [\"true\"]\n      outputs = [\"/out/x\"]\n      mounts = { \"/m\" = " + mount + " }\n    }\n" +
			"    package {\n      files = { \"/bin/x\" = \"/out/x\" }\n    }\n"
	}
	tool := "capability \"tool\" {\n  interface \"cli\" { entrypoint = [\"/bin/t\"] }\n}\n"
	step := "step \"s\" {\n  image   = seed.bb\n  run     = [\"true\"]\n  outputs = [\"/out/y\"]\n}\n"
	files := map[string]string{"sealed/1.json": "{}", "main.hcl": reconstructCap(builder("capability.tool")) + tool + step}
	cfg, diags := Load(writeProject(t, files), Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if m := cfg.Capabilities["c"].Reconstruct.Builder.Mounts["/m"]; m == nil || m.Kind != ArtifactCapability || m.Node != "capability.tool" {
		t.Errorf("capability mount %+v", m)
	}
	files["main.hcl"] = reconstructCap(builder(`step.s.output["/out/y"]`)) + tool + step
	_, diags = Load(writeProject(t, files), Options{})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Reference to undeclared step") {
		t.Errorf("a builder mounting a step output: %v", diags)
	}
}

const goodBuild = "    build {\n      image   = seed.bb\n      run     = [\"/bin/sh\", \"-c\", \"cp /proposal/x /out/tool\"]\n      outputs = [\"/out/tool\"]\n    }\n"

// A reconstruct block with a build: the build decodes as a step of its own, and the
// package names its outputs, not the proposal's.
func TestReconstructBuildDecodes(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"main.hcl":           reconstructCap(goodBuilder + goodBuild + "    package {\n      files = { \"/bin/x\" = \"/out/tool\" }\n    }\n"),
		"sealed/1.json":      "{}",
		"builder/propose.sh": "true\n",
	})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	rc := cfg.Capabilities["c"].Reconstruct
	if b := rc.Build; b == nil || b.Kind != "build" || b.Image.Node != "seed.bb" || b.Network != "none" || strings.Join(b.Outputs, ",") != "/out/tool" {
		t.Fatalf("build %+v", rc.Build)
	}
	if f := rc.Package.Files["/bin/x"]; f == nil || f.Node != "capability.c.reconstruct.build" || f.Path != "/out/tool" {
		t.Errorf("package %+v", rc.Package.Files)
	}
}

// Each mistake in a build block gets one diagnostic at its line: a candidate is made of the
// build's outputs or of the proposal's, never both; the build mounts neither /job nor
// /proposal, and never sealed cases.
func TestReconstructBuildDiagnostics(t *testing.T) {
	pkg := "    package {\n      files = { \"/bin/x\" = \"/out/tool\" }\n    }\n"
	build := func(extra string) string {
		return "    build {\n      image   = seed.bb\n      run     = [\"true\"]\n      outputs = [\"/out/tool\"]\n" + extra + "    }\n"
	}
	cases := []struct {
		name, body, summary string
		line                int
		detail              string
	}{
		{"package names the proposal", goodBuilder + goodBuild + "    package {\n      files = { \"/bin/x\" = \"/out/x\" }\n    }\n", "Unknown build output", 22, `the package names the build's outputs`},
		{"no outputs", goodBuilder + "    build {\n      image = seed.bb\n      run   = [\"true\"]\n    }\n" + pkg, "Build without outputs", 16, "under /out"},
		{"proposal mount", goodBuilder + build("      mounts = { \"/proposal/x\" = \"text\" }\n") + pkg, "Reserved mount path", 20, "/proposal"},
		{"job mount", goodBuilder + build("      mounts = { \"/job\" = \"text\" }\n") + pkg, "Reserved mount path", 20, "/job"},
		{"sealed mount", goodBuilder + build("      mounts = { \"/s\" = dir(\"sealed\") }\n") + pkg, "Configuration reads sealed cases", 20, `dir("sealed") reaches sealed/1.json`},
		{"network", goodBuilder + build("      network = \"host\"\n") + pkg, "Network not granted", 20, "grant"},
		{"duplicate build", goodBuilder + goodBuild + goodBuild + pkg, "Duplicate build block", 21, "one build block"},
		{"builder proposal mount", "    builder {\n      image = seed.bb\n      run   = [\"true\"]\n      outputs = [\"/out/x\"]\n      mounts = { \"/proposal\" = \"text\" }\n    }\n" + goodBuild + pkg, "Reserved mount path", 13, "/proposal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{"main.hcl": reconstructCap(c.body), "sealed/1.json": "{}", "builder/propose.sh": "true\n"})
			_, diags := Load(dir, Options{})
			for _, d := range diags {
				if d.Summary != c.summary {
					continue
				}
				if d.Subject == nil || d.Subject.Filename != "main.hcl" || d.Subject.Start.Line != c.line {
					t.Errorf("want main.hcl:%d, got %v", c.line, d.Subject)
				}
				if !strings.Contains(d.Detail, c.detail) {
					t.Errorf("detail %q does not contain %q", d.Detail, c.detail)
				}
				return
			}
			t.Fatalf("want %q, got: %v", c.summary, diags)
		})
	}
}

// A service suite's expect = reference.R (a trace of effects) decodes onto the suite; each
// misuse gets one diagnostic at its line.
func TestTraceSuiteDecodes(t *testing.T) {
	capb := func(kind, sealed string) string {
		it := "interface \"cli\" { entrypoint = [\"/bin/x\"] }"
		if kind == "service" {
			it = "interface \"service\" {\n    entrypoint = [\"/bin/x\"]\n    port = 8080\n  }"
		}
		return busyboxSeed + "capability \"c\" {\n  " + it + "\n" + sealed + "  reconstruct {\n    reference \"r\" {\n      image = seed.bb\n      entrypoint = [\"/bin/x\"]\n      licence = \"MIT\"\n      origin = \"here\"\n      observe = OBS\n    }\n" + goodBuilder + "    package {\n      files = { \"/bin/x\" = \"/out/x\" }\n    }\n  }\n}\n"
	}
	load := func(src, obs string) (*Config, hcl.Diagnostics) {
		dir := writeProject(t, map[string]string{"main.hcl": strings.ReplaceAll(src, "OBS", obs), "sealed/1.json": "{}", "builder/propose.sh": "true\n"})
		return Load(dir, Options{})
	}
	good := "  suite \"sealed\" {\n    cases  = \"sealed/*.json\"\n    expect = reference.r\n  }\n"
	cfg, diags := load(capb("service", good), "true")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if s := cfg.Capabilities["c"].Suites["sealed"]; s.Expect != "r" || s.Reference() != "r" || s.Generate != nil {
		t.Fatalf("suite %+v", s)
	}
	for _, c := range []struct {
		name, kind, sealed, obs, summary string
		line                             int
		detail                           string
	}{
		{"cli", "cli", good, "true", "Trace suite of a cli", 9, "generate { expect = reference.r }"},
		{"not observable", "service", good, "false", "Reference not observable", 12, "observe = false"},
		{"unknown", "service", strings.Replace(good, "reference.r", "reference.q", 1), "true", "Unknown reference", 12, `no reference "q"`},
		{"not a reference", "service", strings.Replace(good, "reference.r", "seed.bb", 1), "true", "Invalid expect", 12, "reference.NAME"},
		{"no cases", "service", "  suite \"sealed\" {\n    expect = reference.r\n    generate { count = 3 }\n  }\n", "true", "Missing cases", 11, "case files"},
		{"generated", "service", "  suite \"sealed\" {\n    cases  = \"sealed/*.json\"\n    expect = reference.r\n    generate { count = 3 }\n  }\n", "true", "Generated service suite", 13, "no generate block"},
		{"generate expect of a service", "service", "  suite \"sealed\" {\n    cases  = \"sealed/*.json\"\n    generate {\n      count = 3\n      expect = reference.r\n    }\n  }\n", "true", "Differential suite of a service", 14, "trace of effects"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, diags := load(capb(c.kind, c.sealed), c.obs)
			for _, d := range diags {
				if d.Summary != c.summary {
					continue
				}
				if d.Subject == nil || d.Subject.Filename != "main.hcl" || d.Subject.Start.Line != c.line {
					t.Errorf("want main.hcl:%d, got %v", c.line, d.Subject)
				}
				if !strings.Contains(d.Detail, c.detail) {
					t.Errorf("detail %q does not contain %q", d.Detail, c.detail)
				}
				return
			}
			t.Fatalf("want %q, got: %v", c.summary, diags)
		})
	}
}

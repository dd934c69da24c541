package main

import (
	"os"

	"github.com/foundry-build/foundry/engine/workspace"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gcProject writes a project that reads every kind of input a load can record: HCL files,
// a -var, a -var-file, file(), dir(), fileset(), host_file(), host_dir() and a suite's
// cases. It returns the project and the host directory, with .foundry made so that the
// graph cache is used.
func gcProject(t *testing.T) (dir, host string) {
	t.Helper()
	dir, host = t.TempDir(), t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(host, "tool"), "#!/bin/sh\n")
	write(filepath.Join(host, "tree", "a"), "a\n")
	write(filepath.Join(dir, "main.hcl"), `
variable "greeting" {
  type    = string
  default = "hello"
}
variable "host" { type = string }
seed "base" {
  layer { files = { "/bin/sh" = host_file("${var.host}/tool") } }
  layer {
    dir = host_dir("${var.host}/tree")
    at  = "/tree"
  }
}
capability "echo" {
  summary     = "echo"
  equivalence = "bytes"
  interface "cli" { entrypoint = ["/bin/echo"] }
  suite "dev" { cases = "cases/*.json" }
}
step "s" {
  image   = seed.base
  env     = { N = "${length(fileset("data", "*.txt"))}", G = var.greeting, F = file("note.txt") }
  mounts  = { "/src" = dir("src") }
  run     = ["sh", "-c", "echo > /out/o"]
  outputs = ["/out/o"]
}
module "m" {
  source = "./mod"
  base   = seed.base
}
`)
	write(filepath.Join(dir, "mod", "main.hcl"), `
variable "base" {}
step "t" {
  image = var.base
  run   = ["true"]
}
`)
	write(filepath.Join(dir, "note.txt"), "note\n")
	write(filepath.Join(dir, "src", "x"), "x\n")
	write(filepath.Join(dir, "data", "1.txt"), "1\n")
	write(filepath.Join(dir, "cases", "1.json"), `{"input":1,"output":1}`)
	write(filepath.Join(dir, "vars.hcl.in"), `greeting = "hi"`+"\n")
	if err := os.Mkdir(filepath.Join(dir, ".foundry"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, host
}

var cacheLine = regexp.MustCompile(`graph cache: (hit|miss|stored|not stored)[^\n]*`)

// planCached runs plan -json with the graph cache traced and returns the plan and the
// cache's first word for the lookup ("hit" or "miss") with its line.
func planCached(t *testing.T, dir string, args ...string) (plan, verdict, line string) {
	t.Helper()
	t.Setenv("FOUNDRY_DEBUG", "graph-cache")
	code, out, errs := runCLI(t, append(append([]string{"plan", "-json"}, args...), dir)...)
	if code != exitOK && code != 2 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	m := cacheLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no graph cache line in stderr:\n%s", errs)
	}
	return out, m[1], m[0]
}

// TestGraphCacheHitIsTheSamePlan: a second plan of an unchanged project is a hit, and its
// JSON is byte for byte the first's.
func TestGraphCacheHitIsTheSamePlan(t *testing.T) {
	dir, host := gcProject(t)
	args := []string{"-var", "host=" + host, "-var-file", filepath.Join(dir, "vars.hcl.in")}
	first, v, line := planCached(t, dir, args...)
	if v != "miss" {
		t.Fatalf("first plan: %s", line)
	}
	second, v, line := planCached(t, dir, args...)
	if v != "hit" {
		t.Fatalf("second plan: %s", line)
	}
	if first != second {
		t.Fatalf("plan -json differs with a hit:\n--- miss\n%s\n--- hit\n%s", first, second)
	}
	// And for the golden project, which has recipes, products and capabilities.
	project, tool := testdata(t)
	gdir := t.TempDir()
	copyTree(t, project, gdir)
	os.Mkdir(filepath.Join(gdir, ".foundry"), 0o755)
	first, _, _ = planCached(t, gdir, "-var", "tool="+tool)
	second, v, line = planCached(t, gdir, "-var", "tool="+tool)
	if v != "hit" || first != second {
		t.Fatalf("golden project: %s; same plan: %v", line, first == second)
	}
}

// TestGraphCacheMissesOnEveryInput changes each kind of recorded input in turn and requires
// a miss, then a hit again once the new load is stored.
func TestGraphCacheMissesOnEveryInput(t *testing.T) {
	dir, host := gcProject(t)
	varFile := filepath.Join(dir, "vars.hcl.in")
	vars := []string{"-var", "host=" + host, "-var-file", varFile}
	write := func(p, s string) func() {
		return func() {
			if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		change func()
		args   []string
		why    string
	}{
		{"hcl bytes", write(filepath.Join(dir, "main.hcl"), mustRead(t, filepath.Join(dir, "main.hcl"))+"\n# edit\n"), nil, "no entry"},
		{"new hcl file", write(filepath.Join(dir, "extra.hcl"), "locals { x = 1 }\n"), nil, "no entry"},
		{"-var", nil, []string{"-var", "greeting=bye"}, "no entry"},
		{"-var-file", write(varFile, `greeting = "hey"`+"\n"), nil, "no entry"},
		{"file", write(filepath.Join(dir, "note.txt"), "changed\n"), nil, "input project_file note.txt changed"},
		{"dir", write(filepath.Join(dir, "src", "x"), "y\n"), nil, "input project_dir src changed"},
		{"fileset", write(filepath.Join(dir, "data", "2.txt"), "2\n"), nil, `glob "*.txt" in data matches other files`},
		{"host_file", write(filepath.Join(host, "tool"), "#!/bin/sh\n# v2\n"), nil, "input host_file " + filepath.Join(host, "tool") + " changed"},
		{"host_file mode", func() { os.Chmod(filepath.Join(host, "tool"), 0o755) }, nil, "its mode changed"},
		{"host_dir", write(filepath.Join(host, "tree", "b"), "b\n"), nil, "input host_dir " + filepath.Join(host, "tree") + " changed"},
		{"suite gains a case", write(filepath.Join(dir, "cases", "2.json"), `{"input":2,"output":2}`), nil, `glob "cases/*.json" in . matches other files`},
		{"suite case content", write(filepath.Join(dir, "cases", "2.json"), `{"input":3,"output":3}`), nil, "input suite capability.echo.suite.dev changed"},
		{"budget", func() { t.Setenv("FOUNDRY_EVAL_MAX_VALUES", "999999") }, nil, "no entry"},
		{"module file", write(filepath.Join(dir, "mod", "main.hcl"), "variable \"base\" {}\n"), nil, "input project_file mod/main.hcl changed"},
		{"new module file", write(filepath.Join(dir, "mod", "more.hcl"), "locals { z = 1 }\n"), nil, `glob "*.hcl" in mod matches other files`},
	}
	extra := []string{}
	planCached(t, dir, vars...)
	if _, v, line := planCached(t, dir, vars...); v != "hit" {
		t.Fatalf("unchanged: %s", line)
	}
	for _, c := range cases {
		if c.change != nil {
			c.change()
		}
		extra = append(extra, c.args...)
		args := append(append([]string{}, vars...), extra...)
		if _, v, line := planCached(t, dir, args...); v != "miss" || !strings.Contains(line, c.why) {
			t.Errorf("%s: want a miss saying %q, got %q", c.name, c.why, line)
		}
		if _, v, line := planCached(t, dir, args...); v != "hit" {
			t.Errorf("%s: the load after the miss was not stored: %s", c.name, line)
		}
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A damaged, truncated or foreign entry is a miss, never an error, and gc bounds the cache.
func TestGraphCacheDamagedEntriesAndGC(t *testing.T) {
	dir, host := gcProject(t)
	args := []string{"-var", "host=" + host, "-var-file", filepath.Join(dir, "vars.hcl.in")}
	want, _, _ := planCached(t, dir, args...)
	cacheDir := filepath.Join(dir, ".foundry", "graph-cache")
	entries := func() []string {
		t.Helper()
		var names []string
		des, _ := os.ReadDir(cacheDir)
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}
	if len(entries()) != 1 {
		t.Fatalf("entries after one plan: %v", entries())
	}
	entry := filepath.Join(cacheDir, entries()[0])
	good, _ := os.ReadFile(entry)
	for name, bad := range map[string][]byte{
		"truncated": good[:len(good)/2],
		"garbage":   []byte("not a graph at all"),
		"flipped":   append(append([]byte{}, good[:len(good)-1]...), good[len(good)-1]^0xff),
		"empty":     {},
	} {
		if err := os.WriteFile(entry, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		got, v, line := planCached(t, dir, args...)
		if v != "miss" || got != want {
			t.Errorf("%s entry: %s; same plan: %v", name, line, got == want)
		}
	}
	// Several projects' worth of entries (each -var value is another key); gc keeps the
	// newest N.
	for _, g := range []string{"a", "b", "c"} {
		planCached(t, dir, append(args, "-var", "greeting="+g)...)
	}
	if n := len(entries()); n != 4 {
		t.Fatalf("%d entries, want 4: %v", n, entries())
	}
	ws, err := workspace.Open(dir) // gc needs a project that has state
	if err != nil {
		t.Fatal(err)
	}
	ws.Close()
	if code, out, errs := runCLI(t, "gc", "-keep-graphs", "2", dir); code != exitOK || !strings.Contains(out, "2 compiled graph(s)") {
		t.Fatalf("gc: exit %d\n%s%s", code, out, errs)
	}
	if n := len(entries()); n != 2 {
		t.Fatalf("after gc -keep-graphs 2: %d entries: %v", n, entries())
	}
}

package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/plan"
)

var planDigestRE = regexp.MustCompile(`("plan_digest": "|· plan )sha256:[0-9a-f]+`)

var update = flag.Bool("update", false, "rewrite golden files in testdata/ from the current output")

// runCLI runs the CLI in-process and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &cliEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: os.Getenv}
	code := dispatch(env, args)
	return code, out.String(), errb.String()
}

func testdata(t *testing.T) (project, tool string) {
	abs, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(abs, "project"), filepath.Join(abs, "tool")
}

// golden compares got with testdata/NAME, after replacing machine-specific paths.
func golden(t *testing.T, name, got string) {
	t.Helper()
	abs, _ := filepath.Abs("testdata")
	got = strings.ReplaceAll(got, abs, "$TESTDATA")
	// The plan digest covers input paths, and host paths differ between checkouts.
	got = planDigestRE.ReplaceAllString(got, "${1}$$PLAN_DIGEST")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run 'go test ./cmd/foundry -update' to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestPlanGolden(t *testing.T) {
	project, tool := testdata(t)
	code, out, errs := runCLI(t, "plan", "-var", "tool="+tool, project)
	if code != exitOK {
		t.Fatalf("plan exited %d: %s", code, errs)
	}
	golden(t, "plan.txt", out)
	code, out, errs = runCLI(t, "plan", "-json", "-var", "tool="+tool, project)
	if code != exitOK {
		t.Fatalf("plan -json exited %d: %s", code, errs)
	}
	golden(t, "plan.json", out)
}

func TestPlanDetailedExitCode(t *testing.T) {
	project, tool := testdata(t)
	if code, _, _ := runCLI(t, "plan", "-detailed-exitcode", "-var", "tool="+tool, project); code != exitDiffers {
		t.Errorf("plan -detailed-exitcode with work to do exited %d, want %d", code, exitDiffers)
	}
}

// A saved plan names exactly what changed when an input changes afterwards.
func TestSavedPlanDetectsChanges(t *testing.T) {
	project, tool := testdata(t)
	dir := t.TempDir()
	copyTree(t, project, dir)
	planFile := filepath.Join(t.TempDir(), "p.plan")
	if code, _, errs := runCLI(t, "plan", "-out", planFile, "-var", "tool="+tool, dir); code != exitOK {
		t.Fatalf("plan -out: %s", errs)
	}
	saved, err := plan.Load(planFile)
	if err != nil {
		t.Fatal(err)
	}
	fresh := planOf(t, dir, tool)
	if r := plan.StaleReasons(saved, fresh); r != nil {
		t.Fatalf("unchanged project reported stale: %v", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "input.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reasons := strings.Join(plan.StaleReasons(saved, planOf(t, dir, tool)), "\n")
	for _, want := range []string{"input project_dir src changed", "step.fetch changed", "step.count changed"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("stale reasons lack %q:\n%s", want, reasons)
		}
	}
	if strings.Contains(reasons, "seed.base") {
		t.Errorf("seed.base reported changed, but its inputs did not change:\n%s", reasons)
	}
}

func planOf(t *testing.T, dir, tool string) *plan.Plan {
	t.Helper()
	code, out, errs := runCLI(t, "plan", "-json", "-var", "tool="+tool, dir)
	if code != exitOK {
		t.Fatalf("plan: %s", errs)
	}
	f := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// copyTree copies a project directory, leaving out its state directory and those of the
// projects inside it (examples/reconstruct/reuse).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() && info.Name() == ".foundry" {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestValidateErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte("step \"a\" {\n  image = seed.nope\n  run = [\"x\"]\n}\n"), 0o644)
	code, _, errs := runCLI(t, "validate", dir)
	if code != exitError {
		t.Errorf("validate exited %d, want %d", code, exitError)
	}
	for _, want := range []string{"on main.hcl line 2", "image = seed.nope", `No seed "nope" is declared`} {
		if !strings.Contains(errs, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, errs)
		}
	}
	code, out, _ := runCLI(t, "validate", "-json", dir)
	if code != exitError || !strings.Contains(out, `"valid": false`) || !strings.Contains(out, `"line": 2`) {
		t.Errorf("validate -json: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI(t, "validate", "-nope"); code != exitUsage {
		t.Errorf("bad flag exited %d, want %d", code, exitUsage)
	}
	if code, _, errs := runCLI(t, "valdate"); code != exitUsage || !strings.Contains(errs, `did you mean "validate"`) {
		t.Errorf("unknown command: exit %d, %s", code, errs)
	}
}

func TestInitThenPlan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if code, _, errs := runCLI(t, "init", dir); code != exitOK {
		t.Fatalf("init: %s", errs)
	}
	if code, _, errs := runCLI(t, "init", dir); code != exitError || !strings.Contains(errs, "already has configuration files") {
		t.Errorf("second init: exit %d, %s", code, errs)
	}
	code, out, errs := runCLI(t, "plan", dir)
	if code != exitOK || !strings.Contains(out, "Plan: 2 to run") {
		t.Fatalf("plan of the starter project: exit %d\n%s%s", code, out, errs)
	}
	if code, _, _ := runCLI(t, "fmt", "-check", dir); code != exitOK {
		t.Errorf("the starter project is not formatted")
	}
}

func TestFmt(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "main.hcl")
	os.WriteFile(f, []byte("variable \"a\" {\ndefault=\"x\"\n    description = \"y\"\n}\n"), 0o600)
	code, out, _ := runCLI(t, "fmt", "-check", dir)
	if code != exitDiffers || !strings.Contains(out, "main.hcl") {
		t.Errorf("fmt -check on an unformatted file: exit %d, %q", code, out)
	}
	if b, _ := os.ReadFile(f); !strings.Contains(string(b), "default=\"x\"") {
		t.Errorf("fmt -check changed the file")
	}
	if code, _, _ := runCLI(t, "fmt", dir); code != exitOK {
		t.Errorf("fmt exited %d", code)
	}
	b, _ := os.ReadFile(f)
	if !strings.Contains(string(b), "  default     = \"x\"\n  description = \"y\"") {
		t.Errorf("fmt output:\n%s", b)
	}
	if st, _ := os.Stat(f); st.Mode().Perm() != 0o600 {
		t.Errorf("fmt changed the mode to %v", st.Mode())
	}
	// A syntax error is reported and the file is left alone.
	bad := []byte("variable \"a\" {\n")
	os.WriteFile(f, bad, 0o644)
	if code, _, errs := runCLI(t, "fmt", dir); code != exitError || !strings.Contains(errs, "main.hcl") {
		t.Errorf("fmt of a broken file: exit %d, %s", code, errs)
	}
	if b, _ := os.ReadFile(f); !bytes.Equal(b, bad) {
		t.Errorf("fmt rewrote a file with a syntax error")
	}
	// Files are formatted on every core; they are listed in name order all the same, and
	// a file with an error stops nothing else from being formatted.
	many := t.TempDir()
	unformatted, formatted := "variable \"a\" {\ndefault=\"x\"\n}\n", "variable \"b\" {\n  default = \"x\"\n}\n"
	var want []string
	for i := 0; i < 12; i++ {
		name := filepath.Join(many, fmt.Sprintf("f%02d.hcl", i))
		src := formatted
		if i%3 == 0 {
			src = unformatted
			want = append(want, name)
		}
		os.WriteFile(name, []byte(src), 0o644)
	}
	code, out, _ = runCLI(t, "fmt", "-check", many)
	if code != exitDiffers || out != strings.Join(want, "\n")+"\n" {
		t.Errorf("fmt -check of many files: exit %d, listed\n%s\nwant\n%s", code, out, strings.Join(want, "\n"))
	}
	os.WriteFile(filepath.Join(many, "f05.hcl"), bad, 0o644)
	if code, out, errs := runCLI(t, "fmt", many); code != exitError || !strings.Contains(errs, "f05.hcl") || out != strings.Join(want, "\n")+"\n" {
		t.Errorf("fmt of many files, one broken: exit %d, %s%s", code, out, errs)
	}
	if code, _, _ := runCLI(t, "fmt", "-check", many); code != exitError {
		t.Errorf("fmt -check after formatting, with a broken file: exit %d", code)
	}
	if b, _ := os.ReadFile(want[0]); !strings.Contains(string(b), "  default = \"x\"") {
		t.Errorf("fmt did not format %s beside a broken file:\n%s", want[0], b)
	}
}

func TestGraph(t *testing.T) {
	project, tool := testdata(t)
	code, out, _ := runCLI(t, "graph", "-var", "tool="+tool, project)
	if code != exitOK || !strings.Contains(out, `"step.fetch" -> "step.count";`) || !strings.Contains(out, `"recipe.int-sort-good" -> "capability.int-sort" [style=dashed`) {
		t.Errorf("graph dot: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "graph", "-format", "mermaid", "-var", "tool="+tool, project)
	if code != exitOK || !strings.HasPrefix(out, "flowchart LR") || !strings.Contains(out, "-. provides .->") {
		t.Errorf("graph mermaid: exit %d\n%s", code, out)
	}
}

func TestHelpTeaches(t *testing.T) {
	for name := range commands {
		code, out, _ := runCLI(t, name, "-help")
		if code != exitOK || !strings.Contains(out, "Usage: foundry "+name) || !strings.Contains(out, "Exit codes") {
			t.Errorf("%s -help: exit %d\n%s", name, code, out)
		}
	}
}

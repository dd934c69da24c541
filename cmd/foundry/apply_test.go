package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// These tests drive the real binary through real sandboxes (runc), as a user would.

var foundryBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "foundry-bin-")
	if err != nil {
		panic(err)
	}
	foundryBin = filepath.Join(dir, "foundry")
	// The commands the tests run read no grants but those a test gives them: not the
	// developer's own (spec/grants.md §1).
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Unsetenv(grantsEnv)
	// The fuzz targets here never run the binary: a fuzz worker (go test -fuzz starts one
	// per core, and again after each crasher) does not build it, nor a fuzzing run that
	// runs no test (scripts/fuzz.sh: -run '^$'); each build costs seconds of fuzzing time.
	flag.Parse()
	if !fuzzOnly() {
		if out, err := exec.Command("go", "build", "-o", foundryBin, ".").CombinedOutput(); err != nil {
			panic("building foundry: " + err.Error() + "\n" + string(out))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fuzzOnly says whether this process only fuzzes: a fuzz worker, or a fuzzing run whose
// -test.run matches no test.
func fuzzOnly() bool {
	flagValue := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return flagValue("test.fuzzworker") == "true" || flagValue("test.fuzz") != "" && flagValue("test.run") == "^$"
}

// needSandbox skips (or, in CI, fails) when this machine cannot run sandboxes.
// needGoToolchain skips (or, under CI=true, fails) a test whose example seeds its image
// with the Go toolchain at /usr/local/go.
func needGoToolchain(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs the Go toolchain at /usr/local/go for the example's seed")
		}
		t.Skip("needs /usr/local/go")
	}
}

func needSandbox(t *testing.T) {
	t.Helper()
	var missing string
	if os.Geteuid() != 0 {
		missing = "root"
	} else if _, err := exec.LookPath("runc"); err != nil {
		missing = "runc (apt-get install runc)"
	} else if _, err := os.Stat("/bin/busybox"); err != nil {
		missing = "/bin/busybox (apt-get install busybox-static)"
	}
	if missing == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("this test needs %s, which CI must provide (scripts/deps.sh)", missing)
	}
	t.Skipf("needs %s", missing)
}

type applyRun struct {
	code     int
	stdout   string
	stderr   string
	executed []string // nodes that ran (node_done)
	cached   []string
	failed   []string
	skipped  []string
}

// apply runs `foundry apply -auto-approve -progress json` in dir with extra args and env.
func apply(t *testing.T, dir string, env []string, args ...string) applyRun {
	t.Helper()
	cmd := exec.Command(foundryBin, append([]string{"apply", "-auto-approve", "-executor", "runc", "-progress", "json"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := applyRun{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stderr))
	for sc.Scan() {
		var e struct{ Type, Node string }
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch e.Type {
		case "node_done":
			r.executed = append(r.executed, e.Node)
		case "node_cached":
			r.cached = append(r.cached, e.Node)
		case "node_failed":
			r.failed = append(r.failed, e.Node)
		case "node_skipped":
			r.skipped = append(r.skipped, e.Node)
		}
	}
	return r
}

func foundry(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(foundryBin, args...)
	cmd.Dir = dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func sameSet(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	m := map[string]bool{}
	for _, g := range got {
		m[g] = true
	}
	for _, w := range want {
		if !m[w] {
			return false
		}
	}
	return true
}

func helloProject(t *testing.T) string {
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "examples", "hello"), dir)
	return dir
}

func TestApplyRunsThenCachesThenRerunsExactlyDependents(t *testing.T) {
	needSandbox(t)
	dir := helloProject(t)
	all := []string{"step.words", "step.count", "step.top", "step.report"}

	r := apply(t, dir, nil)
	if r.code != 0 || !sameSet(r.executed, all...) {
		t.Fatalf("first apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	code, out, errs := foundry(t, dir, "output", "step.report", "/out/report.txt")
	if code != 0 || !strings.Contains(out, "the top 3:") || !strings.Contains(out, " the\n") {
		t.Fatalf("report: exit %d\n%s%s", code, out, errs)
	}

	r = apply(t, dir, nil)
	if r.code != 0 || len(r.executed) != 0 || !sameSet(r.cached, all...) {
		t.Fatalf("second apply must execute nothing: exit %d, executed %v, cached %v", r.code, r.executed, r.cached)
	}

	// A variable only top and report use: exactly they re-run.
	r = apply(t, dir, nil, "-var", "top=5")
	if r.code != 0 || !sameSet(r.executed, "step.top", "step.report") || !sameSet(r.cached, "step.words", "step.count") {
		t.Fatalf("-var top=5: executed %v, cached %v\n%s", r.executed, r.cached, r.stderr)
	}
	code, out, _ = foundry(t, dir, "explain", "-var", "top=5", "step.top")
	if code != 0 || !strings.Contains(out, "cached") {
		t.Errorf("explain after apply: %s", out)
	}
	code, out, _ = foundry(t, dir, "explain", "-var", "top=7", "step.top")
	if code != 0 || !strings.Contains(out, "will run") || !strings.Contains(out, "argv[2]") || !strings.Contains(out, "head -n 7") {
		t.Errorf("explain must name the changed argument:\n%s", out)
	}

	// Touching an input re-runs the step that reads it and everything downstream.
	if err := os.WriteFile(filepath.Join(dir, "text", "more.txt"), []byte("more words\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = apply(t, dir, nil)
	if r.code != 0 || !sameSet(r.executed, all...) {
		t.Fatalf("after touching an input: executed %v", r.executed)
	}
}

const failingProject = `
seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/echo" = "busybox", "/bin/cat" = "busybox" }
  }
  env = { PATH = "/bin" }
}
step "ok" {
  image   = seed.bb
  run     = ["sh", "-c", "echo fine > /tmp/scratch && cat /tmp/scratch > /out/a"]
  outputs = ["/out/a"]
}
step "bad" {
  image   = seed.bb
  mounts  = { "/in/a" = step.ok.output["/out/a"] }
  run     = ["sh", "-c", "echo working; echo boom >&2; exit 3"]
  outputs = ["/out/b"]
}
step "after" {
  image   = seed.bb
  mounts  = { "/in/b" = step.bad.output["/out/b"] }
  run     = ["sh", "-c", "echo never > /out/c"]
  outputs = ["/out/c"]
}
step "lazy" {
  image   = seed.bb
  run     = ["sh", "-c", "echo no output"]
  outputs = ["/out/missing"]
}
`

func TestApplyFailureIsReportedNotCached(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(failingProject), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil)
	if r.code != exitError {
		t.Fatalf("apply with a failing step exited %d", r.code)
	}
	if !sameSet(r.failed, "step.bad", "step.lazy") || !sameSet(r.skipped, "step.after") || !sameSet(r.executed, "step.ok") {
		t.Fatalf("executed %v, failed %v, skipped %v", r.executed, r.failed, r.skipped)
	}
	for _, want := range []string{"step.bad: exited with code 3", "| boom", "foundry logs step.bad", "command: sh -c 'echo working; echo boom >&2; exit 3'",
		"declared output /out/missing was not produced"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("failure report lacks %q:\n%s", want, r.stderr)
		}
	}
	code, out, _ := foundry(t, dir, "logs", "step.bad")
	if code != 0 || !strings.Contains(out, "working") || !strings.Contains(out, "boom") {
		t.Errorf("logs of the failed step: exit %d\n%s", code, out)
	}
	// A failure is never cached: the next apply runs the failing steps again, not the good one.
	r = apply(t, dir, nil)
	if !sameSet(r.failed, "step.bad", "step.lazy") || !sameSet(r.cached, "step.ok") || len(r.executed) != 0 {
		t.Fatalf("second apply: executed %v, cached %v, failed %v", r.executed, r.cached, r.failed)
	}
}

func TestApplyRefusesStaleSavedPlan(t *testing.T) {
	needSandbox(t)
	dir := helloProject(t)
	if code, _, errs := foundry(t, dir, "plan", "-out", "saved.plan", "-var", "top=2"); code != 0 {
		t.Fatal(errs)
	}
	if err := os.WriteFile(filepath.Join(dir, "text", "fox.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil, "saved.plan")
	if r.code != exitError || !strings.Contains(r.stderr, "is stale") || !strings.Contains(r.stderr, "input project_dir text changed") || len(r.executed) != 0 {
		t.Fatalf("stale plan: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	// A fresh saved plan applies, with the variables it was made with.
	if code, _, errs := foundry(t, dir, "plan", "-out", "saved.plan", "-var", "top=2"); code != 0 {
		t.Fatal(errs)
	}
	r = apply(t, dir, nil, "saved.plan")
	if r.code != 0 || len(r.executed) != 4 {
		t.Fatalf("fresh saved plan: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	_, out, _ := foundry(t, dir, "output", "step.report", "/out/report.txt")
	if !strings.Contains(out, "the top 2:") {
		t.Errorf("the saved plan's -var top=2 was not applied:\n%s", out)
	}
}

// A stale saved plan is refused before anything is written: no state directory where
// there was none, and where there is one, not a byte of it changed (no run, no lock file,
// no stat cache entry for the changed input).
func TestStaleSavedPlanWritesNothing(t *testing.T) {
	needSandbox(t)
	dir := helloProject(t)
	state := filepath.Join(dir, ".foundry")
	// stale saves a plan, changes an input and applies the plan, which must be refused;
	// it returns the state directory just before and just after that apply.
	stale := func() (before, after map[string]string, runsBefore, runsAfter string) {
		t.Helper()
		if code, _, errs := foundry(t, dir, "plan", "-out", "saved.plan"); code != 0 {
			t.Fatal(errs)
		}
		f := filepath.Join(dir, "text", "fox.txt")
		b, _ := os.ReadFile(f)
		if err := os.WriteFile(f, append(b, "more\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		// Past the stat cache's racy window, loading the project would remember the inputs'
		// digests: a write the refusal must not make either.
		time.Sleep(2100 * time.Millisecond)
		_, runsBefore, _ = foundry(t, dir, "status", "-json")
		before = snapshot(t, state)
		r := apply(t, dir, nil, "saved.plan")
		after = snapshot(t, state)
		_, runsAfter, _ = foundry(t, dir, "status", "-json")
		if r.code != exitError || !strings.Contains(r.stderr, "the saved plan saved.plan is stale; nothing was run or written") || len(r.executed) != 0 {
			t.Fatalf("stale plan: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
		}
		return before, after, runsBefore, runsAfter
	}
	if _, after, _, _ := stale(); len(after) != 0 {
		t.Fatalf("refusing a stale plan in a project never applied created .foundry: %v", after)
	}

	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	before, after, runsBefore, runsAfter := stale()
	if len(before) == 0 {
		t.Fatal("no state after an apply")
	}
	for p, h := range after {
		if before[p] != h {
			t.Errorf("refusing a stale plan changed .foundry/%s", p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("refusing a stale plan removed .foundry/%s", p)
		}
	}
	if runsAfter != runsBefore {
		t.Errorf("refusing a stale plan changed the runs:\n%s\nbefore:\n%s", runsAfter, runsBefore)
	}
}

// snapshot maps every path under root to what it is: a directory, a link's target, or a
// file's SHA-256.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if _, err := os.Lstat(root); os.IsNotExist(err) {
		return out
	}
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case info.IsDir():
			out[rel] = "dir"
		case info.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(digest.FromBytes(b))
		default:
			out[rel] = info.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gc removes what no cached result needs and keeps every cached result usable.
func TestGCKeepsCachedResults(t *testing.T) {
	needSandbox(t)
	dir := helloProject(t)
	if r := apply(t, dir, nil); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	if r := apply(t, dir, nil, "-var", "top=4"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	// An orphan blob: stored, but named by no record.
	orphan := filepath.Join(dir, ".foundry", "blobs", "sha256", strings.Repeat("ab", 32))
	if err := os.WriteFile(orphan, []byte("orphan"), 0o444); err != nil {
		t.Fatal(err)
	}
	code, out, errs := foundry(t, dir, "gc", "-min-age", "0", "-keep-runs", "1", "-dry-run")
	if code != 0 || !strings.Contains(out, "Would delete the records of 1 run(s) older than the newest 1.") {
		t.Fatalf("gc -dry-run: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = foundry(t, dir, "gc", "-min-age", "0", "-keep-runs", "1")
	if code != 0 || !strings.Contains(out, "Deleted") || !strings.Contains(out, "Deleted the records of 1 run(s) older than the newest 1.") {
		t.Fatalf("gc: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = foundry(t, dir, "status", "-json")
	var st struct{ Runs []json.RawMessage }
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Runs) != 1 {
		t.Fatalf("status after gc -keep-runs 1: exit %d, want one run\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(orphan); err == nil {
		t.Error("gc kept a blob no record names")
	}
	for _, top := range []string{"3", "4"} {
		r := apply(t, dir, nil, "-var", "top="+top)
		if r.code != 0 || len(r.executed) != 0 || len(r.cached) != 4 {
			t.Errorf("after gc, -var top=%s: executed %v, cached %v", top, r.executed, r.cached)
		}
	}
}

// The default executor: containerd, when its socket answers (scripts/containerd.sh starts a
// private one for tests and CI).
func TestApplyWithContainerd(t *testing.T) {
	needSandbox(t)
	addr := os.Getenv("FOUNDRY_CONTAINERD_ADDRESS")
	if addr == "" {
		addr = defaultContainerdAddress
	}
	if !socketAnswers(addr) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("containerd does not answer on %s; scripts/containerd.sh start must run first", addr)
		}
		t.Skipf("containerd does not answer on %s (scripts/containerd.sh start)", addr)
	}
	dir := helloProject(t)
	cmd := exec.Command(foundryBin, "apply", "-auto-approve", "-progress", "plain")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("apply with the default executor: %v\n%s", err, out)
	}
	_, rep, _ := foundry(t, dir, "output", "step.report", "/out/report.txt")
	if !strings.Contains(rep, "the top 3:") {
		t.Fatalf("report:\n%s", rep)
	}
	// The provenance names the executor that ran the steps.
	envs, _ := filepath.Glob(filepath.Join(dir, ".foundry", "attestations", "*.intoto.json"))
	if len(envs) != 4 {
		t.Fatalf("%d attestations, want 4", len(envs))
	}
	b, _ := os.ReadFile(envs[0])
	var env struct{ Payload string }
	json.Unmarshal(b, &env)
	payload, _ := base64.StdEncoding.DecodeString(env.Payload)
	if !strings.Contains(string(payload), "https://foundry.dev/builder/containerd@v1?isolation=container") {
		t.Errorf("provenance does not name the containerd builder:\n%s", payload)
	}
}

// The runtime check behind the compiler's: a copy of a sealed case under another name is
// refused when a builder step would mount it.
func TestSealedCopyRefusedAtRuntime(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	src := failingProject[:strings.Index(failingProject, "step \"bad\"")] + `
capability "c" {
  interface "cli" { entrypoint = ["/bin/c"] }
  suite "sealed" { cases = "sealed/*.json" }
}
step "peek" {
  image   = seed.bb
  mounts  = { "/src" = dir("src") }
  run     = ["sh", "-c", "cat /src/* > /out/p"]
  outputs = ["/out/p"]
}
`
	sealed := `{"input": [2, 1], "output": [1, 2]}`
	os.MkdirAll(filepath.Join(dir, "sealed"), 0o755)
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "sealed", "1.json"), []byte(sealed), 0o644)
	os.WriteFile(filepath.Join(dir, "src", "innocent.json"), []byte(sealed), 0o644)
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644)
	r := apply(t, dir, nil)
	// The refusal does not say which sealed case matched: that would disclose it.
	if r.code != exitError || !sameSet(r.failed, "step.peek") || !strings.Contains(r.stderr, "has the content of a sealed case") ||
		strings.Contains(r.stderr, "sealed/1.json") {
		t.Fatalf("exit %d, failed %v\n%s", r.code, r.failed, r.stderr)
	}
}

// A quarantined input is refused by plan and apply, and what is built from it is reported
// as affected; apply then exits non-zero.
func TestQuarantinedInputRefused(t *testing.T) {
	needSandbox(t)
	dir := helloProject(t)
	_, out, _ := foundry(t, dir, "plan", "-json")
	p := decodePlan(t, out)
	var text digest.Digest
	for _, in := range p.Inputs {
		if in.Path == "text" {
			text = in.Digest
		}
	}
	// A plan saved before the quarantine must not get around it.
	if code, _, errs := foundry(t, dir, "plan", "-out", "before.plan"); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := foundry(t, dir, "quarantine", "add", "-reason", "leaked secret", string(text)); code != 0 {
		t.Fatalf("quarantine add: %s", errs)
	}
	if r := apply(t, dir, nil, "before.plan"); r.code != exitError || len(r.executed) != 0 {
		t.Fatalf("a saved plan made before the quarantine ran: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	_, out, _ = foundry(t, dir, "plan")
	if !strings.Contains(out, "quarantined: "+string(text)[:19]+" (leaked secret)") || !strings.Contains(out, "affected: built from step.words, which is quarantined") {
		t.Errorf("plan does not report the quarantine:\n%s", out)
	}
	r := apply(t, dir, nil)
	if r.code != exitError || len(r.executed) != 0 || !strings.Contains(r.stderr, "could not be produced") {
		t.Fatalf("apply with a quarantined input: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
}

// A result the local executor produced on the host does not settle a step of a sandboxed
// apply: the step runs again, in the sandbox, and says why; its record then replaces the
// unsandboxed one. A sandboxed result settles an unsandboxed apply.
func TestUnsandboxedResultDoesNotSatisfyASandboxedApply(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	// The local executor gives the host path of /out in $FOUNDRY_OUT; the sandbox has /out.
	src := `
seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox" }
  }
  env = { PATH = "/bin" }
}
step "s" {
  image   = seed.bb
  run     = ["sh", "-c", "echo hi > $${FOUNDRY_OUT:-/out}/o"]
  outputs = ["/out/o"]
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	local := []string{"-executor", "local", "-unsandboxed"}
	if r := apply(t, dir, nil, local...); r.code != 0 || !sameSet(r.executed, "step.s") {
		t.Fatalf("local apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	if r := apply(t, dir, nil, local...); r.code != 0 || !sameSet(r.cached, "step.s") {
		t.Fatalf("a local apply takes the local result: exit %d, cached %v\n%s", r.code, r.cached, r.stderr)
	}
	r := apply(t, dir, nil) // runc
	if r.code != 0 || !sameSet(r.executed, "step.s") || len(r.cached) != 0 {
		t.Fatalf("a sandboxed apply must run the step again: exit %d, executed %v, cached %v\n%s", r.code, r.executed, r.cached, r.stderr)
	}
	if !strings.Contains(r.stderr, `"message":"its cached result ran unsandboxed`) {
		t.Errorf("the run does not say why the step ran again:\n%s", r.stderr)
	}
	for _, args := range [][]string{nil, local} {
		if r := apply(t, dir, nil, args...); r.code != 0 || !sameSet(r.cached, "step.s") || len(r.executed) != 0 {
			t.Fatalf("apply %v after the sandboxed run: exit %d, executed %v, cached %v\n%s", args, r.code, r.executed, r.cached, r.stderr)
		}
	}
	if code, out, errs := foundry(t, dir, "output", "step.s", "/out/o"); code != 0 || out != "hi\n" {
		t.Errorf("output: exit %d %q %s", code, out, errs)
	}
}

// An apply connects to its executor only when something is about to run: with every step
// cached it succeeds even when the containerd it was told to use is not there; with work to
// do it fails at once, naming the socket.
func TestCachedApplyNeedsNoExecutor(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(napProject), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := apply(t, dir, nil, "-var", "nap=0"); r.code != 0 || len(r.executed) != 2 {
		t.Fatalf("first apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	missing := filepath.Join(t.TempDir(), "containerd.sock")
	// A socket file nobody listens on: a stopped daemon.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	for _, c := range []struct{ sock, says string }{
		{missing, "containerd executor: no socket at " + missing},
		{stale, "containerd executor: nothing answers at " + stale},
	} {
		r := apply(t, dir, nil, "-executor", "containerd", "-containerd-address", c.sock, "-var", "nap=0")
		if r.code != 0 || !sameSet(r.cached, "step.first", "step.nap") {
			t.Errorf("a fully cached apply with %s: exit %d, cached %v\n%s", c.sock, r.code, r.cached, r.stderr)
		}
		r = apply(t, dir, nil, "-executor", "containerd", "-containerd-address", c.sock, "-var", "nap=1")
		if r.code != exitError || len(r.executed) != 0 || !strings.Contains(r.stderr, "foundry apply: cannot run step.nap: "+c.says) {
			t.Errorf("an apply with work and containerd at %s: exit %d, executed %v, want exit 1 naming the socket\n%s", c.sock, r.code, r.executed, r.stderr)
		}
	}
}

// The leftovers of a killed apply are removed before the next container is created, not
// before a fully cached apply, which leaves them (and the dead run's scratch directory that
// marks them) for the next apply that runs something. The killed run is recorded as
// interrupted at once.
func TestCachedApplyLeavesCleanupToTheNextRun(t *testing.T) {
	needSandbox(t)
	before := map[string]bool{}
	for _, id := range runcContainers(t) {
		before[id] = true
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(napProject), 0o644); err != nil {
		t.Fatal(err)
	}
	ra := startApply(t, dir, "runc")
	run := ra.waitStarted(t, "step.nap")
	ids := newContainers(t, runcContainers, before, "-step-nap-")
	ra.cmd.Process.Signal(syscall.SIGKILL)
	ra.wait(t)

	// Without step.nap everything is cached: no executor, so the container stays.
	onlyFirst := napProject[:strings.Index(napProject, `step "nap"`)]
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(onlyFirst), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil, "-executor", "containerd", "-containerd-address", filepath.Join(t.TempDir(), "none.sock"))
	if r.code != 0 || !sameSet(r.cached, "step.first") {
		t.Fatalf("cached apply after the kill: exit %d, cached %v\n%s", r.code, r.cached, r.stderr)
	}
	_, out, _ := foundry(t, dir, "status", "-json", "-run", run)
	if !strings.Contains(out, `"interrupted"`) {
		t.Errorf("the killed run is not interrupted after the next apply:\n%s", out)
	}
	if left := runcContainers(t); !containsAll(left, ids) {
		t.Fatalf("a fully cached apply removed the killed run's container: want %v among %v", ids, left)
	}
	if _, err := os.Stat(filepath.Join(dir, ".foundry", "runs", run)); err != nil {
		t.Fatalf("the killed run's scratch directory, the mark of its leftovers, is gone: %v", err)
	}

	// With work to do, the leftovers go before the step runs.
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(napProject), 0o644); err != nil {
		t.Fatal(err)
	}
	r = apply(t, dir, nil, "-var", "nap=0")
	if r.code != 0 || !sameSet(r.executed, "step.nap") {
		t.Fatalf("apply with work: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	assertGone(t, ids)
	assertClean(t, dir)
}

func containsAll(xs, want []string) bool {
	for _, w := range want {
		if !contains(xs, w) {
			return false
		}
	}
	return true
}

// A product's check passes or fails by its exit status: it makes nothing, so it has no
// provenance of its own, and a pass is cached like any step's.
func TestProductChecksPassAndFail(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	src := `
seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/test" = "busybox", "/bin/grep" = "busybox" }
  }
  env = { PATH = "/bin" }
}
product "p" {
  step "make" {
    image   = seed.bb
    run     = ["sh", "-c", "echo hi > /out/r"]
    outputs = ["/out/r"]
  }
  check "nonempty" {
    image  = seed.bb
    mounts = { "/r" = step.make.output["/out/r"] }
    run    = ["test", "-s", "/r"]
  }
  check "says" {
    image  = seed.bb
    mounts = { "/r" = step.make.output["/out/r"] }
    run    = ["grep", "-q", "WORD", "/r"]
  }
}
`
	write := func(word string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(strings.ReplaceAll(src, "WORD", word)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("hi")
	r := apply(t, dir, nil)
	if r.code != 0 || !sameSet(r.executed, "product.p.step.make", "product.p.check.nonempty", "product.p.check.says") {
		t.Fatalf("passing checks: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	if r = apply(t, dir, nil); r.code != 0 || len(r.executed) != 0 || len(r.cached) != 3 {
		t.Fatalf("again: exit %d, executed %v, cached %v", r.code, r.executed, r.cached)
	}
	write("bye")
	r = apply(t, dir, nil)
	if r.code == 0 || !sameSet(r.failed, "product.p.check.says") || !sameSet(r.cached, "product.p.step.make", "product.p.check.nonempty") ||
		!strings.Contains(r.stderr, "product.p.check.says: exited with code 1") {
		t.Fatalf("a failing check: exit %d, failed %v, cached %v\n%s", r.code, r.failed, r.cached, r.stderr)
	}
}

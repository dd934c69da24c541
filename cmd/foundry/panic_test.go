package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/provenance"
)

// registerForTest adds a command for one test; production code has no way to panic on
// purpose, so the tests bring their own.
func registerForTest(t *testing.T, name string, fn func(env *cliEnv, args []string) int) {
	t.Helper()
	register(&command{name: name, summary: "test only", usage: "foundry " + name, help: "Exit codes: whatever the test says.",
		setup: func(*flag.FlagSet) func(*cliEnv, []string) int { return fn }})
	t.Cleanup(func() { delete(commands, name) })
}

// A panic in a command exits 4 with one line naming the panic and one saying where to
// report it; the stack only with FOUNDRY_DEBUG.
func TestPanicExitsInternal(t *testing.T) {
	registerForTest(t, "test-panic", func(*cliEnv, []string) int {
		var m map[string]int
		//lint:ignore SA5000 the nil map is the bug this test needs
		m["x"] = 1 // a nil map: the kind of bug a command may have
		return exitOK
	})
	t.Setenv("FOUNDRY_DEBUG", "")
	code, out, errs := runCLI(t, "test-panic")
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code != exitInternal || out != "" || len(lines) != 2 {
		t.Fatalf("a panic: exit %d (want %d), stdout %q, stderr:\n%s", code, exitInternal, out, errs)
	}
	if lines[0] != "foundry test-panic: internal error: panic: assignment to entry in nil map" {
		t.Errorf("first line names the command and the panic value; got %q", lines[0])
	}
	if !strings.Contains(lines[1], reportURL) || !strings.Contains(lines[1], "FOUNDRY_DEBUG=1") {
		t.Errorf("second line must say where to report and how to get the stack; got %q", lines[1])
	}

	t.Setenv("FOUNDRY_DEBUG", "1")
	code, _, errs = runCLI(t, "test-panic")
	if code != exitInternal || !strings.Contains(errs, "goroutine ") || !strings.Contains(errs, "panic_test.go") {
		t.Errorf("with FOUNDRY_DEBUG the stack of the panic is printed: exit %d\n%s", code, errs)
	}
}

// panickingExecutor is an executor with a bug: Run panics, on the goroutine the apply
// started for the step.
type panickingExecutor struct{}

func (panickingExecutor) Name() string      { return "runc" }
func (panickingExecutor) Isolation() string { return executors.IsolationContainer }
func (panickingExecutor) Run(context.Context, *executors.Action) (*executors.Result, error) {
	var r *executors.Result
	return r, executorBug(r)
}
func (panickingExecutor) Cleanup(context.Context, string) error { return nil }
func (panickingExecutor) Close() error                          { return nil }

func executorBug(r *executors.Result) error {
	_ = r.ExitCode // nil pointer dereference
	return nil
}

// A panic on a goroutine an apply started (here in an executor running a step) is carried
// back to the command's goroutine: exit 4, the node it was settling named, and with
// FOUNDRY_DEBUG the stack of the goroutine where it happened.
func TestPanicInAStepGoroutineExitsInternal(t *testing.T) {
	registerForTest(t, "test-apply-panicking-executor", func(env *cliEnv, args []string) int {
		var v varFlags
		v.register(flag.NewFlagSet("", flag.ContinueOnError))
		g, _ := loadGraph(env, args[0], &v, false)
		if g == nil {
			return exitError
		}
		ws, err := workspace.Open(args[0])
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		planned, err := plan.ForWorkspace(context.Background(), ws, g, nil, nil, plan.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		signer, err := provenance.NewSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Apply(context.Background(), ws, g, planned, run.Options{Executor: panickingExecutor{}, Signer: signer}); err != nil {
			t.Fatalf("the apply returned instead of panicking: %v", err)
		}
		return exitOK
	})
	dir := t.TempDir()
	tool := filepath.Join(dir, "tool")
	os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(`
seed "b" {
  layer { files = { "/bin/sh" = host_file("`+tool+`") } }
}
step "one" {
  image   = seed.b
  run     = ["sh"]
  outputs = ["/out/x"]
}
`), 0o644)
	t.Setenv("FOUNDRY_DEBUG", "")
	code, _, errs := runCLI(t, "test-apply-panicking-executor", dir)
	if code != exitInternal || !strings.HasPrefix(errs, "foundry test-apply-panicking-executor: internal error: panic while settling step.one: runtime error: invalid memory address or nil pointer dereference\n") {
		t.Fatalf("a panic in a step's goroutine: exit %d (want %d)\n%s", code, exitInternal, errs)
	}
	t.Setenv("FOUNDRY_DEBUG", "1")
	code, _, errs = runCLI(t, "test-apply-panicking-executor", dir)
	if code != exitInternal || !strings.Contains(errs, "foundry.executorBug") || !strings.Contains(errs, "run.(*runner).execute") {
		t.Errorf("with FOUNDRY_DEBUG the stack is the one where the executor panicked: exit %d\n%s", code, errs)
	}
}

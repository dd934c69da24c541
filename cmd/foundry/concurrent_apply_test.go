package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
)

// queueProject is a seed and four steps, two of which sleep, so that applies started together
// overlap while the first one runs them.
const queueProject = `
project "queue" {}

seed "busybox" {
  layer {
    files = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "cat", "echo", "sleep"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}

step "a" {
  image   = seed.busybox
  run     = ["sh", "-c", "sleep 0.3; echo a > /out/a.txt"]
  outputs = ["/out/a.txt"]
}

step "b" {
  image   = seed.busybox
  mounts  = { "/in/a.txt" = step.a.output["/out/a.txt"] }
  run     = ["sh", "-c", "sleep 0.3; cat /in/a.txt > /out/b.txt; echo b >> /out/b.txt"]
  outputs = ["/out/b.txt"]
}

step "c" {
  image   = seed.busybox
  mounts  = { "/in/a.txt" = step.a.output["/out/a.txt"] }
  run     = ["sh", "-c", "cat /in/a.txt > /out/c.txt; echo c >> /out/c.txt"]
  outputs = ["/out/c.txt"]
}

step "d" {
  image   = seed.busybox
  mounts  = { "/in/b.txt" = step.b.output["/out/b.txt"], "/in/c.txt" = step.c.output["/out/c.txt"] }
  run     = ["sh", "-c", "cat /in/b.txt /in/c.txt > /out/d.txt"]
  outputs = ["/out/d.txt"]
}
`

func queueDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(queueProject), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var applySummaryRE = regexp.MustCompile(`(?m)^Apply complete: (\d+) executed, (\d+) cached, 0 failed, 0 skipped`)

const waitingMsg = "foundry apply: waiting for another apply of this project to finish (pid "

// Issue 22: twenty applies of one project started at once, as separate processes, queue on
// the apply lock instead of failing or trampling each other: one runs the steps, the others
// find them cached, and the store and state are consistent afterwards.
func TestConcurrentAppliesQueueAndLeaveConsistentState(t *testing.T) {
	needSandbox(t)
	dir := queueDir(t)
	const n = 20
	type result struct {
		code           int
		out, errs      string
		executed, hits int
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(foundryBin, "apply", "-auto-approve", "-progress", "plain", "-executor", "runc")
			cmd.Dir = dir
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			<-start
			err := cmd.Run()
			r := result{out: out.String(), errs: errb.String()}
			if ee, ok := err.(*exec.ExitError); ok {
				r.code = ee.ExitCode()
			} else if err != nil {
				r.code, r.errs = -1, err.Error()
			}
			if m := applySummaryRE.FindStringSubmatch(r.out); m != nil {
				r.executed, _ = strconv.Atoi(m[1])
				r.hits, _ = strconv.Atoi(m[2])
			} else {
				r.executed = -1
			}
			results[i] = r
		}()
	}
	close(start)
	wg.Wait()

	ran, waited := 0, 0
	for i, r := range results {
		if r.code != 0 || r.executed < 0 {
			t.Fatalf("apply %d: exit %d, no \"Apply complete\" line\nstdout:\n%s\nstderr:\n%s", i, r.code, r.out, r.errs)
		}
		switch {
		case r.executed == 4 && r.hits == 0:
			ran++
		case r.executed == 0 && r.hits == 4:
		default:
			t.Errorf("apply %d: %d executed, %d cached; want all 4 one way or the other\n%s", i, r.executed, r.hits, r.out)
		}
		if c := strings.Count(r.errs, waitingMsg); c > 1 {
			t.Errorf("apply %d said it was waiting %d times, want at most once:\n%s", i, c, r.errs)
		} else if c == 1 {
			waited++
		}
	}
	if ran != 1 {
		t.Errorf("%d applies executed the steps, want exactly 1", ran)
	}
	if waited == 0 {
		t.Error("no apply said it was waiting for another")
	}
	t.Logf("%d of %d applies waited for the lock", waited, n)

	// The state: an intact database with twenty finished, successful runs.
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var integrity string
	if err := ws.State.SQL().QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Errorf("PRAGMA integrity_check = %q, %v; want ok", integrity, err)
	}
	runs, err := ws.State.Runs(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != n {
		t.Errorf("%d runs recorded, want %d", len(runs), n)
	}
	for _, r := range runs {
		if r.Status != state.RunSucceeded || r.Finished.IsZero() {
			t.Errorf("run %s: status %s, finished %v; want succeeded and finished", r.ID, r.Status, r.Finished)
		}
	}
	// The store: every blob is whole, named by the digest of its bytes.
	blobs := 0
	err = ws.Store.Walk(func(d digest.Digest, _ int64, _ time.Time) error {
		blobs++
		if err := ws.Store.Verify(d); err != nil {
			t.Errorf("blob %s: %v", d, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if blobs == 0 {
		t.Error("the store holds no blob")
	}
	ws.Close()

	if code, out, errs := foundry(t, dir, "status"); code != 0 {
		t.Errorf("status: exit %d\n%s%s", code, out, errs)
	}
	// gc finds every root a record names (no record points at a missing blob).
	if code, out, errs := foundry(t, dir, "gc", "-dry-run", "-json"); code != 0 || !strings.Contains(out, `"MissingRoots": 0`) {
		t.Errorf("gc -dry-run: exit %d, want 0 missing roots\n%s%s", code, out, errs)
	}
	if code, out, errs := foundry(t, dir, "plan", "-detailed-exitcode"); code != 0 {
		t.Errorf("plan -detailed-exitcode after the applies: exit %d, want 0 (nothing to run)\n%s%s", code, out, errs)
	}
}

// -lock-timeout gives up, with nothing run, while another process holds the lock, and names
// the pid that process wrote into the lock file; SIGINT ends the wait the same way.
func TestApplyLockTimeoutAndInterrupt(t *testing.T) {
	needSandbox(t)
	dir := queueDir(t)
	if err := os.MkdirAll(filepath.Join(dir, ".foundry"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".foundry", "apply.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	fmt.Fprintf(f, "pid 4242\nsince %s\n", since.Format(time.RFC3339Nano))

	began := time.Now()
	r := apply(t, dir, nil, "-lock-timeout", "300ms")
	took := time.Since(began)
	if r.code != 1 {
		t.Fatalf("apply -lock-timeout 300ms under a held lock: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantWait := waitingMsg + "4242, since " + since.Format("15:04:05") + ")…"
	if !strings.Contains(r.stderr, wantWait) {
		t.Errorf("stderr does not say %q:\n%s", wantWait, r.stderr)
	}
	if !regexp.MustCompile(`foundry apply: another apply of this project has held the lock for 1m0\.\d+s \(pid 4242\); nothing was run\.`).MatchString(r.stderr) {
		t.Errorf("stderr does not say the lock timed out:\n%s", r.stderr)
	}
	if len(r.executed)+len(r.cached) != 0 || took < 300*time.Millisecond {
		t.Errorf("apply ran %v %v after %s; want nothing, after at least 300ms", r.executed, r.cached, took)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if runs, err := ws.State.Runs(context.Background(), 10); err != nil || len(runs) != 0 {
		t.Errorf("runs after a timed-out apply: %v, %v; want none", runs, err)
	}

	// SIGINT while waiting (without a timeout) stops the wait, with nothing run.
	cmd := exec.Command(foundryBin, "apply", "-auto-approve", "-progress", "plain", "-executor", "runc")
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		said.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), waitingMsg) {
			cmd.Process.Signal(syscall.SIGINT)
			break
		}
	}
	rest, _ := io.ReadAll(stderr)
	said.Write(rest)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 ||
		!strings.Contains(said.String(), "foundry apply: interrupted by SIGINT while waiting for another apply of this project to finish; nothing was run.") {
		t.Errorf("SIGINT while waiting: %v, want exit 1 saying nothing was run\n%s", err, said.String())
	}
	if runs, err := ws.State.Runs(context.Background(), 10); err != nil || len(runs) != 0 {
		t.Errorf("runs after an interrupted wait: %v, %v; want none", runs, err)
	}

	// Released, the same apply goes ahead.
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if r := apply(t, dir, nil, "-lock-timeout", "300ms"); r.code != 0 || len(r.executed) != 4 {
		t.Errorf("apply after the lock was released: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
}

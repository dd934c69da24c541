package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ctrd "github.com/containerd/containerd"
	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/snapshots"

	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/executors/containerd"
)

// napProject has a quick step and, after it, one that sleeps $NAP seconds.
const napProject = `
seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/sleep" = "busybox", "/bin/cat" = "busybox", "/bin/echo" = "busybox" }
  }
  env = { PATH = "/bin" }
}
variable "nap" { default = "30" }
step "first" {
  image   = seed.bb
  run     = ["sh", "-c", "echo one > /out/a"]
  outputs = ["/out/a"]
}
step "nap" {
  image   = seed.bb
  mounts  = { "/in/a" = step.first.output["/out/a"] }
  env     = { NAP = var.nap }
  run     = ["sh", "-c", "sleep $${NAP}; cat /in/a > /out/b"]
  outputs = ["/out/b"]
}
`

// runningApply is an apply started in the background, in its own process group (as a shell
// starts a job), with its -progress json events read from stderr.
type runningApply struct {
	cmd    *exec.Cmd
	stderr io.ReadCloser
	mu     sync.Mutex
	lines  []string
	events chan struct{ Type, Node, Run string }
	read   chan struct{} // closed when stderr is exhausted
}

func startApply(t *testing.T, dir, executor string, args ...string) *runningApply {
	t.Helper()
	cmd := exec.Command(foundryBin, append([]string{"apply", "-auto-approve", "-executor", executor, "-progress", "json"}, args...)...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ra := &runningApply{cmd: cmd, stderr: stderr, events: make(chan struct{ Type, Node, Run string }, 100), read: make(chan struct{})}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	})
	go func() {
		defer close(ra.read)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			ra.mu.Lock()
			ra.lines = append(ra.lines, sc.Text())
			ra.mu.Unlock()
			var e struct{ Type, Node, Run string }
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				select {
				case ra.events <- e:
				default:
				}
			}
		}
	}()
	return ra
}

// waitStarted waits for node's node_started event and returns the run's ID.
func (ra *runningApply) waitStarted(t *testing.T, node string) string {
	t.Helper()
	run := ""
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e := <-ra.events:
			if e.Type == "run_started" {
				run = e.Run
			}
			if e.Type == "node_started" && e.Node == node {
				return run
			}
		case <-deadline:
			t.Fatalf("%s never started:\n%s", node, ra.stderrText())
		}
	}
}

func (ra *runningApply) stderrText() string {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return strings.Join(ra.lines, "\n")
}

// wait waits for the apply to exit and returns its exit code (-1: killed by a signal).
func (ra *runningApply) wait(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		<-ra.read
		done <- ra.cmd.Wait()
	}()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(90 * time.Second):
		t.Fatalf("apply did not exit 90s after the signal:\n%s", ra.stderrText())
	}
	return 0
}

// newContainers waits until a container (of list) whose ID contains part and which is not
// in before exists, and returns those.
func newContainers(t *testing.T, list func(*testing.T) []string, before map[string]bool, part string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ids []string
		for _, id := range list(t) {
			if !before[id] && strings.Contains(id, part) {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			t.Cleanup(func() { removeContainers(ids) })
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("no container %s* appeared", part)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeContainers removes what a failed test may have left of the given runc containers, so
// that it does not outlive the test on a shared machine.
func removeContainers(ids []string) {
	for _, id := range ids {
		exec.Command("runc", "--root", "/run/foundry-runc/state", "kill", "--all", id, "KILL").Run()
		exec.Command("runc", "--root", "/run/foundry-runc/state", "delete", "--force", id).Run()
		bundle := "/run/foundry-runc/bundles/" + id
		syscall.Unmount(bundle+"/rootfs", syscall.MNT_DETACH)
		os.RemoveAll(bundle)
	}
	if socketAnswers(containerdAddress()) {
		if e, err := containerd.New(context.Background(), containerd.Options{Address: containerdAddress()}); err == nil {
			for _, id := range ids {
				e.Cleanup(context.Background(), id)
			}
			e.Close()
		}
	}
}

// containerdContainers lists the IDs of the foundry containers, tasks and snapshots that
// containerd holds in Foundry's namespace.
func containerdContainers(t *testing.T) []string {
	t.Helper()
	c, err := ctrd.New(containerdAddress(), ctrd.WithDefaultNamespace(containerd.DefaultNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := namespaces.WithNamespace(context.Background(), containerd.DefaultNamespace)
	var ids []string
	cs, err := c.Containers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range cs {
		ids = append(ids, x.ID())
	}
	ts, err := c.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts.Tasks {
		ids = append(ids, x.ID)
	}
	err = c.SnapshotService("overlayfs").Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if strings.HasPrefix(info.Name, run.ContainerPrefix) {
			ids = append(ids, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func containerdAddress() string {
	if a := os.Getenv("FOUNDRY_CONTAINERD_ADDRESS"); a != "" {
		return a
	}
	return defaultContainerdAddress
}

// needContainerd skips (or, in CI, fails) when the private containerd does not answer.
func needContainerd(t *testing.T) {
	t.Helper()
	if socketAnswers(containerdAddress()) {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("containerd does not answer on %s; scripts/containerd.sh start must run first", containerdAddress())
	}
	t.Skipf("containerd does not answer on %s (scripts/containerd.sh start)", containerdAddress())
}

// assertGone checks that nothing of the given containers is left: runc state, bundle,
// overlay mount, process, containerd container, task or snapshot. Once a task is deleted,
// containerd's own cleanup (`containerd-shim-runc-v2 … delete`, `runc delete`) can still be
// on its way out for a moment, so what is there is looked at again for a few seconds.
func assertGone(t *testing.T, ids []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := leftoversOf(t, ids)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, l := range left {
				t.Error(l)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func leftoversOf(t *testing.T, ids []string) []string {
	t.Helper()
	var left []string
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	procs := map[string]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		if b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline")); err == nil {
			procs[string(b)] = true
		}
	}
	var ctrdLeft []string
	if socketAnswers(containerdAddress()) {
		ctrdLeft = containerdContainers(t)
	}
	for _, id := range ids {
		for _, l := range append(runcContainers(t), ctrdLeft...) {
			if l == id {
				left = append(left, "container "+id+" is still there")
			}
		}
		for cmdline := range procs {
			if strings.Contains(cmdline, id) {
				left = append(left, "a process of "+id+" is still there: "+strings.ReplaceAll(cmdline, "\x00", " "))
			}
		}
		for _, p := range []string{"/run/foundry-runc/state/" + id, "/run/foundry-runc/bundles/" + id} {
			if _, err := os.Stat(p); err == nil {
				left = append(left, p+" is still there")
			}
		}
		if strings.Contains(string(mounts), id) {
			left = append(left, "the overlay of "+id+" is still mounted")
		}
	}
	return left
}

// SIGINT, SIGTERM and SIGHUP interrupt an apply the same way: the running step is killed and
// its sandbox removed, the run is recorded as interrupted, the message names the signal and
// says how to resume, apply exits 1, and the next apply resumes.
func TestApplyInterruptedBySignal(t *testing.T) {
	needSandbox(t)
	cases := []struct {
		name       string
		sig        syscall.Signal
		group      bool // to the process group, as a terminal's hang-up or Ctrl-C is sent
		readerGone bool // the reader of stderr is gone first (`foundry apply 2>&1 | tee log` over a dropped session)
		executor   string
	}{
		{"SIGTERM", syscall.SIGTERM, false, false, "runc"},
		{"SIGHUP", syscall.SIGHUP, true, false, "runc"},
		{"SIGHUP-reader-gone", syscall.SIGHUP, true, true, "runc"},
		{"SIGINT", syscall.SIGINT, true, false, "runc"},
		{"SIGHUP-containerd", syscall.SIGHUP, true, false, "containerd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			list := runcContainers
			if c.executor == "containerd" {
				needContainerd(t)
				list = containerdContainers
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(napProject), 0o644); err != nil {
				t.Fatal(err)
			}
			// Containers of other applies on this machine are not this one's.
			before := map[string]bool{}
			for _, id := range list(t) {
				before[id] = true
			}
			ra := startApply(t, dir, c.executor)
			ra.waitStarted(t, "step.nap")
			ids := newContainers(t, list, before, "-step-nap-")
			if c.readerGone {
				ra.stderr.Close()
			}
			pid := ra.cmd.Process.Pid
			if c.group {
				pid = -pid
			}
			if err := syscall.Kill(pid, c.sig); err != nil {
				t.Fatal(err)
			}
			code := ra.wait(t)
			if code != exitError {
				t.Fatalf("apply after %s exited %d, want %d\n%s", c.name, code, exitError, ra.stderrText())
			}
			sig := strings.SplitN(c.name, "-", 2)[0]
			if !c.readerGone {
				want := "foundry apply: interrupted by " + sig + ": the running steps were stopped and removed; finished steps are cached. Run 'foundry apply' again to resume."
				if !strings.Contains(ra.stderrText(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, ra.stderrText())
				}
			}
			assertGone(t, ids)
			assertClean(t, dir)

			code, out, errs := foundry(t, dir, "status", "-json")
			var st struct {
				Runs []struct {
					Status string `json:"status"`
				} `json:"runs"`
				Nodes []struct {
					Address string `json:"address"`
					Status  string `json:"status"`
					Error   string `json:"error"`
				} `json:"nodes"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Runs) != 1 {
				t.Fatalf("status -json: exit %d\n%s%s", code, out, errs)
			}
			if st.Runs[0].Status != "interrupted" {
				t.Errorf("the run is %q, want interrupted", st.Runs[0].Status)
			}
			for _, n := range st.Nodes {
				if n.Address == "step.nap" && (n.Status != "failed" || n.Error != "stopped: interrupted by "+sig) {
					t.Errorf("step.nap is %s %q, want failed %q", n.Status, n.Error, "stopped: interrupted by "+sig)
				}
			}

			r := apply(t, dir, nil, "-executor", c.executor, "-var", "nap=0")
			if r.code != 0 || !sameSet(r.cached, "step.first") || !sameSet(r.executed, "step.nap") {
				t.Fatalf("the next apply must resume: exit %d, cached %v, executed %v\n%s", r.code, r.cached, r.executed, r.stderr)
			}
			assertClean(t, dir)
		})
	}
}

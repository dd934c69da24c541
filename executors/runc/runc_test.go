package runc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/executortest"
	"github.com/foundry-build/foundry/executors/runc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	executortest.RemoveImages()
	os.Exit(code)
}

func available() bool {
	_, err := exec.LookPath("runc")
	return err == nil && os.Geteuid() == 0
}

func TestConformance(t *testing.T) {
	executortest.Require(t, available(), "runc (as root)")
	root := t.TempDir()
	cgroupParent := "/foundry-test-" + filepath.Base(root)
	executortest.Run(t, executortest.Config{
		New: func(t *testing.T) executors.Executor {
			e, err := runc.New(runc.Options{Root: root, CgroupParent: cgroupParent})
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
		Image:     func(t *testing.T) executors.Image { return executortest.BusyboxRootfs(t) },
		Sandboxed: true,
		Leftovers: func(t *testing.T, prefix string) []string {
			var left []string
			for _, d := range []string{filepath.Join(root, "state"), filepath.Join(root, "bundles")} {
				ents, _ := os.ReadDir(d)
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), prefix) {
						left = append(left, filepath.Join(d, e.Name()))
					}
				}
			}
			// Every controller hierarchy (v1) or the unified tree (v2).
			dirs, _ := filepath.Glob("/sys/fs/cgroup" + cgroupParent + "/" + prefix + "*")
			more, _ := filepath.Glob("/sys/fs/cgroup/*" + cgroupParent + "/" + prefix + "*")
			return append(append(left, dirs...), more...)
		},
	})
}

// When `runc run` itself is killed, the step has no exit code: Run reports an error, and the
// container it left running is gone.
func TestRuncKilledIsAnErrorNotAnExitCode(t *testing.T) {
	executortest.Require(t, available(), "runc (as root)")
	root := t.TempDir()
	e, err := runc.New(runc.Options{Root: root, CgroupParent: "/foundry-test-" + filepath.Base(root)})
	if err != nil {
		t.Fatal(err)
	}
	id := "killed-runc-" + filepath.Base(root)
	a := &executors.Action{ID: id, Image: executortest.BusyboxRootfs(t), Argv: []string{"/bin/sh", "-c", "sleep 47"},
		OutDir: t.TempDir(), Limits: executors.Limits{Timeout: time.Minute}}
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), a)
		done <- err
	}()
	// Find `runc ... run ... ID` and kill it once the step's process runs.
	deadline := time.Now().Add(20 * time.Second)
	pid := 0
	for pid == 0 && time.Now().Before(deadline) {
		if executortest.ProcRunning("sleep\x0047") {
			ents, _ := os.ReadDir("/proc")
			for _, ent := range ents {
				b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
				if err == nil && strings.Contains(string(b), "\x00run\x00") && strings.HasSuffix(string(b), "\x00"+id+"\x00") {
					pid, _ = strconv.Atoi(ent.Name())
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("did not find the step's `runc run` process")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "runc was killed by signal 9") {
			t.Fatalf("Run after runc was killed: %v, want an error saying so", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after runc was killed")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if executortest.ProcRunning("sleep\x0047") {
		t.Fatal("the step's process outlived its killed runc")
	}
}

package runc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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

package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// boundedCacheProject has one step on a cache bounded to 32 MiB. var.run says what it does.
const boundedCacheProject = `
project "bounded" {}

variable "run" {}

seed "busybox" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "cat", "echo", "dd", "rm", "sleep"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}

step "s" {
  image   = seed.busybox
  caches  = { "/c" = { name = "small", max_size = "32MiB" } }
  run     = ["sh", "-c", var.run]
  outputs = ["/out/r"]
}
`

// fill writes a file the cache keeps, then 64 MiB into the 32 MiB cache.
const fillCache = `echo kept > /c/kept; dd if=/dev/zero of=/c/fill bs=1048576 count=64; st=$?; echo x > /out/r; exit $st`

// executorArgs are the apply flags of each sandboxed executor.
func executorArgs(t *testing.T) map[string][]string {
	needSandbox(t)
	needContainerd(t)
	return map[string][]string{
		"runc":       {"-executor", "runc"},
		"containerd": {"-executor", "containerd", "-containerd-address", containerdAddress()},
	}
}

// TestCacheBoundedWhileTheStepRuns: a step that writes past its cache's max_size meets
// ENOSPC inside the sandbox and fails, named by the bound; the host's disk holds no more
// than the bound for the volume, which is unmounted once the apply is done; the next step
// finds what fitted, and can free the space by deleting.
func TestCacheBoundedWhileTheStepRuns(t *testing.T) {
	for name, args := range executorArgs(t) {
		t.Run(name, func(t *testing.T) {
			dir := boundedProjectDir(t)
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(boundedCacheProject), 0o644); err != nil {
				t.Fatal(err)
			}
			r := apply(t, dir, nil, append(args, "-var", "run="+fillCache)...)
			want := `filled cache \"small\" at /c (max_size = 32MiB; a cache volume is bounded while the step runs`
			if r.code != exitError || !sameSet(r.failed, "step.s") || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "No space left on device") {
				t.Fatalf("apply: exit %d, failed %v; want step.s failed with %q and ENOSPC in its log\n%s", r.code, r.failed, want, r.stderr)
			}
			caches := filepath.Join(dir, ".foundry", "caches")
			if n := allocatedBytes(t, caches); n > 32<<20+1<<20 {
				t.Fatalf("the volumes take %d bytes of the host's disk; the bound is 32 MiB", n)
			}
			if m := mountsUnder(t, dir); len(m) != 0 {
				t.Fatalf("mounted after the apply: %v", m)
			}
			code, out, errs := foundry(t, dir, "cache", "ls", "-json")
			var vols []struct {
				Name           string
				Size, Max_size int64
			}
			if code != 0 || json.Unmarshal([]byte(out), &vols) != nil || len(vols) != 1 || vols[0].Max_size != 32<<20 || vols[0].Size > 32<<20 {
				t.Fatalf("cache ls: exit %d: %s %s", code, out, errs)
			}
			code, out, _ = foundry(t, dir, "cache", "ls")
			if code != 0 || !strings.Contains(out, "32MiB") {
				t.Fatalf("cache ls does not show the bound:\n%s", out)
			}

			r = apply(t, dir, nil, append(args, "-var", "run=rm /c/fill && cat /c/kept > /out/r")...)
			if r.code != 0 || !sameSet(r.executed, "step.s") {
				t.Fatalf("apply after the full one: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
			}
			if _, out, _ := foundry(t, dir, "output", "step.s", "/out/r"); out != "kept\n" {
				t.Fatalf("the next step found %q in the cache, want what fitted", out)
			}
		})
	}
}

// TestKilledHolderLeavesNoStaleMount: a foundry killed while its step holds a cache leaves
// the volume mounted; the next apply uses that mount (it sees what the killed step wrote),
// unmounts it when done, and leaves no loop device on the image; prune then deletes it.
func TestKilledHolderLeavesNoStaleMount(t *testing.T) {
	for name, args := range executorArgs(t) {
		t.Run(name, func(t *testing.T) {
			dir := boundedProjectDir(t)
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(boundedCacheProject), 0o644); err != nil {
				t.Fatal(err)
			}
			ra := startApply(t, dir, args[1], append(args[2:], "-var", "run=echo held > /c/held; sleep 60")...)
			held := ""
			for deadline := time.Now().Add(60 * time.Second); held == ""; time.Sleep(50 * time.Millisecond) {
				if m, _ := filepath.Glob(filepath.Join(dir, ".foundry", "caches", "*", "data", "held")); len(m) == 1 {
					held = m[0]
				}
				if time.Now().After(deadline) {
					t.Fatalf("the step never wrote to its cache:\n%s", ra.stderrText())
				}
			}
			ra.cmd.Process.Signal(syscall.SIGKILL)
			ra.wait(t)
			if len(mountsUnder(t, dir)) == 0 {
				t.Fatal("the killed apply left no mount: the test does not test what it says")
			}

			r := apply(t, dir, nil, append(args, "-var", "run=cat /c/held > /out/r")...)
			if r.code != 0 || !sameSet(r.executed, "step.s") {
				t.Fatalf("apply after the kill: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
			}
			if _, out, _ := foundry(t, dir, "output", "step.s", "/out/r"); out != "held\n" {
				t.Fatalf("the step after the kill read %q from the cache, want what the killed step wrote", out)
			}
			if m := mountsUnder(t, dir); len(m) != 0 {
				t.Fatalf("still mounted after the apply that followed the kill: %v", m)
			}
			img := filepath.Join(filepath.Dir(filepath.Dir(held)), "data.img")
			if out, _ := exec.Command("losetup", "-j", img).Output(); len(strings.TrimSpace(string(out))) != 0 {
				t.Fatalf("a loop device still backs the image: %s", out)
			}
			if code, out, errs := foundry(t, dir, "cache", "prune", "-all"); code != 0 {
				t.Fatalf("cache prune: exit %d: %s %s", code, out, errs)
			}
			if _, err := os.Stat(img); err == nil {
				t.Fatal("prune left the image")
			}
		})
	}
}

// boundedProjectDir is a temporary directory under which nothing is left mounted when the
// test ends, whether it passed or not.
func boundedProjectDir(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		for _, m := range mountsUnder(t, dir) {
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
	})
	return dir
}

// allocatedBytes is the bytes the files under dir take on the host's disk (allocated blocks).
func allocatedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Sys().(*syscall.Stat_t).Blocks * 512
			}
		}
		return nil
	})
	return n
}

// mountsUnder lists the mount points under dir in this process's mount table.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// volumeFile reads rel from the one cache volume of the project in dir, mounting its image
// read-only: once an apply is done its volumes are unmounted.
func volumeFile(t *testing.T, dir, rel string) string {
	t.Helper()
	imgs, _ := filepath.Glob(filepath.Join(dir, ".foundry", "caches", "*", "data.img"))
	if len(imgs) != 1 {
		t.Fatalf("want one volume image, found %v", imgs)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "ro,loop,noload", imgs[0], mnt).CombinedOutput(); err != nil {
		t.Fatalf("mounting %s: %v: %s", imgs[0], err, out)
	}
	defer exec.Command("umount", mnt).Run()
	b, err := os.ReadFile(filepath.Join(mnt, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

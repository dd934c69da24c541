package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sandboxProject has a step whose output is stored first (keep), two that attack the
// writable space's bounds (bytes: 64 MiB against limits.disk = 8MiB; files: 1000 files
// against limits.inodes = 200), and one that reads what the sandbox says of its mounts.
const sandboxProject = `
project "bounds" {}

variable "attack" { default = false }

seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/dd" = "busybox", "/bin/cat" = "busybox", "/bin/mkdir" = "busybox" }
  }
  env = { PATH = "/bin" }
}

step "keep" {
  image   = seed.bb
  run     = ["sh", "-c", "echo kept > /out/k"]
  outputs = ["/out/k"]
}

step "mounts" {
  image   = seed.bb
  mounts  = { "/in/k" = step.keep.output["/out/k"], "/in/text" = "hello" }
  run     = ["sh", "-c", "cat /proc/self/mountinfo > /out/mountinfo && cat /proc/mounts > /out/mounts"]
  outputs = ["/out/mountinfo", "/out/mounts"]
}

step "bytes" {
  image   = seed.bb
  run     = ["sh", "-c", var.attack ? "dd if=/dev/zero of=/out/big bs=1M count=64" : "echo small > /out/big"]
  outputs = ["/out/big"]
  limits { disk = "8MiB" }
}

step "files" {
  image   = seed.bb
  run     = ["sh", "-c", var.attack ? "mkdir /out/d; i=0; while [ $i -lt 1000 ]; do echo > /out/d/f$i; i=$((i+1)); done; true" : "mkdir /out/d"]
  outputs = ["/out/d"]
  limits { inodes = 200 }
}
`

// TestSandboxBoundsWritableSpace attacks the writable space's bounds through the CLI, on both
// sandboxes: a step writing past limits.disk and one making files past limits.inodes each
// fail with a message naming the limit, although their shells exit 0; the project's disk
// grows by less than the bound; what was stored before is still there and cached. It also
// reads /proc/self/mountinfo and /proc/mounts inside a step: neither names the project's
// directory, the run's ID, or a bundle or state directory of the host.
func TestSandboxBoundsWritableSpace(t *testing.T) {
	needSandbox(t)
	runID := regexp.MustCompile(`r\d{8}t\d{6}-[0-9a-f]{8}`)
	for _, exe := range []string{"runc", "containerd"} {
		t.Run(exe, func(t *testing.T) {
			args := []string{"-executor", exe}
			if exe == "containerd" {
				needContainerd(t)
				args = append(args, "-containerd-address", containerdAddress())
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(sandboxProject), 0o644); err != nil {
				t.Fatal(err)
			}
			r := apply(t, dir, nil, args...)
			if r.code != 0 || len(r.executed) != 4 {
				t.Fatalf("first apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
			}
			for _, f := range []string{"/out/mountinfo", "/out/mounts"} {
				code, out, errs := foundry(t, dir, "output", "step.mounts", f)
				if code != 0 || !strings.Contains(out, " /in/k ") || !strings.Contains(out, " /out ") {
					t.Fatalf("output %s: exit %d\n%s%s", f, code, out, errs)
				}
				for _, leak := range []string{dir, ".foundry", "/run/", "/var/lib/", "bundles", "snapshots"} {
					if strings.Contains(out, leak) {
						t.Errorf("%s in the sandbox shows %q:\n%s", f, leak, out)
					}
				}
				if id := runID.FindString(out); id != "" {
					t.Errorf("%s in the sandbox shows the run ID %s:\n%s", f, id, out)
				}
			}

			before := diskUsage(t, dir)
			r = apply(t, dir, nil, append(args, "-var", "attack=true")...)
			if r.code != 1 {
				t.Fatalf("attack: exit %d, want 1\n%s", r.code, r.stderr)
			}
			for _, want := range []string{
				"step.bytes: wrote more than limits.disk = 8MiB to /out",
				"step.files: made more than limits.inodes = 200 files, directories and links in /out",
			} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("the failure does not say %q:\n%s", want, r.stderr)
				}
			}
			if grew := diskUsage(t, dir) - before; grew > 8<<20 {
				t.Errorf("the project's disk grew by %d bytes, past the 8 MiB bound", grew)
			}

			// Nothing stored before is lost: the other steps are cached, their outputs there.
			r = apply(t, dir, nil, args...)
			if r.code != 0 || len(r.executed) != 0 {
				t.Fatalf("after the attack: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
			}
			if code, out, errs := foundry(t, dir, "output", "step.keep", "/out/k"); code != 0 || out != "kept\n" {
				t.Fatalf("output step.keep: exit %d %q %s", code, out, errs)
			}
		})
	}
}

// diskUsage is the bytes allocated under dir.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rebuildProject has a reproducible step (with a cache it leaves a stamp in, which must not
// matter) and one that writes the time it ran.
const rebuildProject = `
project "rebuild" {}

seed "busybox" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "cat", "echo", "date", "ls", "wc"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}

step "stable" {
  image   = seed.busybox
  caches  = { "/cache" = "stamps" }
  run     = ["sh", "-c", "echo hello > /out/a.txt; mkdir -p /out/d; echo same > /out/d/f; date > /cache/last"]
  outputs = ["/out/a.txt", "/out/d"]
}

step "stamp" {
  image   = seed.busybox
  run     = ["sh", "-c", "mkdir -p /out/d; echo built > /out/d/info; cat /proc/uptime >> /out/d/info; echo end >> /out/d/info"]
  outputs = ["/out/d"]
}
`

// TestRebuildChecksReproducibility: -rebuild of a step never built is a clear error; of a
// reproducible step, signed evidence that verify shows; of a step that writes the time, a
// report naming the differing file with both digests, sizes, the first differing byte and
// the lines.
func TestRebuildChecksReproducibility(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(rebuildProject), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil, "-rebuild", "step.stable")
	if r.code != 1 || !strings.Contains(r.stderr, "step.stable: -rebuild: it has no cached result to rebuild; it was never built") {
		t.Fatalf("rebuild of a step never built: exit %d\n%s", r.code, r.stderr)
	}
	if r = apply(t, dir, nil, "-rebuild", "step.nope"); r.code != 1 || !strings.Contains(r.stderr, "-rebuild step.nope: no such step or check") {
		t.Fatalf("rebuild of no step: exit %d\n%s", r.code, r.stderr)
	}
	// The failed rebuild ran what else there was: step.stamp.
	if r = apply(t, dir, nil); r.code != 0 || !sameSet(r.executed, "step.stable") {
		t.Fatalf("apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	before := len(statements(t, dir))

	r = apply(t, dir, nil, "-rebuild", "step.stable")
	if r.code != 0 || !sameSet(r.executed, "step.stable") || !sameSet(r.cached, "step.stamp") {
		t.Fatalf("rebuild of a reproducible step: exit %d, executed %v, cached %v\n%s", r.code, r.executed, r.cached, r.stderr)
	}
	if n := len(statements(t, dir)); n != before+1 {
		t.Fatalf("%d attestations after the rebuild, want %d: one for the rebuild", n, before+1)
	}
	// The rebuild did not replace the cached result: another apply runs nothing.
	if r = apply(t, dir, nil); r.code != 0 || len(r.executed) != 0 {
		t.Fatalf("after the rebuild: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	code, out, errs := foundry(t, dir, "output", "-o", filepath.Join(t.TempDir(), "a.txt"), "step.stable", "/out/a.txt")
	if code != 0 {
		t.Fatalf("output: %s %s", out, errs)
	}
	a := filepath.Join(t.TempDir(), "a.txt")
	os.WriteFile(a, []byte("hello\n"), 0o644)
	code, out, errs = foundry(t, dir, "verify", "-key", filepath.Join(dir, ".foundry", "keys", "signing.pub"), "-attestations", filepath.Join(dir, ".foundry", "attestations"), a)
	if code != 0 || !strings.Contains(out, "PASS reproduced: reproduced independently, without caches") || !strings.Contains(out, `PASS caches: mounted cache volume(s) "stamps" at /cache`) {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errs)
	}

	r = apply(t, dir, nil, "-rebuild", "step.stamp")
	if r.code != 1 {
		t.Fatalf("rebuild of a step that writes the time: exit %d\n%s", r.code, r.stderr)
	}
	report := regexp.MustCompile(`/out/d/info differs: cached sha256:[0-9a-f]{64} \(\d+ bytes\), rebuilt sha256:[0-9a-f]{64} \(\d+ bytes\); first difference at byte (\d+)`)
	m := report.FindStringSubmatch(r.stderr)
	if m == nil || m[1] == "0" || !strings.Contains(r.stderr, "not reproducible") || !strings.Contains(r.stderr, `  -2: `) || !strings.Contains(r.stderr, `  +2: `) {
		t.Fatalf("no report of the differing file:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "/out/d/f") {
		t.Fatalf("an identical file is reported:\n%s", r.stderr)
	}
}

package main

import (
	"encoding/json"
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

	// With -progress plain, the rebuild's line says it reproduced, bit for bit, the files of
	// both outputs (/out/a.txt and the tree /out/d's one file), by their digests.
	r = apply(t, dir, nil, "-rebuild", "step.stable", "-progress", "plain")
	done := regexp.MustCompile(`(?m)^  ok  step\.stable \S+: reproduced bit for bit: 2 files, /out/a\.txt sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03, /out/d sha256:[0-9a-f]{64}$`)
	if r.code != 0 || !done.MatchString(r.stderr) || !strings.Contains(r.stderr, "\n  =   step.stamp (cached)\n") {
		t.Fatalf("rebuild of a reproducible step: exit %d\n%s", r.code, r.stderr)
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
	// The artifact's own checks, beside its verdict, say it was reproduced (by the rebuild's
	// envelope, of the first's); the rebuild's envelope says so too, the first's names its cache.
	reproduced := regexp.MustCompile(`(?m)^  PASS reproduced: reproduced independently, without caches: verified envelope (sha256:[0-9a-f]{64}) is a rebuild in a fresh sandbox whose outputs are byte for byte those of envelope (sha256:[0-9a-f]{64})$`)
	m := reproduced.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] == m[2] || !strings.Contains(out, "    PASS reproduced: reproduced independently, without caches: its outputs are byte for byte those of the execution of envelope "+m[2]) ||
		!strings.Contains(out, `PASS caches: mounted cache volume(s) "stamps" at /cache`) {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errs)
	}

	r = apply(t, dir, nil, "-rebuild", "step.stamp")
	if r.code != 1 {
		t.Fatalf("rebuild of a step that writes the time: exit %d\n%s", r.code, r.stderr)
	}
	report := regexp.MustCompile(`/out/d/info differs: cached sha256:[0-9a-f]{64} \(\d+ bytes\), rebuilt sha256:[0-9a-f]{64} \(\d+ bytes\); first difference at byte (\d+)`)
	m = report.FindStringSubmatch(r.stderr)
	if m == nil || m[1] == "0" || !strings.Contains(r.stderr, "not reproducible") || !strings.Contains(r.stderr, `  -2: `) || !strings.Contains(r.stderr, `  +2: `) {
		t.Fatalf("no report of the differing file:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "/out/d/f") {
		t.Fatalf("an identical file is reported:\n%s", r.stderr)
	}
}

// TestReproducibleRecipeRebuiltBeforeAdmission: a recipe with reproducible = true is
// evaluated only once each of its steps made the same bytes again in a fresh sandbox with
// empty caches. One that writes the time into a correct sorter is rejected before any
// evaluation; a reproducible one is admitted, with the rebuild's signed evidence.
func TestReproducibleRecipeRebuiltBeforeAdmission(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "trust"), dir)
	tmpl, err := os.ReadFile(filepath.Join(dir, "main.hcl.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(string(tmpl), "REGISTRY", "oci-layout:.foundry/registry")
	src = strings.Replace(src, "  cost     = 2\n", "  cost     = 2\n  reproducible = true\n", 1)
	src += `
recipe "stamped" {
  provides     = capability.sorter
  cost         = 0
  reproducible = true
  step "build" {
    image   = seed.bb
    mounts  = { "/src" = dir("src") }
    run     = ["sh", "-c", "cp /src/good.sh /out/sorter; read u _ < /proc/uptime; echo \"# built at $u\" >> /out/sorter"]
    outputs = ["/out/sorter"]
  }
  package {
    base  = seed.bb
    files = { "/bin/sorter" = step.build.output["/out/sorter"] }
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 || !strings.Contains(r.stderr, "ADM capability.sorter: recipe.good admitted") {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"recipe.stamped has reproducible = true", "not reproducible", "/out/sorter differs: cached sha256:"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("apply output lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "eval capability.sorter: recipe.stamped") {
		t.Fatalf("the non-reproducible recipe was evaluated:\n%s", r.stderr)
	}
	reproduced := 0
	for _, st := range statements(t, dir) {
		if strings.Contains(string(st), `"reproduces"`) && strings.Contains(string(st), "recipe.good") {
			reproduced++
		}
	}
	if reproduced != 1 {
		t.Fatalf("%d rebuild attestations of recipe.good, want 1", reproduced)
	}
}

// reproducible = true is a policy on admission, not on what a recipe's steps make: it changes
// the recipe's digest (and so the plan's), and no step's digest, so no step runs again for it.
func TestReproducibleInTheRecipeDigestOnly(t *testing.T) {
	digests := func(reproducible bool) (plan string, nodes map[string]string) {
		dir := t.TempDir()
		copyTree(t, filepath.Join("testdata", "trust"), dir)
		tmpl, err := os.ReadFile(filepath.Join(dir, "main.hcl.tmpl"))
		if err != nil {
			t.Fatal(err)
		}
		src := strings.ReplaceAll(string(tmpl), "REGISTRY", "oci-layout:.foundry/registry")
		if reproducible {
			src = strings.Replace(src, "  cost     = 2\n", "  cost     = 2\n  reproducible = true\n", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := foundry(t, dir, "plan", "-json")
		if code != 0 {
			t.Fatalf("plan -json: exit %d\n%s", code, errs)
		}
		var p struct {
			Digest string `json:"plan_digest"`
			Nodes  []struct{ Address, Digest string }
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		nodes = map[string]string{}
		for _, n := range p.Nodes {
			nodes[n.Address] = n.Digest
		}
		return p.Digest, nodes
	}
	plan0, off := digests(false)
	plan1, on := digests(true)
	if plan0 == plan1 {
		t.Errorf("reproducible = true left the plan's digest as it was (%s)", plan0)
	}
	if off["recipe.good"] == "" || off["recipe.good"] == on["recipe.good"] {
		t.Errorf("recipe.good's digest: %q without reproducible, %q with it", off["recipe.good"], on["recipe.good"])
	}
	for a, d := range off {
		if a != "recipe.good" && on[a] != d {
			t.Errorf("reproducible = true on recipe.good changed %s's digest", a)
		}
	}
}

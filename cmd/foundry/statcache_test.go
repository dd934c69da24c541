package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// statLine is what FOUNDRY_DEBUG=stat-cache prints once a load is done.
var statLine = regexp.MustCompile(`stat cache: (\d+) remembered, (\d+) hashed`)

// statCounts returns the numbers of statLine in a command's stderr.
func statCounts(t *testing.T, stderr string) (remembered, hashed int) {
	t.Helper()
	m := statLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no stat cache line in stderr:\n%s", stderr)
	}
	remembered, _ = strconv.Atoi(m[1])
	hashed, _ = strconv.Atoi(m[2])
	return remembered, hashed
}

// The first apply of a project, which makes its state directory, saves the digests its
// load computed: the second apply hashes no input file again.
func TestFirstApplySavesTheStatCache(t *testing.T) {
	needSandbox(t)
	dir := helloProject(t)
	// Files changed within the racy window of a load are never remembered.
	time.Sleep(2100 * time.Millisecond)
	debug := []string{"FOUNDRY_DEBUG=stat-cache,graph-cache"}
	r := apply(t, dir, debug)
	if r.code != 0 {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	if _, hashed := statCounts(t, r.stderr); hashed == 0 {
		t.Fatalf("the first apply hashed nothing:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, ".foundry", "stat-cache")); err != nil {
		t.Fatalf("no stat cache after the first apply: %v", err)
	}
	r = apply(t, dir, debug)
	if r.code != 0 {
		t.Fatalf("second apply: exit %d\n%s", r.code, r.stderr)
	}
	if remembered, hashed := statCounts(t, r.stderr); hashed != 0 || remembered == 0 {
		t.Fatalf("second apply: %d files remembered, %d hashed again; want none hashed\n%s", remembered, hashed, r.stderr)
	}
}

// On a graph cache miss caused by a changed input, each input tree is walked once: the
// miss looks up no more files than a hit of the same project does.
func TestGraphCacheMissWalksEachTreeOnce(t *testing.T) {
	dir, host := gcProject(t)
	args := []string{"plan", "-json", "-var", "host=" + host, "-var-file", filepath.Join(dir, "vars.hcl.in"), dir}
	t.Setenv("FOUNDRY_DEBUG", "graph-cache,stat-cache")
	load := func() (verdict string, lookups int, stderr string) {
		t.Helper()
		code, _, errs := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("plan: exit %d: %s", code, errs)
		}
		m := cacheLine.FindStringSubmatch(errs)
		if m == nil {
			t.Fatalf("no graph cache line in stderr:\n%s", errs)
		}
		remembered, hashed := statCounts(t, errs)
		return m[1], remembered + hashed, errs
	}
	load()
	v, hit, errs := load()
	if v != "hit" || hit == 0 {
		t.Fatalf("unchanged project: %s (%d files looked up)", errs, hit)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "x"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, miss, errs := load()
	if v != "miss" {
		t.Fatalf("changed src/x: %s", errs)
	}
	if miss != hit {
		t.Fatalf("a miss looked up %d input files, a hit %d: the trees were walked more than once\n%s", miss, hit, errs)
	}
}

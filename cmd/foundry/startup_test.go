package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Every foundry command pays for the package initializers of everything linked in. Their
// cost is measured here in bytes allocated, which, unlike time, does not depend on the
// machine, so that a new dependency with a costly initializer is noticed. The largest is
// jsonschema's, which compiles its draft metaschemas in init (about 1.7 MB); Foundry uses
// upstream jsonschema as it is rather than keep a fork to make that lazy. The Temporal SDK's
// API packages register their protobuf types in init (about 0.7 MB, enums and
// workflowservice the largest): the price of `apply -engine temporal` and `worker` in the
// one binary.
func TestStartupInitializersStayCheap(t *testing.T) {
	cmd := exec.Command(foundryBin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("foundry version: %v\n%s", err, out)
	}
	total := 0
	perPackage := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		// init PKG @0.5 ms, 0.1 ms clock, 1234 bytes, 5 allocs
		f := strings.Fields(line)
		if len(f) < 11 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("unreadable inittrace line %q", line)
		}
		perPackage[f[1]] += n
		total += n
	}
	if len(perPackage) == 0 {
		t.Fatalf("no inittrace output:\n%s", out)
	}
	const budget = 5_500_000
	if total > budget {
		t.Errorf("package initializers allocate %d bytes, over the %d budget; the largest:", total, budget)
		for p, n := range perPackage {
			if n > 100_000 {
				t.Errorf("  %s: %d bytes", p, n)
			}
		}
	}
}

// Loading a project with a state directory remembers input digests in .foundry/stat-cache
// and plans the same with it as without it.
func TestPlanRemembersInputDigests(t *testing.T) {
	dir := t.TempDir()
	hcl := "seed \"base\" {\n  layer { files = { \"/bin/sh\" = host_file(\"/bin/sh\") } }\n}\n" +
		"step \"a\" {\n  image   = seed.base\n  run     = [\"sh\", \"-c\", \"echo > /out/a\"]\n  outputs = [\"/out/a\"]\n}\n"
	if err := os.WriteFile(dir+"/main.hcl", []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	code, without, stderr := runCLI(t, "plan", "-json", dir)
	if code != 0 {
		t.Fatalf("plan: %d %s", code, stderr)
	}
	if _, err := os.Stat(dir + "/.foundry"); err == nil {
		t.Fatal("plan created the state directory")
	}
	if err := os.Mkdir(dir+"/.foundry", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the first fills the cache, the second answers from it
		code, with, stderr := runCLI(t, "plan", "-json", dir)
		if code != 0 || with != without {
			t.Fatalf("plan %d with a stat cache: %d %s\n%s\nwant\n%s", i+1, code, stderr, with, without)
		}
	}
	b, err := os.ReadFile(dir + "/.foundry/stat-cache")
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(b)), " /bin/sh") {
		t.Fatalf("stat cache: %v\n%s", err, b)
	}
}

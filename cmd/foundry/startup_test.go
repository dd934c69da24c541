package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// initCost is one package's line of GODEBUG=inittrace=1: "init PKG @T ms, C ms clock, B bytes, A allocs".
type initCost struct {
	pkg           string
	clockMS       float64
	bytes, allocs int
}

// initTrace runs the binary's -help under GODEBUG=inittrace=1 and returns each package's
// initialization cost, in the order the runtime ran them.
func initTrace(t *testing.T, bin string) []initCost {
	t.Helper()
	cmd := exec.Command(bin, "-help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("foundry -help: %v\n%s", err, stderr.String())
	}
	var costs []initCost
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "init" || f[6] != "clock," || f[8] != "bytes," {
			continue
		}
		clock, err1 := strconv.ParseFloat(f[4], 64)
		b, err2 := strconv.Atoi(f[7])
		a, err3 := strconv.Atoi(f[9])
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("unreadable inittrace line %q", sc.Text())
		}
		costs = append(costs, initCost{pkg: f[1], clockMS: clock, bytes: b, allocs: a})
	}
	if len(costs) == 0 {
		t.Fatalf("no inittrace lines in:\n%s", stderr.String())
	}
	return costs
}

// Budgets for package initialization, in bytes allocated: the deterministic measure of the
// work done before main runs (clock time is logged, but a loaded machine makes it noise).
const (
	// ownInitBudget is what one of Foundry's own packages may allocate at init: tables of
	// constants and command registrations, nothing compiled or parsed (regexps, schemas and
	// templates are built on first use, sync.OnceValue).
	ownInitBudget = 8 << 10
	// totalInitBudget bounds every package's init together, third-party ones included
	// (4.84 MB when written, 1.7 MB of it santhosh-tekuri/jsonschema compiling its
	// meta-schemas; 5.38 MB before Foundry's own regexps were made lazy): a new dependency
	// that does heavy work at init fails here.
	totalInitBudget = 5200 << 10
)

// TestStartupInitBudget holds the process start-up: no Foundry package does work at init
// that a command may not need, and the whole initialization stays within its budget.
func TestStartupInitBudget(t *testing.T) {
	var total, ownTotal int
	var clock float64
	for _, c := range initTrace(t, foundryBin) {
		total += c.bytes
		clock += c.clockMS
		own := c.pkg == "main" || strings.HasPrefix(c.pkg, "github.com/foundry-build/foundry/")
		if !own {
			continue
		}
		ownTotal += c.bytes
		if c.bytes > ownInitBudget {
			t.Errorf("%s allocates %d bytes (%d allocations) at init, over the %d-byte budget: build what it computes on first use (sync.OnceValue)", c.pkg, c.bytes, c.allocs, ownInitBudget)
		}
	}
	t.Logf("init: %.1f ms clock, %d bytes in all, %d bytes in Foundry's own packages", clock, total, ownTotal)
	if total > totalInitBudget {
		t.Errorf("package initialization allocates %d bytes, over the %d-byte budget", total, totalInitBudget)
	}
}

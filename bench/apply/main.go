// Command apply benchmarks `foundry apply` as a user runs it (whole process, real sandboxes):
//
//   - re-applying a fully cached 41-step chain (goal: under 60 ms: no per-node daemon work
//     on a no-op);
//   - a no-op apply of a 10,000-step graph: time and peak RSS (goal: ≤ 1 s, ≤ 200 MiB);
//   - parallel efficiency of 100 sleep-bound steps (0.2 s each) at -parallelism 8: the ideal
//     time divided by the measured time.
//
// Run with `make bench` (it builds bin/foundry first). Numbers are medians of repeated runs;
// nothing here asserts a time.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

var (
	bin      = flag.String("foundry", "bin/foundry", "the foundry binary to measure")
	executor = flag.String("executor", "runc", "executor for the steps that do run")
	big      = flag.Int("big", 10000, "steps in the no-op graph")
	fill     = flag.String("fill-executor", "", "executor that populates the big graph's cache and runs its no-op applies (default: -executor)")
	parts    = flag.String("parts", "chain,noop,parallel", "which measurements to make: chain (41-step re-apply), noop (big graph), parallel")
)

const seed = `seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox", "/bin/sleep" = "busybox", "/bin/cat" = "busybox", "/bin/echo" = "busybox" }
  }
  env = { PATH = "/bin" }
}
`

func main() {
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	must(err)
	*bin = abs
	if *fill == "" {
		*fill = *executor
	}

	want := map[string]bool{}
	for _, p := range strings.Split(*parts, ",") {
		want[p] = true
	}
	if want["chain"] {
		benchChain()
	}
	if want["noop"] {
		benchNoop()
	}
	if want["parallel"] {
		benchParallel()
	}
}

// benchChain measures re-applying a fully cached 41-step chain: the cost of a no-op.
func benchChain() {
	chain := project(func(b *strings.Builder) {
		for i := 0; i < 41; i++ {
			if i == 0 {
				fmt.Fprintf(b, "step \"s0\" {\n  image = seed.bb\n  run = [\"sh\", \"-c\", \"echo 0 > /out/o\"]\n  outputs = [\"/out/o\"]\n}\n")
				continue
			}
			fmt.Fprintf(b, "step \"s%d\" {\n  image = seed.bb\n  mounts = { \"/in\" = step.s%d.output[\"/out/o\"] }\n  run = [\"sh\", \"-c\", \"cat /in > /out/o; echo %d >> /out/o\"]\n  outputs = [\"/out/o\"]\n}\n", i, i-1, i)
		}
	})
	defer os.RemoveAll(chain)
	cold, _ := apply(chain, *executor, "8")
	var warm []time.Duration
	for i := 0; i < 15; i++ {
		d, _ := apply(chain, *executor, "8")
		warm = append(warm, d)
	}
	fmt.Printf("41-step chain: cold apply %s (%.1f ms/step); fully cached re-apply median %s (goal < 60ms)\n",
		cold.Round(time.Millisecond), float64(cold.Milliseconds())/41, median(warm).Round(100*time.Microsecond))
}

// benchNoop measures a no-op apply of a -big step graph, once its cache is populated.
func benchNoop() {
	wide := project(func(b *strings.Builder) {
		for i := 0; i < *big; i++ {
			// $FOUNDRY_OUT is where the local executor (usable to fill the cache fast) puts /out.
			fmt.Fprintf(b, "step \"s%d\" {\n  image = seed.bb\n  run = [\"sh\", \"-c\", \"echo %d > $${FOUNDRY_OUT:-/out}/o\"]\n  outputs = [\"/out/o\"]\n}\n", i, i)
		}
	})
	defer os.RemoveAll(wide)
	fillStart := time.Now()
	apply(wide, *fill, "8")
	fmt.Printf("%d-step graph: populated the cache in %s with -executor %s\n", *big, time.Since(fillStart).Round(time.Second), *fill)
	// The no-op applies use the executor that filled the cache: a result the local
	// executor produced settles only an unsandboxed apply (a sandboxed one runs the step
	// again), and no step runs in a no-op apply either way.
	var noop []time.Duration
	var rss int64
	for i := 0; i < 5; i++ {
		d, r := apply(wide, *fill, "8")
		noop = append(noop, d)
		rss = max(rss, r)
	}
	fmt.Printf("%d-step graph: no-op apply (-executor %s) median %s, peak RSS %.1f MiB (goals ≤ 1s, ≤ 200 MiB)\n",
		*big, *fill, median(noop).Round(time.Millisecond), float64(rss)/1024)
}

// benchParallel measures how close 100 independent sleep-bound steps come to ideal
// parallelism.
func benchParallel() {
	par := project(func(b *strings.Builder) {
		for i := 0; i < 100; i++ {
			fmt.Fprintf(b, "step \"s%d\" {\n  image = seed.bb\n  run = [\"sh\", \"-c\", \"sleep 0.2; echo %d > /out/o\"]\n  outputs = [\"/out/o\"]\n}\n", i, i)
		}
	})
	defer os.RemoveAll(par)
	d, _ := apply(par, *executor, "8")
	ideal := 100 * 200 * time.Millisecond / 8
	fmt.Printf("100 sleep-bound steps (0.2 s) at -parallelism 8: %s; ideal %s; efficiency %.2f\n",
		d.Round(time.Millisecond), ideal, float64(ideal)/float64(d))
}

func project(body func(*strings.Builder)) string {
	dir, err := os.MkdirTemp("", "foundry-applybench-")
	must(err)
	var b strings.Builder
	b.WriteString(seed)
	body(&b)
	must(os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(b.String()), 0o644))
	return dir
}

// apply runs one whole-process apply and returns its wall time and peak RSS (KiB).
func apply(dir, executor, par string) (time.Duration, int64) {
	args := []string{"apply", "-auto-approve", "-progress", "plain", "-parallelism", par, "-executor", executor}
	if executor == "local" {
		args = append(args, "-unsandboxed")
	}
	cmd := exec.Command(*bin, args...)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		fmt.Fprintf(os.Stderr, "apply in %s failed: %v\n%s", dir, err, tail(string(out)))
		os.Exit(1)
	}
	return d, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
}

func tail(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

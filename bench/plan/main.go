// Command plan benchmarks planning: it generates synthetic projects of 1k, 10k and 100k step
// nodes, plans each in a fresh child process (so that peak memory is that size's alone), and
// prints load+compile+plan time and peak RSS per size, with the scaling ratio between sizes.
//
// Run with `make bench`. Targets (issue 2): 10k nodes under 0.5 s and 200 MiB; 100k under 10×
// that, 5 s. Each size is planned -runs times (default 5), the sizes taking turns; times are
// medians.
//
// The scaling line compares this run's 100k and 10k medians: planning that scales linearly
// keeps the time per node flat. It is a measurement, not a target of its own: it varies
// between runs of the same build, because a 10k graph's working set fits in the processor's
// caches and a 100k graph's does not, and because a virtual machine's host may take back
// memory the guest freed, which then costs a page fault again. Making the 10k plan faster
// raises it.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/foundry-build/foundry/engine"
	"github.com/foundry-build/foundry/lang"
)

func main() {
	child := flag.String("child", "", "internal: plan the project in this directory and print the elapsed nanoseconds")
	sizes := flag.String("sizes", "1000,10000,100000", "comma-separated node counts")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of planning the last size to this file")
	flag.StringVar(&memProfile, "memprofile", "", "write a heap profile, taken after planning the last size, to this file")
	keep := flag.Bool("keep", false, "keep each generated project and print its directory, to plan or profile it again with foundry or -child")
	runs := flag.Int("runs", 5, "plan each size this many times, each in a fresh process, the sizes taking turns; the median time is reported")
	flag.Parse()
	if *child != "" {
		os.Exit(runChild(*child))
	}
	if *runs < 1 {
		fmt.Fprintln(os.Stderr, "-runs must be at least 1")
		os.Exit(2)
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			fmt.Fprintf(os.Stderr, "-sizes: %q is not a node count\n", s)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	dirs := make([]string, len(ns))
	cleanup := func() {
		for i, dir := range dirs {
			if dir == "" {
				continue
			}
			if *keep {
				fmt.Fprintf(os.Stderr, "kept the %d-node project in %s\n", ns[i], dir)
			} else {
				os.RemoveAll(dir)
			}
		}
	}
	fail := func(err error) {
		cleanup()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i, n := range ns {
		dir, err := os.MkdirTemp("", "foundry-planbench-")
		if err != nil {
			fail(err)
		}
		dirs[i] = dir
		if err := generate(dir, n); err != nil {
			fail(err)
		}
	}
	// Virtual machines drift between runs a minute apart, so one run per size would make the
	// ratio between sizes swing by as much. Each size is planned several times, and the
	// sizes take turns (1k, 10k, 100k, 1k, ...), so that a drift slows every size alike
	// instead of the ones measured last: the ratio is between medians of runs made over the
	// same minute. The peak is the largest of the runs.
	times := make([][]time.Duration, len(ns))
	rss := make([]int64, len(ns)) // KiB
	for r := 0; r < *runs; r++ {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", r+1, *runs)
		for i := range ns {
			elapsed, peak, err := measure(dirs[i])
			if err != nil {
				fail(err)
			}
			times[i] = append(times[i], elapsed)
			rss[i] = max(rss[i], peak)
		}
	}
	cleanup()
	fmt.Printf("%-8s %12s %19s %12s %14s %12s\n", "nodes", "median time", "range", "per node", "peak RSS", "vs previous")
	var prev time.Duration
	var prevN int
	median := map[int]time.Duration{}
	peak := map[int]int64{} // KiB
	for i, n := range ns {
		ts := times[i]
		slices.Sort(ts)
		elapsed := ts[len(ts)/2]
		ratio := ""
		if prev > 0 {
			ratio = fmt.Sprintf("%.1f× time for %.0f× nodes", float64(elapsed)/float64(prev), float64(n)/float64(prevN))
		}
		spread := fmt.Sprintf("%v-%v", ts[0].Round(time.Millisecond), ts[len(ts)-1].Round(time.Millisecond))
		fmt.Printf("%-8d %12s %19s %12s %10.1f MiB %s\n", n, elapsed.Round(time.Millisecond), spread, (elapsed / time.Duration(n)).Round(time.Microsecond/10), float64(rss[i])/1024, ratio)
		prev, prevN = elapsed, n
		median[n], peak[n] = elapsed, rss[i]
	}
	// The goals of issue 2, beside what this run measured.
	if t, ok := median[10000]; ok {
		fmt.Printf("goal: 10k nodes under 500ms and 200 MiB: %v, %.1f MiB (%s)\n",
			t.Round(time.Millisecond), float64(peak[10000])/1024, met(t < 500*time.Millisecond && peak[10000] < 200*1024))
		if t100, ok := median[100000]; ok {
			fmt.Printf("goal: 100k nodes under 10x the 10k budget (5s): %v (%s)\n", t100.Round(time.Millisecond), met(t100 < 5*time.Second))
			fmt.Printf("scaling: 100k nodes took %.1fx this run's 10k time; per node %v against %v\n",
				float64(t100)/float64(t), (t100 / 100000).Round(time.Microsecond/10), (t / 10000).Round(time.Microsecond/10))
		}
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// generate writes a project of n steps on one seed: each step mounts the outputs of up to
// three random earlier steps, and every tenth mounts a project directory. Steps are spread
// over files of 100, as a large project would be (hclsyntax lexes one huge file in
// superlinear time).
func generate(dir string, n int) error {
	tool := filepath.Join(dir, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "a.txt"), []byte("a\n"), 0o644); err != nil {
		return err
	}
	r := rand.New(rand.NewSource(1))
	var b strings.Builder
	fmt.Fprintf(&b, "seed \"base\" {\n  layer { files = { \"/bin/sh\" = host_file(%q) } }\n}\n", tool)
	flush := func(k int) error {
		err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("steps-%05d.hcl", k)), []byte(b.String()), 0o644)
		b.Reset()
		return err
	}
	for i := 0; i < n-1; i++ {
		if i > 0 && i%100 == 0 {
			if err := flush(i / 100); err != nil {
				return err
			}
		}
		var mounts []string
		for k := 0; k < 3 && i > 0; k++ {
			j := r.Intn(i)
			mounts = append(mounts, fmt.Sprintf("\"/in/%d\" = step.s%d.output[\"/out/o\"]", j, j))
		}
		if i%10 == 0 {
			mounts = append(mounts, "\"/src\" = dir(\"src\")")
		}
		fmt.Fprintf(&b, "step \"s%d\" {\n  image   = seed.base\n  run     = [\"sh\", \"-c\", \"echo %d > /out/o\"]\n  mounts  = { %s }\n  outputs = [\"/out/o\"]\n}\n", i, i, strings.Join(mounts, ", "))
	}
	return flush(n/100 + 1)
}

var cpuProfile, memProfile string

// faults is the number of minor page faults the process has taken.
func faults() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Minflt
}

func measure(dir string) (time.Duration, int64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(self, "-child", dir, "-cpuprofile", cpuProfile, "-memprofile", memProfile)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("child: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0, 0, err
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if os.Getenv("FOUNDRY_BENCH_PHASES") != "" {
		fmt.Fprintf(os.Stderr, "page faults %d minor, %d major\n", ru.Minflt, ru.Majflt)
	}
	return time.Duration(ns), ru.Maxrss, nil // Maxrss is in KiB on Linux
}

func runChild(dir string) int {
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	f0 := faults()
	cfg, diags := lang.Load(dir, lang.Options{})
	f1 := faults()
	if diags.HasErrors() {
		fmt.Fprintln(os.Stderr, diags.Error())
		return 1
	}
	loaded := time.Now()
	g, diags := engine.Compile(cfg)
	compiled := time.Now()
	f2 := faults()
	if diags.HasErrors() {
		fmt.Fprintln(os.Stderr, diags.Error())
		return 1
	}
	p, err := engine.MakePlan(g, engine.PlanOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	elapsed := time.Since(start)
	if os.Getenv("FOUNDRY_BENCH_PHASES") != "" {
		// Page faults are costly on virtual machines: they are printed per phase.
		f3 := faults()
		fmt.Fprintf(os.Stderr, "load %v (%d faults) compile %v (%d) plan %v (%d)\n",
			loaded.Sub(start), f1-f0, compiled.Sub(loaded), f2-f1, time.Since(compiled), f3-f2)
		u := cfg.EvalUsage
		fmt.Fprintf(os.Stderr, "evaluation budget used: %d values, %d bytes, %v (limits %d, %d, %v)\n",
			u.Values, u.Bytes, u.Time.Round(time.Millisecond), lang.DefaultBudget.MaxValues, lang.DefaultBudget.MaxBytes, lang.DefaultBudget.Timeout)
	}
	if memProfile != "" {
		f, err := os.Create(memProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		runtime.GC()
		pprof.WriteHeapProfile(f)
		f.Close()
		runtime.KeepAlive(p)
		runtime.KeepAlive(cfg)
	}
	fmt.Println(elapsed.Nanoseconds())
	return 0
}

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

	"github.com/hashicorp/hcl/v2"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/graphcache"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
)

func main() {
	child := flag.String("child", "", "internal: plan the project in this directory and print the elapsed nanoseconds")
	sizes := flag.String("sizes", "1000,10000,100000", "comma-separated node counts")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of planning the last size to this file")
	flag.StringVar(&memProfile, "memprofile", "", "write a heap profile, taken after planning the last size, to this file")
	keep := flag.Bool("keep", false, "keep each generated project and print its directory, to plan or profile it again with foundry or -child")
	flag.BoolVar(&cached, "cached", false, "internal: with -child, load through the graph cache in DIR/.foundry/graph-cache")
	replan := flag.Bool("replan", true, "also plan each size again with the graph cache (a first plan that stores, then a hit), and print the ratio")
	runs := flag.Int("runs", 5, "plan each size this many times, each in a fresh process, the sizes taking turns; the median time is reported")
	forEach := flag.Bool("foreach", true, "also plan 10,000 steps written with for_each, beside the 10,000-block project (when -sizes has 10000)")
	flag.Parse()
	if *child != "" {
		os.Exit(runChild(*child, cached))
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
	// The same number of steps written with for_each: a few hundred lines instead of
	// 10,000 blocks, planned in the same rounds.
	var feDir string
	var feLines int
	var feTimes []time.Duration
	if *forEach && slices.Contains(ns, 10000) {
		dir, err := os.MkdirTemp("", "foundry-planbench-foreach-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(dir)
		if feLines, err = generateForEach(dir, 50, 200); err != nil {
			fail(err)
		}
		feDir = dir
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
		if feDir != "" {
			elapsed, _, err := measure(feDir)
			if err != nil {
				fail(err)
			}
			feTimes = append(feTimes, elapsed)
		}
	}
	// Re-planning: a first plan through the graph cache stores the graph, then each run is a
	// hit, measured the same way in a fresh process.
	var hits [][]time.Duration
	if *replan {
		hits = make([][]time.Duration, len(ns))
		for i := range ns {
			if err := os.MkdirAll(filepath.Join(dirs[i], workspace.StateDir), 0o755); err != nil {
				fail(err)
			}
			if _, _, err := measureCached(dirs[i], true); err != nil {
				fail(err)
			}
		}
		for r := 0; r < *runs; r++ {
			for i := range ns {
				elapsed, _, err := measureCached(dirs[i], true)
				if err != nil {
					fail(err)
				}
				hits[i] = append(hits[i], elapsed)
			}
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
	for i, n := range ns {
		if hits == nil {
			break
		}
		ts := hits[i]
		slices.Sort(ts)
		fmt.Printf("re-plan %d nodes with a graph cache hit: %v (%v-%v), %.3f× the first plan\n", n, ts[len(ts)/2].Round(time.Millisecond),
			ts[0].Round(time.Millisecond), ts[len(ts)-1].Round(time.Millisecond), float64(ts[len(ts)/2])/float64(median[n]))
	}
	if t, ok := median[10000]; ok && hits != nil {
		h := hits[slices.Index(ns, 10000)]
		hit := h[len(h)/2]
		fmt.Printf("goal: 10k re-plan under 0.1x the first plan and 150ms: %v, %.3fx (%s)\n", hit.Round(time.Millisecond),
			float64(hit)/float64(t), met(hit <= 150*time.Millisecond && float64(hit) <= 0.1*float64(t)))
	}
	if t, ok := median[10000]; ok && feTimes != nil {
		slices.Sort(feTimes)
		fe := feTimes[len(feTimes)/2]
		fmt.Printf("10k steps written with for_each (%d lines of HCL): %v, %.2fx the 10,000-block project's %v\n",
			feLines, fe.Round(time.Millisecond), float64(fe)/float64(t), t.Round(time.Millisecond))
	}
	// The goals of issue 18, beside what this run measured: a first plan of 10k steps within
	// 1.5 s and 200 MiB, and 100k steps at no more than 1.5 times 10k's time per step.
	if t, ok := median[10000]; ok {
		fmt.Printf("goal: 10k nodes under 1.5s and 200 MiB: %v, %.1f MiB (%s)\n",
			t.Round(time.Millisecond), float64(peak[10000])/1024, met(t <= 1500*time.Millisecond && peak[10000] <= 200*1024))
		if t100, ok := median[100000]; ok {
			perStep := float64(t100) / 100000 / (float64(t) / 10000)
			fmt.Printf("goal: 100k nodes within 1.5x 10k's time per node: per node %v against %v, %.2fx (%s)\n",
				(t100 / 100000).Round(time.Microsecond/10), (t / 10000).Round(time.Microsecond/10), perStep, met(perStep <= 1.5))
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

// generateForEach writes blocks step blocks of perBlock instances each, with for_each over
// one set of keys: each instance mounts the output of the same key's instance in the block
// before. It returns the number of lines of HCL written.
func generateForEach(dir string, blocks, perBlock int) (int, error) {
	tool := filepath.Join(dir, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		return 0, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed \"base\" {\n  layer { files = { \"/bin/sh\" = host_file(%q) } }\n}\n", tool)
	fmt.Fprintf(&b, "locals {\n  keys = toset([for i in range(%d) : \"k${i}\"])\n}\n", perBlock)
	for i := 0; i < blocks; i++ {
		mounts := "{}"
		if i > 0 {
			mounts = fmt.Sprintf("{ \"/in\" = step.b%d[each.key].output[\"/out/o\"] }", i-1)
		}
		fmt.Fprintf(&b, "step \"b%d\" {\n  for_each = local.keys\n  image    = seed.base\n  run      = [\"sh\", \"-c\", \"echo %d ${each.key} > /out/o\"]\n  mounts   = %s\n  outputs  = [\"/out/o\"]\n}\n", i, i, mounts)
	}
	return strings.Count(b.String(), "\n"), os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(b.String()), 0o644)
}

var cpuProfile, memProfile string

// cached makes a child load through the graph cache (see measureCached).
var cached bool

// faults is the number of minor page faults the process has taken.
func faults() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Minflt
}

func measure(dir string) (time.Duration, int64, error) { return measureCached(dir, false) }

// measureCached plans dir in a child, through the graph cache when cached is set.
func measureCached(dir string, cached bool) (time.Duration, int64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(self, "-child", dir, "-cached="+strconv.FormatBool(cached), "-cpuprofile", cpuProfile, "-memprofile", memProfile)
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

func runChild(dir string, cached bool) int {
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
	var g *graph.Graph
	var cfg *lang.Config
	var diags hcl.Diagnostics
	var loaded time.Time
	f1 := f0
	if cached {
		// As the CLI does (cmd/foundry/project.go): the stat cache beside the graph cache.
		stat := digest.OpenStatCache(filepath.Join(dir, workspace.StateDir, "stat-cache"))
		var commit func() error
		g, cfg, diags, commit = graphcache.Load(dir, lang.Options{StatCache: stat}, filepath.Join(dir, workspace.StateDir, "graph-cache"), nil)
		if diags.HasErrors() {
			fmt.Fprintln(os.Stderr, diags.Error())
			return 1
		}
		loaded = time.Now()
		if cfg == nil {
			cfg = g.Config
		}
		defer func() {
			if err := commit(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			stat.Save()
		}()
	} else {
		cfg, diags = lang.Load(dir, lang.Options{})
		f1 = faults()
		if diags.HasErrors() {
			fmt.Fprintln(os.Stderr, diags.Error())
			return 1
		}
		loaded = time.Now()
		g, diags = graph.Compile(cfg)
	}
	compiled := time.Now()
	f2 := faults()
	if diags.HasErrors() {
		fmt.Fprintln(os.Stderr, diags.Error())
		return 1
	}
	p, err := plan.Make(g, plan.Options{})
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

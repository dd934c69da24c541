// Command apply benchmarks `foundry apply` as a user runs it (whole process, real sandboxes):
//
//   - a 41-step chain, cold (every step runs) and fully cached (nothing runs), with the
//     containerd and runc executors and, given -buildkit, in BuildKit, interleaved in the same
//     run; issue 18's goals are ratios to BuildKit: fully cached ≤ 0.5x with either executor,
//     cold per step ≤ 1.0x with containerd (the default executor);
//   - a no-op apply of a 10,000-step graph: time and peak RSS (goals of issue 18: ≤ 0.3 s,
//     ≤ 150 MiB);
//   - parallel efficiency of 100 sleep-bound steps (0.2 s each) at -parallelism 8: the ideal
//     time divided by the measured time.
//
// Run with `make bench` (it builds bin/foundry, and BuildKit with scripts/buildkit.sh, first). Numbers are medians of repeated runs;
// nothing here asserts a time.
package main

import (
	"flag"
	"fmt"
	"github.com/foundry-build/foundry/bench/benchutil"
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
	parts    = flag.String("parts", "chain,noop,parallel", "which measurements to make: chain (41 steps, cold and cached), noop (big graph), parallel")

	chainExecutors = flag.String("chain-executors", "containerd,runc", "executors the chain is measured with")
	buildkitDir    = flag.String("buildkit", "", "`DIR` holding buildkitd and buildctl (scripts/buildkit.sh prints it): the chain is also built in BuildKit, for the ratios")
	rounds         = flag.Int("rounds", 5, "chain rounds: each builds the chain cold once and fully cached 3 times per contender")
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
	exit(0)
}

// cleanups run at exit, also when a measurement fails: a started buildkitd must not outlive
// the bench.
var cleanups []func()

func atExit(f func()) { cleanups = append(cleanups, f) }

func exit(code int) {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	os.Exit(code)
}

// chainSteps is the length of the chain that benchChain builds in Foundry and in BuildKit.
const chainSteps = 41

// chainHCL is the chain for Foundry: step 0 writes /out/o, and each later step mounts the
// previous step's /out/o at /in and writes its own /out/o from it. nonce goes into step 0's
// output, so a new nonce makes every step run again (each step's input changes) while the
// seed stays imported.
func chainHCL(nonce string) func(*strings.Builder) {
	return func(b *strings.Builder) {
		for i := range chainSteps {
			if i == 0 {
				fmt.Fprintf(b, "step \"s0\" {\n  image = seed.bb\n  run = [\"sh\", \"-c\", \"echo 0 %s > /out/o\"]\n  outputs = [\"/out/o\"]\n}\n", nonce)
				continue
			}
			fmt.Fprintf(b, "step \"s%d\" {\n  image = seed.bb\n  mounts = { \"/in\" = step.s%d.output[\"/out/o\"] }\n  run = [\"sh\", \"-c\", \"cat /in > /out/o; echo %d >> /out/o\"]\n  outputs = [\"/out/o\"]\n}\n", i, i-1, i)
		}
	}
}

// contender is one way of building the chain, measured whole-process as a user runs it.
type contender struct {
	name         string
	run          func(nonce string) time.Duration // builds the chain with step 0 given nonce
	cold, cached []time.Duration
}

// benchChain measures the chain cold (every step runs; the seed or base image is already
// imported) and fully cached (nothing runs), with Foundry under each of -chain-executors and,
// given -buildkit, in BuildKit, in the same run and interleaved round by round, so that the
// ratios compare the same machine under the same load. Each round starts with a new nonce.
func benchChain() {
	var cs []*contender
	for _, e := range strings.Split(*chainExecutors, ",") {
		dir := project(chainHCL("warm-up")) // one project per executor: their caches stay apart
		atExit(func() { os.RemoveAll(dir) })
		last := "warm-up"
		cs = append(cs, &contender{name: "foundry/" + e, run: func(nonce string) time.Duration {
			if nonce != last { // a cached apply finds its files untouched, as a user's would
				writeProject(dir, chainHCL(nonce))
				last = nonce
			}
			d, _ := apply(dir, e, "8")
			return d
		}})
	}
	if *buildkitDir != "" {
		bk := startBuildkit(*buildkitDir)
		defer bk.stop() // frees its memory for the measurements that follow
		cs = append(cs, &contender{name: "buildkit", run: func(nonce string) time.Duration { return bk.build(chainDockerfile(nonce)) }})
	}
	for _, c := range cs {
		c.run("warm-up") // imports the seed or base image; not measured
	}
	for r := range *rounds {
		for i := range cs {
			c := cs[(i+r)%len(cs)] // who goes first rotates from round to round
			nonce := fmt.Sprintf("round-%d", r)
			c.cold = append(c.cold, c.run(nonce))
			for range 3 {
				c.cached = append(c.cached, c.run(nonce))
			}
		}
	}

	// The goals of issue 18: fully cached ≤ 0.5x BuildKit's with every executor; cold ≤ 1.0x
	// BuildKit's per step with the containerd executor (the default).
	cached := func(c *contender) time.Duration { return median(c.cached) }
	perStep := func(c *contender) time.Duration { return median(c.cold) / chainSteps }
	fmt.Printf("%d-step chain, fully cached (median of %d): %s%s\n", chainSteps, len(cs[0].cached),
		times(cs, cached), ratios(cs, cached, 0.5, ""))
	fmt.Printf("%d-step chain, cold per step (median of %d): %s%s\n", chainSteps, len(cs[0].cold),
		times(cs, perStep), ratios(cs, perStep, 1.0, "foundry/containerd"))
}

// times lists each contender's measure: "foundry/containerd 31.0 ms, buildkit 94.0 ms".
func times(cs []*contender, of func(*contender) time.Duration) string {
	var s []string
	for _, c := range cs {
		s = append(s, fmt.Sprintf("%s %.1f ms", c.name, float64(of(c))/float64(time.Millisecond)))
	}
	return strings.Join(s, ", ")
}

// ratios lists each Foundry contender's measure over BuildKit's (the last contender) and
// whether those named goalFor ("" for all) are within goal: " -> 0.33x, 0.31x (goal <= 0.5x: met)".
func ratios(cs []*contender, of func(*contender) time.Duration, goal float64, goalFor string) string {
	bk := cs[len(cs)-1]
	if bk.name != "buildkit" {
		return " (BuildKit not measured: no -buildkit)"
	}
	var s []string
	ok := true
	for _, c := range cs[:len(cs)-1] {
		r := float64(of(c)) / float64(of(bk))
		s = append(s, fmt.Sprintf("%.2fx", r))
		if (goalFor == "" || goalFor == c.name) && r > goal {
			ok = false
		}
	}
	who := goalFor
	if who != "" {
		who += " "
	}
	return fmt.Sprintf(" -> %s (goal %s<= %.1fx: %s)", strings.Join(s, ", "), who, goal, met(ok))
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
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
	t := median(noop)
	fmt.Printf("%d-step graph: no-op apply (-executor %s) median %s, peak RSS %.1f MiB (goal <= 0.3s and <= 150 MiB: %s)\n",
		*big, *fill, t.Round(time.Millisecond), float64(rss)/1024, met(t <= 300*time.Millisecond && rss <= 150*1024))
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
	writeProject(dir, body)
	return dir
}

// writeProject (re)writes dir's main.hcl: the seed and body.
func writeProject(dir string, body func(*strings.Builder)) {
	var b strings.Builder
	b.WriteString(seed)
	body(&b)
	must(os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(b.String()), 0o644))
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
		fmt.Fprintf(os.Stderr, "apply in %s failed: %v\n%s", dir, err, benchutil.Tail(string(out)))
		exit(1)
	}
	return d, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		exit(1)
	}
}

// Command bench-temporal measures the Temporal engine against the embedded one, in one run
// (issue 22's goals), with a Temporal server in this process and workers as processes:
//
//   - throughput: 200 sleep-bound steps (each sleeps -sleep) applied by the embedded engine
//     with -parallelism P, then on Temporal with 1, 2 and 4 workers of P slots each; printed as
//     each one's steps per second over the embedded engine's (ideal: 1, 2, 4), and over the
//     embedded engine's with as many slots as the workers together (this machine's ceiling
//     at that concurrency: the workers share its cores);
//   - per-step overhead: -trivial steps that do nothing, one at a time, embedded and on one
//     Temporal worker: the difference per step, and the ratio of the two.
//
// Every apply is of a fresh copy of testdata/fanout (nothing cached), with runc.
//
//	cd devtemporal && go run ./cmd/bench-temporal -foundry ../bin/foundry
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/foundry-build/foundry/devtemporal/cluster"
)

func main() {
	foundry := flag.String("foundry", "../bin/foundry", "the foundry `BINARY` to measure")
	steps := flag.Int("steps", 200, "sleep-bound steps per apply")
	sleep := flag.String("sleep", "1", "each sleep-bound step's sleep, in `SECONDS`")
	par := flag.Int("parallelism", 4, "steps at once: the embedded apply's, and each worker's")
	trivial := flag.Int("trivial", 40, "trivial steps for the per-step overhead")
	flag.Parse()
	bin, err := filepath.Abs(*foundry)
	if err != nil {
		fail(err)
	}
	scratch, err := os.MkdirTemp("", "bench-temporal-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(scratch)

	// n work steps, plus the seed step and the join: n+2 executed.
	vars := func(n int, sleep string) []string {
		return []string{"-var", fmt.Sprintf("n=%d", n), "-var", "sleep=" + sleep}
	}
	embedded := func(n int, sleep string, par int) time.Duration {
		return apply(bin, scratch, n, append([]string{"apply", "-auto-approve", "-progress", "plain", "-executor", "runc",
			"-parallelism", fmt.Sprint(par)}, vars(n, sleep)...))
	}
	// A cluster per measurement, so that no worker of an earlier one is left polling.
	onTemporal := func(workers, slots, n int, sleep string, applyPar int) time.Duration {
		c, err := cluster.Start(bin, filepath.Join(scratch, fmt.Sprintf("cluster-%d-%d", workers, time.Now().UnixNano())))
		if err != nil {
			fail(err)
		}
		defer c.Stop()
		for i := range workers {
			if _, err := c.Worker(fmt.Sprintf("w%d", i+1), slots); err != nil {
				fail(err)
			}
		}
		// One apply first, so that the image is in the registry and every worker has
		// imported it: the measured apply then measures steps.
		warm := max(2, workers*slots) // the join needs two work steps
		apply(bin, scratch, warm, c.ApplyArgs(append([]string{"-parallelism", "64"}, vars(warm, "0.3")...)...))
		return apply(bin, scratch, n, c.ApplyArgs(append([]string{"-parallelism", fmt.Sprint(applyPar)}, vars(n, sleep)...)...))
	}

	fmt.Printf("Temporal engine vs embedded: %d steps sleeping %ss, parallelism %d per worker (runc; fresh projects)\n", *steps, *sleep, *par)
	// Warm the embedded engine's image too (seed layout, runc rootfs), in a project of its own.
	embedded(*par, "0", *par)
	base := embedded(*steps, *sleep, *par)
	fmt.Printf("  %-22s %8s  %6.1f steps/s  1.00x\n", "embedded", base.Round(time.Millisecond), rate(*steps, base))
	for _, w := range []int{1, 2, 4} {
		d := onTemporal(w, *par, *steps, *sleep, 64)
		// The embedded engine with as many slots as the workers together: what this one
		// machine can do at that concurrency, so that the Temporal path's own cost shows.
		same := base
		if w > 1 {
			same = embedded(*steps, *sleep, w**par)
		}
		fmt.Printf("  %-22s %8s  %6.1f steps/s  %.2fx (ideal %dx); embedded with %d slots %s: %.2fx of it\n",
			fmt.Sprintf("temporal, %d worker(s)", w), d.Round(time.Millisecond), rate(*steps, d), base.Seconds()/d.Seconds(), w,
			w**par, same.Round(time.Millisecond), same.Seconds()/d.Seconds())
	}

	fmt.Printf("\nPer-step overhead: %d trivial steps, one at a time\n", *trivial)
	e := embedded(*trivial, "0", 1)
	t := onTemporal(1, 1, *trivial, "0", 1)
	n := float64(*trivial + 2)
	per := (t - e) / time.Duration(n)
	fmt.Printf("  embedded %s (%s/step), temporal %s (%s/step): +%s per step, %.2fx\n",
		e.Round(time.Millisecond), (e / time.Duration(n)).Round(time.Millisecond),
		t.Round(time.Millisecond), (t / time.Duration(n)).Round(time.Millisecond), per.Round(time.Millisecond), t.Seconds()/e.Seconds())
}

// apply applies a fresh copy of testdata/fanout with args and returns its wall time; it
// fails the bench unless all n+2 steps ran.
func apply(bin, scratch string, n int, args []string) time.Duration {
	dir, err := cluster.CopyProject("testdata/fanout", scratch)
	if err != nil {
		fail(err)
	}
	r, err := cluster.Run(bin, dir, nil, args...)
	if err != nil {
		fail(err)
	}
	if want := fmt.Sprintf("%d executed, 0 cached, 0 failed", n+2); r.Code != 0 || !strings.Contains(r.Stdout, want) {
		fail(fmt.Errorf("foundry %s: exit %d, want %q:\n%s%s", strings.Join(args, " "), r.Code, want, r.Stdout, r.Stderr))
	}
	return r.Elapsed
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-temporal:", err)
	os.Exit(1)
}

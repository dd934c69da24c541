// Command execbench measures the sandboxed executors against a raw `runc run`:
//
//   - per-step overhead: a trivial step (`true`) run N times by the runc executor, the
//     containerd executor and a raw `runc run` of an equivalent prepared bundle (same spec,
//     a rootfs copy that already has its mount points), interleaved step by step so that load
//     from other work on the machine hits all three alike; reported as median and mean per
//     step and as ratios to the raw run;
//   - parallel efficiency: S sleep-bound steps (`sleep 0.2`) at parallelism P, reported as
//     ideal wall time (S*sleep/P) divided by the measured wall time.
//
// It needs root, runc, busybox and (for the containerd rows) a containerd at
// --containerd-address. scripts/bench.sh runs it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/executors/containerd"
	"github.com/foundry-build/foundry/executors/executortest"
	"github.com/foundry-build/foundry/executors/runc"
)

func main() {
	n := flag.Int("n", 60, "trivial steps per executor")
	steps := flag.Int("steps", 100, "sleep-bound steps for the parallel measurement")
	par := flag.Int("parallel", 8, "parallelism for the parallel measurement")
	sleep := flag.Duration("sleep", 200*time.Millisecond, "duration of each sleep-bound step")
	addr := flag.String("containerd-address", envOr("FOUNDRY_CONTAINERD_ADDRESS", containerd.DefaultAddress), "containerd socket")
	which := flag.String("executors", "runc,containerd", "executors to measure")
	flag.BoolVar(&noSharedShim, "no-shared-shim", false, "containerd: one shim per task (to compare)")
	flag.Parse()
	if err := run(*n, *steps, *par, *sleep, *addr, strings.Split(*which, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "execbench:", err)
		os.Exit(1)
	}
}

var noSharedShim bool

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type bench struct {
	name string
	step func(i int) error // one trivial step
	e    executors.Executor
	img  executors.Image
	d    []time.Duration
}

func run(n, steps, par int, sleep time.Duration, addr string, which []string) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "foundry-execbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rootfs, err := executortest.BuildRootfs()
	if err != nil {
		return err
	}
	defer os.RemoveAll(rootfs)
	lay, err := executortest.BuildLayout()
	if err != nil {
		return err
	}
	defer os.RemoveAll(lay.LayoutPath)
	tag := randHex(3)

	raw, err := rawRunc(tmp, rootfs, tag, "raw", "/bin/true")
	if err != nil {
		return err
	}
	rawSleep, err := rawRunc(tmp, rootfs, tag, "raw-sleep", "/bin/sleep", fmt.Sprint(sleep.Seconds()))
	if err != nil {
		return err
	}
	benches := []*bench{raw}
	for _, w := range which {
		switch strings.TrimSpace(w) {
		case "runc":
			e, err := runc.New(runc.Options{Root: filepath.Join(tmp, "runc")})
			if err != nil {
				return err
			}
			defer e.Close()
			benches = append(benches, &bench{name: "runc executor", e: e, img: executors.Image{Rootfs: rootfs, Env: lay.Env}})
		case "containerd":
			if !containerd.Available(ctx, addr) {
				return fmt.Errorf("containerd at %s does not answer (scripts/containerd.sh start)", addr)
			}
			e, err := containerd.New(ctx, containerd.Options{Address: addr, NoSharedShim: noSharedShim})
			if err != nil {
				return err
			}
			defer e.Close()
			benches = append(benches, &bench{name: "containerd executor", e: e, img: lay})
		case "":
		default:
			return fmt.Errorf("unknown executor %q", w)
		}
	}
	seq := 0
	newAction := func(b *bench, argv ...string) (*executors.Action, error) {
		seq++
		out := filepath.Join(tmp, "out", fmt.Sprint(seq))
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
		return &executors.Action{ID: fmt.Sprintf("bench-%s-%d", tag, seq), Image: b.img, Argv: argv, OutDir: out}, nil
	}
	for _, b := range benches {
		if b.e == nil {
			continue
		}
		b := b
		b.step = func(int) error {
			a, err := newAction(b, "/bin/true")
			if err != nil {
				return err
			}
			r, err := b.e.Run(ctx, a)
			if err != nil {
				return err
			}
			if r.ExitCode != 0 {
				return fmt.Errorf("%s: exit %d", b.name, r.ExitCode)
			}
			return nil
		}
		// Warm-up: image import, page cache, first shim.
		for i := 0; i < 3; i++ {
			if err := b.step(i); err != nil {
				return fmt.Errorf("%s warm-up: %w", b.name, err)
			}
		}
	}
	for i := 0; i < 3; i++ {
		if err := raw.step(i); err != nil {
			return fmt.Errorf("raw runc warm-up: %w", err)
		}
	}

	// Steps alternate between the benches one by one (in a rotating order), so that bursts of
	// load from other work on the machine hit all of them alike.
	for i := 0; i < n; i++ {
		for j := range benches {
			b := benches[(i+j)%len(benches)]
			t0 := time.Now()
			if err := b.step(i); err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			b.d = append(b.d, time.Since(t0))
		}
	}
	fmt.Printf("per-step time of a trivial step (`true`), %d steps each, interleaved step by step:\n", n)
	rawMed, rawMean := stats(raw.d)
	for _, b := range benches {
		med, mean := stats(b.d)
		fmt.Printf("  %-22s median %6.1f ms  mean %6.1f ms  ratio to raw runc run: median %.2fx  mean %.2fx\n",
			b.name, ms(med), ms(mean), float64(med)/float64(rawMed), float64(mean)/float64(rawMean))
	}

	ideal := time.Duration(steps) * sleep / time.Duration(par)
	fmt.Printf("parallel efficiency (ideal/actual wall time), %d steps of `sleep %g` at parallelism %d (ideal %.2f s):\n",
		steps, sleep.Seconds(), par, ideal.Seconds())
	{
		wall, err := parallel(steps, par, func(int) error { return rawSleep.step(0) })
		if err != nil {
			return fmt.Errorf("raw runc parallel: %w", err)
		}
		fmt.Printf("  %-22s wall %.2f s  efficiency %.2f\n", "raw runc run", wall.Seconds(), float64(ideal)/float64(wall))
	}
	for _, b := range benches {
		if b.e == nil {
			continue
		}
		acts := make([]*executors.Action, steps)
		for i := range acts {
			if acts[i], err = newAction(b, "/bin/sleep", fmt.Sprint(sleep.Seconds())); err != nil {
				return err
			}
		}
		wall, err := parallel(steps, par, func(i int) error {
			r, err := b.e.Run(ctx, acts[i])
			if err == nil && r.ExitCode != 0 {
				err = fmt.Errorf("exit %d", r.ExitCode)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("%s parallel: %w", b.name, err)
		}
		fmt.Printf("  %-22s wall %.2f s  efficiency %.2f\n", b.name, wall.Seconds(), float64(ideal)/float64(wall))
	}
	return nil
}

// rawRunc prepares one bundle (the spec the executors would write, a rootfs copy that has its
// mount points) and returns a bench that runs it with a bare `runc run`.
func rawRunc(tmp, rootfs, tag, name string, argv ...string) (*bench, error) {
	bundle := filepath.Join(tmp, name+"-bundle")
	out := filepath.Join(tmp, name+"-out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	if b, err := exec.Command("cp", "-a", rootfs, filepath.Join(bundle, "rootfs")).CombinedOutput(); err != nil {
		if err := os.MkdirAll(bundle, 0o755); err != nil {
			return nil, err
		}
		if b, err = exec.Command("cp", "-a", rootfs, filepath.Join(bundle, "rootfs")).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("copy rootfs: %v: %s", err, b)
		}
	}
	for _, d := range []string{"proc", "dev", "sys", "tmp", "out"} {
		if err := os.MkdirAll(filepath.Join(bundle, "rootfs", d), 0o755); err != nil {
			return nil, err
		}
	}
	a := &executors.Action{ID: "bench-raw", Argv: argv, OutDir: out, Env: []string{"PATH=/bin"}}
	// The raw baseline binds /out and /tmp from plain directories: no bounded writable space.
	w := filepath.Join(bundle, "rw")
	for _, d := range []string{"out", "tmp"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o777); err != nil {
			return nil, err
		}
		if err := os.Chown(filepath.Join(w, d), 65534, 65534); err != nil {
			return nil, err
		}
	}
	spec, err := runc.Spec(a, runc.SpecOptions{RootPath: "rootfs", CgroupsPath: "/foundry-bench/" + tag + "/" + name, Seccomp: true, Writable: w})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return nil, err
	}
	// Concurrent containers of one bundle need their own cgroups: runc's default path is
	// derived from the container ID when the spec names none.
	spec.Linux.CgroupsPath = ""
	if b, err = json.Marshal(spec); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return nil, err
	}
	state := filepath.Join(tmp, "raw-state")
	var mu sync.Mutex
	seq := 0
	return &bench{name: "raw runc run", step: func(int) error {
		mu.Lock()
		seq++
		id := fmt.Sprintf("%s-%s-%d", name, tag, seq)
		mu.Unlock()
		cmd := exec.Command("runc", "--root", state, "run", "--bundle", bundle, id)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("runc run: %v: %s", err, b)
		}
		return nil
	}}, nil
}

// parallel runs step(0..n-1) on p workers and returns the wall time.
func parallel(n, p int, step func(i int) error) (time.Duration, error) {
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	t0 := time.Now()
	for w := 0; w < p; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := step(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	return time.Since(t0), firstErr
}

func stats(d []time.Duration) (median, mean time.Duration) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return s[len(s)/2], sum / time.Duration(len(s))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Command reconstruct measures a reconstruction job's own overhead (issue 19): of each
// round's wall time, what is neither its builder's run nor its cases' runs.
//
// It applies examples/reconstruct -runs times, each in a fresh copy (no state, no cache: both
// rounds really run: round 1 rejected on the sealed suite, round 2 admitted), reads the job
// with `foundry jobs show sorter -json`, and for every round computes
//
//	overhead = wall - builder_wall - build_wall - cases_wall   (build_wall: 0 without a build block)
//
// builder_wall is the builder's run as its executor measured it (executors.Result's Started
// to Finished), so what the executor leaves out of that is overhead: with containerd the
// container and task are created before Started, with runc `runc run` creates the container
// after it. cases_wall is the wall time of the suite runs, their sandboxes included. It
// prints per-round medians and ranges, and where the overhead goes as far as the progress
// events' timestamps bound it.
//
// Run with `make bench` (it builds bin/foundry first). There is no goal: nothing here passes
// or fails.
package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/foundry-build/foundry/bench/benchutil"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/state"
)

var (
	bin      = flag.String("foundry", "bin/foundry", "the foundry binary to measure")
	executor = flag.String("executor", "containerd", "executor for the builder and the case runs (containerd or runc)")
	runs     = flag.Int("runs", 5, "applies, each in a fresh copy of the example")
	example  = flag.String("example", "examples/reconstruct", "the project to copy and apply")
)

// builder is the node the builder runs as, in node_started and node_done.
const builder = "capability.sorter.reconstruct.builder"

// phases name the parts of a round's overhead the progress events bound, in round order.
var phases = []string{
	"writing /job, keying the builder",             // reconstruct_round to the builder's node_started
	"builder sandbox and outputs, less its run",    // node_done's elapsed_ns less builder_wall
	"package, candidate image, state writes",       // node_done to the last suite_evaluated, less cases_wall
	"verdict; if admitted, signing and publishing", // last suite_evaluated to candidate_rejected or capability_admitted
	"other (the overhead less the above)",          // the round's wall and the events' span differ slightly
}

// round is one measured round: what the job recorded, and its overhead by phase.
type round struct {
	n     int
	used  state.Usage
	phase []time.Duration // by phases
}

func (r round) overhead() time.Duration {
	return r.used.Wall - r.used.BuilderWall - r.used.BuildWall - r.used.CasesWall
}

func (r round) share() float64 { return float64(r.overhead()) / float64(r.used.Wall) }

func main() {
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	must(err)
	*bin = abs

	// A first apply warms the executor (its image store, the page cache); it is not measured.
	var all []round
	for i := range *runs + 1 {
		if i == 0 {
			fmt.Fprintf(os.Stderr, "warm-up apply (-executor %s)\n", *executor)
		} else {
			fmt.Fprintf(os.Stderr, "apply %d of %d\n", i, *runs)
		}
		rs, err := measure()
		must(err)
		if i > 0 {
			all = append(all, rs...)
		}
	}
	report(all)
}

// measure applies a fresh copy of the example and returns its job's rounds.
func measure() ([]round, error) {
	dir, err := os.MkdirTemp("", "foundry-reconstructbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := benchutil.CopyProject(*example, dir); err != nil {
		return nil, err
	}
	_, progress, err := foundry(dir, "apply", "-auto-approve", "-progress", "json", "-executor", *executor)
	if err != nil {
		return nil, err
	}
	js, _, err := foundry(dir, "jobs", "show", "sorter", "-json")
	if err != nil {
		return nil, err
	}
	var job struct {
		Status string `json:"status"`
		Rounds []struct {
			N    int         `json:"n"`
			Used state.Usage `json:"used"`
		} `json:"round_list"`
	}
	if err := json.Unmarshal(js, &job); err != nil {
		return nil, fmt.Errorf("foundry jobs show: %w", err)
	}
	if job.Status != "admitted" {
		return nil, fmt.Errorf("the job is %s; the example's is admitted in round 2", job.Status)
	}
	marks := eventMarks(progress)
	var rs []round
	for _, jr := range job.Rounds {
		r := round{n: jr.N, used: jr.Used}
		m := marks[jr.N]
		if m == nil || m.start.IsZero() || m.builderStart.IsZero() || m.builderDone.IsZero() || m.lastSuite.IsZero() || m.end.IsZero() {
			return nil, fmt.Errorf("round %d: the progress events do not bound its phases: %+v", jr.N, m)
		}
		r.phase = []time.Duration{
			m.builderStart.Sub(m.start),
			m.builderElapsed - r.used.BuilderWall,
			m.lastSuite.Sub(m.builderDone) - r.used.CasesWall,
			m.end.Sub(m.lastSuite),
		}
		other := r.overhead()
		for _, d := range r.phase {
			other -= d
		}
		r.phase = append(r.phase, other)
		rs = append(rs, r)
	}
	return rs, nil
}

// marks are the times of the events that bound one round's phases.
type marks struct {
	start, builderStart, builderDone, lastSuite, end time.Time
	builderElapsed                                   time.Duration
}

// eventMarks reads the apply's JSON progress events (on its stderr: lines that are not
// events are skipped)
// and returns each round's marks. An event belongs to the round whose reconstruct_round came
// last: the example has one job, and its rounds run one after another.
func eventMarks(out []byte) map[int]*marks {
	byRound := map[int]*marks{}
	var m *marks
	for _, line := range bytes.Split(out, []byte("\n")) {
		var e event.Event
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		if e.Type == "reconstruct_round" {
			m = &marks{start: e.Time}
			var n int
			fmt.Sscanf(e.Recipe, "reconstruct round %d", &n)
			byRound[n] = m
			continue
		}
		if m == nil {
			continue
		}
		switch {
		case e.Type == "node_started" && e.Node == builder:
			m.builderStart = e.Time
		case e.Type == "node_done" && e.Node == builder:
			m.builderDone, m.builderElapsed = e.Time, e.Elapsed
		case e.Type == "suite_evaluated":
			m.lastSuite = e.Time
		case e.Type == "candidate_rejected" || e.Type == "capability_admitted":
			m.end = e.Time
		}
	}
	return byRound
}

// report prints the rounds' medians and ranges, round by round and over all, the headline,
// and the overhead by phase.
func report(all []round) {
	byN := map[int][]round{}
	for _, r := range all {
		byN[r.n] = append(byN[r.n], r)
	}
	ns := slices.Sorted(maps.Keys(byN))
	fmt.Printf("reconstruction rounds of %s, -executor %s, %d applies: median (min-max), ms\n", filepath.Base(*example), *executor, *runs)
	fmt.Printf("%-7s %-17s %-17s %-17s %-17s %s\n", "round", "wall", "builder", "cases", "overhead", "overhead share")
	row := func(name string, rs []round) {
		ms := func(of func(round) time.Duration) string {
			lo, med, hi := stats(rs, func(r round) float64 { return float64(of(r)) / float64(time.Millisecond) })
			return fmt.Sprintf("%.0f (%.0f-%.0f)", med, lo, hi)
		}
		lo, med, hi := stats(rs, func(r round) float64 { return 100 * r.share() })
		fmt.Printf("%-7s %-17s %-17s %-17s %-17s %.0f%% (%.0f-%.0f%%)\n", name,
			ms(func(r round) time.Duration { return r.used.Wall }), ms(func(r round) time.Duration { return r.used.BuilderWall }),
			ms(func(r round) time.Duration { return r.used.CasesWall }), ms(round.overhead), med, lo, hi)
	}
	for _, n := range ns {
		row(fmt.Sprint(n), byN[n])
	}
	row("all", all)

	med := func(of func(round) time.Duration) time.Duration {
		_, m, _ := stats(all, func(r round) float64 { return float64(of(r)) })
		return time.Duration(m).Round(time.Millisecond)
	}
	_, share, _ := stats(all, round.share)
	var over, wall time.Duration
	for _, r := range all {
		over, wall = over+r.overhead(), wall+r.used.Wall
	}
	fmt.Printf("reconstruction round overhead (%s): median %.0f%% of the round (%v of %v); builder %v, cases %v; over all %d rounds %.0f%% (%v of %v)\n",
		*executor, 100*share, med(round.overhead), med(func(r round) time.Duration { return r.used.Wall }),
		med(func(r round) time.Duration { return r.used.BuilderWall }), med(func(r round) time.Duration { return r.used.CasesWall }),
		len(all), 100*float64(over)/float64(wall), over.Round(time.Millisecond), wall.Round(time.Millisecond))

	fmt.Printf("where the overhead goes (median ms, from the progress events):\n%-46s", "")
	for _, n := range ns {
		fmt.Printf(" %8s", fmt.Sprintf("round %d", n))
	}
	fmt.Println()
	for i, p := range phases {
		fmt.Printf("%-46s", p)
		for _, n := range ns {
			_, m, _ := stats(byN[n], func(r round) float64 { return float64(r.phase[i]) / float64(time.Millisecond) })
			fmt.Printf(" %8.0f", m)
		}
		fmt.Println()
	}
}

// stats returns the least, the median (the upper one of an even count) and the greatest of
// of(r) over rs.
func stats[T cmp.Ordered](rs []round, of func(round) T) (lo, med, hi T) {
	xs := make([]T, len(rs))
	for i, r := range rs {
		xs[i] = of(r)
	}
	slices.Sort(xs)
	return xs[0], xs[len(xs)/2], xs[len(xs)-1]
}

// foundry runs the binary in dir and returns its standard output and standard error (where
// progress goes).
func foundry(dir string, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.Command(*bin, args...)
	cmd.Dir = dir
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("foundry %s in %s: %v\n%s%s", strings.Join(args, " "), dir, err, benchutil.Tail(string(out)), benchutil.Tail(errBuf.String()))
	}
	return out, errBuf.Bytes(), nil
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

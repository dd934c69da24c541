// Command laboratory is the blueprint's comparison of a missing capability (its §8: "compare
// preinstalled, missing-with-reconstruction and missing-with-reconstruction-disabled
// conditions from clean, identical seeds"), on examples/laboratory, whose step.tally needs
// capability.counts (busybox uniq -c behind a JSON adapter):
//
//   - preinstalled: the tool is in the image. examples/laboratory/conditions/preinstalled.hcl,
//     copied next to main.hcl, is a recipe that packages the reference image's uniq -c; it is
//     evaluated and admitted as any recipe is, and no builder runs.
//   - reconstruction: the example as it is. No recipe provides the capability; its builder
//     proposes candidates from the job, differentially tested against the reference.
//   - disabled: the example without its reconstruct block (nor the reference it declares,
//     which the sealed suite then no longer expects): nothing can provide the capability.
//
// Each condition is applied -runs times, interleaved, each time in a fresh copy of the
// example (no state, no cache, no registry; the same seeds, made from the host's
// /bin/busybox). For each it prints the apply's wall time (median and range), the probes
// (dev and repair case runs, and shrinking runs, as a reconstruction's budget counts them:
// the job's for reconstruction, the suites' dev and repair cases otherwise), the candidates
// evaluated, the sealed cases judged, builder runs, and the outcome: what was admitted
// and whether step.tally ran, or the apply's error.
//
// Run with `make bench` (it builds bin/foundry first). There is no goal: nothing here passes
// or fails except an apply whose outcome is not its condition's.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/foundry-build/foundry/bench/benchutil"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

var (
	bin      = flag.String("foundry", "bin/foundry", "the foundry binary to measure")
	executor = flag.String("executor", "runc", "executor for every sandbox (containerd or runc)")
	runs     = flag.Int("runs", 2, "applies of each condition, each in a fresh copy of the example")
	example  = flag.String("example", "examples/laboratory", "the project to copy and apply")
)

const (
	capability = "capability.counts"
	builder    = capability + ".reconstruct.builder"
	waiter     = "step.tally"
)

// A condition is one way the capability is (or is not) available: how the copy of the
// example is changed, and whether its apply should succeed.
type condition struct {
	name    string
	prepare func(dir string) error
	succeed bool
}

var conditions = []condition{
	{"preinstalled", func(dir string) error {
		return copyFile(filepath.Join(*example, "conditions", "preinstalled.hcl"), filepath.Join(dir, "preinstalled.hcl"))
	}, true},
	{"missing, reconstructed", func(string) error { return nil }, true},
	{"missing, reconstruction disabled", disableReconstruction, false},
}

// measurement is one apply of one condition.
type measurement struct {
	wall                          time.Duration
	probes, candidates, sealed    int
	builderRuns, rejected         int
	admitted, waiterRan, exitCode int
	outcome                       string
}

func main() {
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	must(err)
	*bin = abs

	// A first apply of each condition warms the executor (its image store, the page
	// cache); it is not measured.
	byCond := map[string][]measurement{}
	for i := range *runs + 1 {
		for _, c := range conditions {
			what := "warm-up"
			if i > 0 {
				what = fmt.Sprintf("apply %d of %d", i, *runs)
			}
			fmt.Fprintf(os.Stderr, "%s: %s (-executor %s)\n", c.name, what, *executor)
			m, err := measure(c)
			must(err)
			if i > 0 {
				byCond[c.name] = append(byCond[c.name], m)
			}
		}
	}
	report(byCond)
}

// measure applies condition c in a fresh copy of the example.
func measure(c condition) (measurement, error) {
	dir, err := os.MkdirTemp("", "foundry-laboratorybench-")
	if err != nil {
		return measurement{}, err
	}
	defer os.RemoveAll(dir)
	if err := benchutil.CopyProject(*example, dir); err != nil {
		return measurement{}, err
	}
	if err := c.prepare(dir); err != nil {
		return measurement{}, fmt.Errorf("%s: %w", c.name, err)
	}
	cmd := exec.Command(*bin, "apply", "-auto-approve", "-progress", "json", "-executor", *executor)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	m := measurement{wall: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		m.exitCode = ee.ExitCode()
	} else if err != nil {
		return m, err
	}
	if (m.exitCode == 0) != c.succeed {
		return m, fmt.Errorf("%s: apply exited %d\n%s%s", c.name, m.exitCode, benchutil.Tail(stdout.String()), benchutil.Tail(stderr.String()))
	}

	admittedAs := ""
	for _, e := range events(stderr.Bytes()) {
		switch {
		case e.Type == "suite_evaluated" && e.Cases != nil && e.Suite == "sealed":
			m.sealed += *e.Cases
		case e.Type == "suite_evaluated" && e.Cases != nil:
			m.probes += *e.Cases
		case e.Type == "candidate_rejected":
			m.candidates++
			m.rejected++
		case e.Type == "capability_admitted":
			m.candidates++
			m.admitted++
			admittedAs = e.Recipe
		case e.Type == "node_done" && e.Node == builder:
			m.builderRuns++
		case e.Type == "node_done" && e.Node == waiter:
			m.waiterRan++
		}
	}
	// A reconstruction's probes are its job's: the dev cases and the shrinking runs.
	if m.builderRuns > 0 {
		show := exec.Command(*bin, "jobs", "show", "counts", "-json")
		show.Dir = dir
		out, err := show.Output()
		if err != nil {
			return m, fmt.Errorf("%s: foundry jobs show: %w", c.name, err)
		}
		var job struct {
			Used state.Usage `json:"used"`
		}
		if err := json.Unmarshal(out, &job); err != nil {
			return m, fmt.Errorf("%s: foundry jobs show: %w", c.name, err)
		}
		m.probes = job.Used.Probes
	}
	switch {
	case m.admitted > 0 && m.waiterRan > 0:
		m.outcome = fmt.Sprintf("%s admitted (%d rejected); %s ran", admittedAs, m.rejected, waiter)
	case m.exitCode != 0:
		why, err := missingReason(dir)
		if err != nil {
			return m, fmt.Errorf("%s: %w", c.name, err)
		}
		if why == "" { // failed otherwise: what the apply said last
			why = strings.TrimSuffix(lastLine(stderr.String()), ".")
		}
		m.outcome = fmt.Sprintf("apply failed (exit %d), %s ran %d time(s): %s", m.exitCode, waiter, m.waiterRan, why)
	default:
		m.outcome = fmt.Sprintf("exit %d, %d admitted, %s ran %d time(s)", m.exitCode, m.admitted, waiter, m.waiterRan)
	}
	return m, nil
}

// disableReconstruction removes the capability's reconstruct block from the copy's
// main.hcl, and with it the reference the sealed suite expects its outputs from.
func disableReconstruction(dir string) error {
	p := filepath.Join(dir, "main.hcl")
	src, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	f, diags := hclwrite.ParseConfig(src, p, hcl.InitialPos)
	if diags.HasErrors() {
		return diags
	}
	removed := false
	for _, b := range f.Body().Blocks() {
		if b.Type() != "capability" || !slices.Equal(b.Labels(), []string{strings.TrimPrefix(capability, "capability.")}) {
			continue
		}
		for _, inner := range b.Body().Blocks() {
			switch {
			case inner.Type() == "reconstruct":
				removed = b.Body().RemoveBlock(inner)
			case inner.Type() == "suite" && slices.Equal(inner.Labels(), []string{"sealed"}):
				for _, g := range inner.Body().Blocks() {
					if g.Type() == "generate" {
						g.Body().RemoveAttribute("expect")
					}
				}
			}
		}
	}
	if !removed {
		return fmt.Errorf("%s: no reconstruct block in %s", p, capability)
	}
	return os.WriteFile(p, f.Bytes(), 0o644)
}

// events are the JSON progress events of an apply's standard error (other lines skipped).
func events(stderr []byte) []event.Event {
	var out []event.Event
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e event.Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type != "" {
			out = append(out, e)
		}
	}
	return out
}

// lastLine is the last line of an apply's standard error: what it says when it fails.
func lastLine(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	return lines[len(lines)-1]
}

// missingReason is why the plan of dir says the capability is missing ("" when it is not):
// the apply itself only counts the nodes it could not produce.
func missingReason(dir string) (string, error) {
	cmd := exec.Command(*bin, "plan", "-json")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("foundry plan -json: %w", err)
	}
	var p struct {
		Capabilities []struct{ Address, Status, Reason string }
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return "", fmt.Errorf("foundry plan -json: %w", err)
	}
	for _, c := range p.Capabilities {
		if c.Address == capability && c.Status == "missing" {
			return fmt.Sprintf("%s is missing (%s)", capability, c.Reason), nil
		}
	}
	return "", nil
}

// report prints one row per condition: the median wall time (the upper one of an even
// count) and its range, and the counts
// of the last apply (they are the same in every apply of a condition but for the sealed
// batch's size, which repeated generated inputs make vary).
func report(byCond map[string][]measurement) {
	fmt.Printf("%s from clean, identical seeds, -executor %s, %d apply(ies) each, fresh state and cache each:\n", filepath.Base(*example), *executor, *runs)
	fmt.Printf("%-34s %-22s %7s %11s %8s %8s  %s\n", "condition", "wall, s: median (range)", "probes", "candidates", "sealed", "builder", "outcome")
	for _, c := range conditions {
		ms := byCond[c.name]
		walls := make([]float64, len(ms))
		for i, m := range ms {
			walls[i] = m.wall.Seconds()
		}
		slices.Sort(walls)
		last := ms[len(ms)-1]
		fmt.Printf("%-34s %-22s %7d %11d %8d %8d  %s\n", c.name,
			fmt.Sprintf("%.1f (%.1f-%.1f)", walls[len(walls)/2], walls[0], walls[len(walls)-1]),
			last.probes, last.candidates, last.sealed, last.builderRuns, last.outcome)
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

package run_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/run/runtest"
	"github.com/foundry-build/foundry/engine/trace"
	"github.com/foundry-build/foundry/engine/trace/tracetest"
)

// An apply keeps its trace with the run: it passes the strict check of the format, its
// spans nest on each track and lie within the apply's span, which is as long as the run;
// each node has its span with its outcome; a second apply records cache hits as instants;
// the critical path is the chain that ended the apply.
func TestApplyKeepsItsTrace(t *testing.T) {
	p := runtest.Write(t, map[string]string{"main.hcl": hostSeed + `
seed "more" {
  layer { from = seed.host }
  layer { files = { "/more" = "more" } }
  env = { PATH = "/usr/bin:/bin" }
}
step "slow" {
  image   = seed.more
  run     = ["sh", "-c", "sleep 0.3; echo a > $FOUNDRY_OUT/o"]
  outputs = ["/out/o"]
}
step "quick" {
  image   = seed.host
  run     = ["sh", "-c", "echo q > $FOUNDRY_OUT/o"]
  outputs = ["/out/o"]
}
step "fails" {
  image   = seed.host
  run     = ["false"]
}
`})
	a := p.Apply(t, context.Background(), run.Options{})
	if len(a.Result.Failed) != 1 {
		t.Fatalf("failed %v, want step.fails", a.Result.Failed)
	}
	ws, err := p.Workspace()
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	events, summary := ws.TracePaths(a.Result.RunID)
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tracetest.Check(b)
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	if wall := time.Duration(c.Root.Dur) * time.Microsecond; (wall - a.Result.Elapsed).Abs() > time.Millisecond {
		t.Errorf("the apply's span is %v long, the apply took %v", wall, a.Result.Elapsed)
	}
	outcome := map[string]string{}
	phases := map[string]int{}
	for _, s := range c.Spans {
		switch s.Cat {
		case "node":
			outcome[s.Name], _ = s.Args["outcome"].(string)
			if name := c.Tracks[s.Tid]; (s.Name[:5] != "seed.") != (len(name) > 4 && name[:4] == "slot") {
				t.Errorf("%s on track %q: a step holds a slot's track, a seed an engine's", s.Name, name)
			}
		case "phase":
			phases[s.Name]++
		}
	}
	want := map[string]string{"seed.host": "built", "seed.more": "built", "step.slow": "executed", "step.quick": "executed", "step.fails": "failed"}
	for a, o := range want {
		if outcome[a] != o {
			t.Errorf("%s: span outcome %q, want %q (all: %v)", a, outcome[a], o, outcome)
		}
	}
	for _, ph := range []string{"seed build", "cache lookup", "inputs", "sandbox start", "run", "store outputs", "cache write"} {
		if phases[ph] == 0 {
			t.Errorf("no %q phase span (%v)", ph, phases)
		}
	}
	// step.slow waited on its inputs (seed.more, which waited on seed.host) until the last
	// of them settled, beside the lanes; then for a slot, until it started on one.
	node := map[string]tracetest.Span{}
	for _, s := range c.Spans {
		if s.Cat == "node" {
			node[s.Name] = s
		}
	}
	waits := map[string]tracetest.Span{}
	for i, s := range c.Async {
		waits[c.AsyncIDs[i]+": "+s.Name] = s
	}
	inputs, ok := waits["step.slow: waiting on inputs"]
	more, slow := node["seed.more"], node["step.slow"]
	if !ok || inputs.Cat != "waiting" || inputs.Ts+inputs.Dur < more.Ts+more.Dur || inputs.Ts+inputs.Dur > slow.Ts {
		t.Errorf("step.slow waited on its inputs %+v; seed.more settled at %d, step.slow started at %d (waits %v)",
			inputs, more.Ts+more.Dur, slow.Ts, waits)
	}
	if _, ok := waits["seed.host: waiting on inputs"]; ok {
		t.Errorf("seed.host, which needs nothing, waited on inputs: %v", waits)
	}
	if s, ok := waits["step.slow: waiting for a slot"]; ok && s.Ts+s.Dur > slow.Ts {
		t.Errorf("step.slow waited for a slot until %d, after it started at %d", s.Ts+s.Dur, slow.Ts)
	}
	var sum trace.Summary
	if err := trace.Read(summary, &sum); err != nil {
		t.Fatal(err)
	}
	if want := []string{"seed.host", "seed.more", "step.slow"}; !slices.Equal(sum.Critical, want) {
		t.Errorf("critical path %v, want %v", sum.Critical, want)
	}
	if sum.Counts["executed"] != 2 || sum.Counts["failed"] != 1 || sum.WallUS != c.Root.Dur {
		t.Errorf("summary counts %v, wall %d; want 2 executed, 1 failed, wall %d", sum.Counts, sum.WallUS, c.Root.Dur)
	}
	var crit []string
	for _, s := range c.Spans {
		if c.Tracks[s.Tid] == "critical path" {
			crit = append(crit, s.Name)
		}
	}
	if !slices.Equal(crit, sum.Critical) {
		t.Errorf("critical path track %v, want %v", crit, sum.Critical)
	}

	// Again: the steps that succeeded are cache hits, instants of the apply's track.
	a2 := p.Apply(t, context.Background(), run.Options{})
	events2, _ := ws.TracePaths(a2.Result.RunID)
	b2, err := os.ReadFile(events2)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := tracetest.Check(b2)
	if err != nil {
		t.Fatalf("second trace: %v", err)
	}
	var hits []string
	for _, i := range c2.Instants {
		if i.Cat == "cache" {
			hits = append(hits, i.Name)
		}
	}
	slices.Sort(hits)
	if want := []string{"step.quick", "step.slow"}; !slices.Equal(hits, want) {
		t.Errorf("cache hits %v, want %v", hits, want)
	}
}

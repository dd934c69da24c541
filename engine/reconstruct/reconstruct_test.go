package reconstruct_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/reconstruct"
	"github.com/foundry-build/foundry/engine/run"
	"github.com/foundry-build/foundry/engine/run/runtest"
	"github.com/foundry-build/foundry/engine/state"
)

// project is a capability reconstructed from proposals sent from outside, with the
// reconstruct block's budget and the project block given; its candidates run on the
// host (the local executor) as a shell that echoes its input.
func project(t *testing.T, budget, projectBlock string) *runtest.Project {
	return runtest.Write(t, map[string]string{
		"schemas/ints.json": `{"type":"array","items":{"type":"integer"}}`,
		"cases/pair.json":   `{"input":[1,2],"output":[1,2]}`,
		"sealed/one.json":   `{"input":[5],"output":[5]}`,
		"main.hcl": projectBlock + `
seed "good" {
  layer { files = { "/marker" = "good" } }
  env = { PATH = "/usr/bin:/bin" }
}
capability "echo" {
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/sh", "-c", "cat"]
    input      = jsonschema("schemas/ints.json")
    output     = jsonschema("schemas/ints.json")
  }
  suite "dev" { cases = "cases/*.json" }
  suite "sealed" { cases = "sealed/*.json" }
  reconstruct {
    proposals { outputs = ["/out/tool"] }
    package {
      base  = seed.good
      files = { "/bin/tool" = "/out/tool" }
    }
    budget {` + budget + `}
  }
}
product "uses-echo" {
  requires = [capability.echo]
}
`})
}

// applying is an apply running in the background, and the rounds that wait for a
// proposal in it.
type applying struct {
	cancel  context.CancelFunc
	done    chan *runtest.Applied
	waiting chan event.Event
}

func start(t *testing.T, p *runtest.Project) *applying {
	ctx, cancel := context.WithCancel(context.Background())
	ap := &applying{cancel: cancel, done: make(chan *runtest.Applied, 1), waiting: make(chan event.Event, 16)}
	go func() {
		ap.done <- p.Apply(t, ctx, run.Options{Events: func(e event.Event) {
			if e.Type == "reconstruct_waiting" {
				ap.waiting <- e
			}
		}})
	}()
	t.Cleanup(cancel)
	return ap
}

// wait waits for the next round that waits for a proposal.
func (ap *applying) wait(t *testing.T) event.Event {
	t.Helper()
	select {
	case e := <-ap.waiting:
		return e
	case a := <-ap.done:
		t.Fatalf("the apply ended (%v) while a round was awaited: %+v", a.Err, a.Result)
	case <-time.After(30 * time.Second):
		t.Fatal("no round waits for a proposal")
	}
	return event.Event{}
}

func (ap *applying) end(t *testing.T) *runtest.Applied {
	t.Helper()
	select {
	case a := <-ap.done:
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("the apply did not end")
	}
	return nil
}

// propose sends files (path → content) as the proposal for job's waiting round, costing
// spend, as foundry jobs propose does.
func propose(t *testing.T, p *runtest.Project, job string, files map[string]string, spend float64) {
	t.Helper()
	dir := t.TempDir()
	for path, content := range files {
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := p.Workspace()
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, err := reconstruct.SubmitProposal(context.Background(), ws, job, dir, "cli", "tester", spend); err != nil {
		t.Fatal(err)
	}
}

// rounds are job's rounds as recorded.
func rounds(t *testing.T, p *runtest.Project, job string) (state.Job, []state.Round) {
	t.Helper()
	ws, err := p.Workspace()
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	jb, err := ws.State.Job(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	rds, err := ws.State.Rounds(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	return jb, rds
}

// Each way a round can fail before its candidate is evaluated spends that round, charged
// with what it used, and the next builder reads why: a proposal without the file it must
// hold, one over the scratch budget; a proposal that takes the job past its spend budget
// is charged and never evaluated, and ends the job, exhausted. Each proposal made is a
// person's intervention, and what it cost is the job's spend (one without the file it must
// hold is no proposal: its round is charged the wait alone).
func TestRoundsSpendTheirBudget(t *testing.T) {
	p := project(t, "\n    candidates = 3\n    scratch = \"64B\"\n    spend = 1\n", `project "r" {
  reconstruct_spend = 100
}`)
	ap := start(t, p)
	e := ap.wait(t)
	job := e.Job
	propose(t, p, job, map[string]string{"out/other": "x"}, 0.25)
	ap.wait(t)
	propose(t, p, job, map[string]string{"out/tool": strings.Repeat("x", 100)}, 0.25)
	ap.wait(t)
	propose(t, p, job, map[string]string{"out/tool": "#!/bin/sh\ncat\n"}, 1)
	a := ap.end(t)
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	f := a.Result.Failed
	if len(f) != 1 || f[0].Node != "capability.echo" {
		t.Fatalf("failed %+v", f)
	}
	for _, want := range []string{
		"reconstruction exhausted its budget (job " + job + "): 3 of 3 candidates tried, none admitted; the spend budget is spent: 1.25 of 1",
		"reconstruct round 1: did not build: proposals: the proposal", "holds no file /out/tool (it must hold /out/tool)",
		"reconstruct round 2: did not build: the proposal is 100 bytes, over the scratch budget of 64 bytes",
		"reconstruct round 3: did not build: not evaluated: its proposal cost 1, and the spend budget is spent: 1.25 of 1",
	} {
		if !strings.Contains(f[0].Reason, want) {
			t.Errorf("the report lacks %q:\n%s", want, f[0].Reason)
		}
	}
	jb, rds := rounds(t, p, job)
	if jb.Status != state.JobExhausted || len(rds) != 3 {
		t.Fatalf("job %s with %d rounds", jb.Status, len(rds))
	}
	var total state.Usage
	for i, rd := range rds {
		if want := min(i, 1); rd.Status != state.RoundFailed || rd.Used.Interventions != want || rd.Reserved != nil || !rd.ProposalCharged || rd.Used.Wall <= 0 {
			t.Errorf("round %d: %s, used %+v, reserved %+v, charged %v; want failed, %d intervention(s), charged, nothing reserved", i+1, rd.Status, rd.Used, rd.Reserved, rd.ProposalCharged, want)
		}
		total = total.Add(rd.Used)
	}
	if total.Spend != 1.25 || total.Written != 100+14 || total.Probes != 0 || total.Interventions != 2 {
		t.Errorf("the job used %+v: want spend 1.25, 114 bytes written, no probes, 2 interventions", total)
	}
	if len(a.Of("candidate_rejected", "capability.echo")) != 3 || len(a.Of("reconstruct_exhausted", "capability.echo")) != 1 {
		t.Errorf("events: %d rejections, %d exhausted", len(a.Of("candidate_rejected", "capability.echo")), len(a.Of("reconstruct_exhausted", "capability.echo")))
	}
}

// A round whose apply was stopped while it waited for its proposal keeps its reservation:
// the next apply resumes that round (not a new one), and charges the time from the stopped
// apply's reservation on as spent, as well as its own.
func TestResumedRoundChargesWhatTheDeadApplyReserved(t *testing.T) {
	p := project(t, "\n    candidates = 1\n", "")
	ap := start(t, p)
	job := ap.wait(t).Job
	reservedBy := time.Now()
	ap.cancel()
	if a := ap.end(t); a.Err == nil || len(a.Result.Interrupted) != 1 {
		t.Fatalf("stopped apply: %v, interrupted %v", a.Err, a.Result.Interrupted)
	}
	_, rds := rounds(t, p, job)
	if len(rds) != 1 || rds[0].Status != state.RoundRunning || rds[0].Reserved == nil || rds[0].Reserved.Part != state.PartProposal || rds[0].ProposalCharged {
		t.Fatalf("after the stop: %+v", rds)
	}
	at := rds[0].Reserved.At
	gap := 700 * time.Millisecond
	time.Sleep(gap)

	ap = start(t, p)
	e := ap.wait(t)
	if !strings.Contains(e.Message, "round 1 waits") {
		t.Errorf("the next apply waits with %q, want round 1 resumed", e.Message)
	}
	propose(t, p, job, map[string]string{"out/other": "x"}, 0)
	a := ap.end(t)
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	jb, rds := rounds(t, p, job)
	if jb.Status != state.JobExhausted || len(rds) != 1 || rds[0].Status != state.RoundFailed {
		t.Fatalf("job %s, rounds %+v", jb.Status, rds)
	}
	// At least the reservation's age when the apply resumed it; no more than that and the
	// resumed apply's own wait (bounded by this test's time since the first reservation).
	if w := rds[0].Used.Wall; w < gap || w < time.Since(at)-time.Since(reservedBy)+gap/2 || w > time.Since(at) {
		t.Errorf("round 1 charged %s of wall time; want at least the %s the stopped apply's reservation stood, at most %s", w, gap, time.Since(at))
	}
	if rds[0].Used.BuilderWall != rds[0].Used.Wall {
		t.Errorf("the proposal's wall %s, the round's %s: want the same", rds[0].Used.BuilderWall, rds[0].Used.Wall)
	}
}

// A round that waits past the job's wall-time budget is stopped, charged, and the job is
// exhausted with why.
func TestWallBudgetStopsTheWaitingRound(t *testing.T) {
	p := project(t, "\n    candidates = 2\n    wall = \"1s\"\n", "")
	ap := start(t, p)
	job := ap.wait(t).Job
	a := ap.end(t)
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	if f := a.Result.Failed; len(f) != 1 || !strings.Contains(f[0].Reason, "the wall-time budget is spent: the job's is 1s") ||
		!strings.Contains(f[0].Reason, "reconstruct round 1: did not build: stopped: the job's wall-time budget (or the project's reconstruct_deadline) ran out") {
		t.Fatalf("failed %+v", f)
	}
	jb, rds := rounds(t, p, job)
	if jb.Status != state.JobExhausted || len(rds) != 1 || rds[0].Used.Wall < time.Second || rds[0].Used.Wall > 5*time.Second {
		t.Errorf("job %s, rounds %+v", jb.Status, rds)
	}
}

// A round an apply left running after its proposal was charged is resumed, and its
// proposal is charged once. The local executor's evaluations are not evidence (invariant
// 1: admission and the sealed-once rule take sandboxed evaluators' signed results only), so
// the candidate that passed is refused admission, its round stays running with its
// proposal and evaluation charged, and the next apply resumes round 1: it takes the same
// proposal without charging it again, and evaluates the candidate again (there is no
// signed result of a sandbox to settle it from), charging that evaluation.
func TestResumedRoundChargesItsProposalOnce(t *testing.T) {
	p := project(t, "\n    candidates = 2\n", "")
	ap := start(t, p)
	job := ap.wait(t).Job
	propose(t, p, job, map[string]string{"out/tool": "#!/bin/sh\ncat\n"}, 0)
	a := ap.end(t)
	var passed []string
	for _, e := range a.Of("suite_evaluated", "capability.echo") {
		if e.Passed != nil && *e.Passed && e.Cases != nil {
			passed = append(passed, e.Suite)
		}
	}
	if strings.Join(passed, " ") != "dev sealed" {
		t.Fatalf("suites passed: %v", passed)
	}
	const refused = `evaluator "https://foundry.dev/evaluator/local@v1?isolation=none" is not allowed`
	if f := a.Result.Failed; len(f) != 1 || !strings.Contains(f[0].Reason, refused) {
		t.Fatalf("failed %+v, want the admission refused", f)
	}
	_, rds := rounds(t, p, job)
	if len(rds) != 1 || rds[0].Status != state.RoundRunning || !rds[0].ProposalCharged || rds[0].Reserved != nil ||
		rds[0].Used.Probes != 1 || rds[0].Used.Interventions != 1 || rds[0].Used.Written != 14 {
		t.Fatalf("after the first apply: %+v", rds)
	}
	first := rds[0].Used

	a = p.Apply(t, context.Background(), run.Options{})
	if f := a.Result.Failed; len(f) != 1 || !strings.Contains(f[0].Reason, refused) {
		t.Fatalf("second apply: failed %+v", f)
	}
	if r := a.Of("reconstruct_round", "capability.echo"); len(r) != 1 || r[0].Recipe != "reconstruct round 1" {
		t.Errorf("rounds dispatched: %+v, want round 1 again", r)
	}
	_, rds = rounds(t, p, job)
	if len(rds) != 1 || rds[0].Status != state.RoundRunning {
		t.Fatalf("after the resumed round: %+v", rds)
	}
	u := rds[0].Used
	if u.Interventions != first.Interventions || u.Written != first.Written || u.Probes != 2*first.Probes || u.CasesWall <= first.CasesWall || u.Wall <= first.Wall {
		t.Errorf("after the resumed round: used %+v; want its proposal as charged before (%+v) and a second evaluation", u, first)
	}
}

// A builder the executor cannot run (the local executor cannot mount /job) spends nothing
// but the wait: its round fails with why, its log is kept, and the job is unresolved,
// since no later round could run it either.
func TestBuilderThatCannotRunLeavesTheJobUnresolved(t *testing.T) {
	p := runtest.Write(t, map[string]string{
		"schemas/ints.json": `{"type":"array","items":{"type":"integer"}}`,
		"cases/pair.json":   `{"input":[1,2],"output":[1,2]}`,
		"sealed/one.json":   `{"input":[5],"output":[5]}`,
		"main.hcl": `
seed "host" {
  layer { files = { "/marker" = "host" } }
  env = { PATH = "/usr/bin:/bin" }
}
capability "echo" {
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/sh", "-c", "cat"]
    input      = jsonschema("schemas/ints.json")
    output     = jsonschema("schemas/ints.json")
  }
  suite "dev" { cases = "cases/*.json" }
  suite "sealed" { cases = "sealed/*.json" }
  reconstruct {
    builder {
      image   = seed.host
      run     = ["sh", "-c", "cp /job/contract.json $FOUNDRY_OUT/tool"]
      outputs = ["/out/tool"]
    }
    package {
      base  = seed.host
      files = { "/bin/tool" = "/out/tool" }
    }
  }
}
product "uses-echo" {
  requires = [capability.echo]
}
`})
	a := p.Apply(t, context.Background(), run.Options{})
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	f := a.Result.Failed
	if len(f) != 1 || !strings.Contains(f[0].Reason, "reconstruction is unresolved (job ") ||
		!strings.Contains(f[0].Reason, "capability.echo.reconstruct.builder cannot run: capability.echo.reconstruct.builder: the local executor could not run it") {
		t.Fatalf("failed %+v", f)
	}
	job := a.Of("reconstruct_unresolved", "capability.echo")[0].Job
	jb, rds := rounds(t, p, job)
	if jb.Status != state.JobUnresolved || len(rds) != 1 || rds[0].Status != state.RoundFailed || rds[0].Used.CPU != 0 {
		t.Fatalf("job %s, rounds %+v", jb.Status, rds)
	}
	if l := rds[0].Logs; len(l) != 1 || l[0].Run != "builder" || !strings.Contains(l[0].Error, "has mounts (/job)") {
		t.Errorf("round logs %+v, want the builder's failure", l)
	}
}

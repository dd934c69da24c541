package evaluate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/internal/capped"
	"github.com/foundry-build/foundry/lang"
)

// referenceTrace runs reference name of dossier d as the capability's service, in a fresh
// evaluation sandbox of its own (never the candidate's: an equivalent initial state, the
// reference's image and nothing carried over from another case), sends it case c's
// requests in order as a candidate's are sent, and returns a copy of c whose requests carry
// the reference's responses as the effects the candidate's must have (verdict.Request.Want:
// its trace of effects, spec/capability-cases.md §8). A reference that does not answer every
// request, or answers what the contract cannot compare (verdict.ReferenceEffect), disagrees
// with the contract: what names the case in the Disagreement.
func (ev *Evaluator) referenceTrace(ctx context.Context, capb *lang.Capability, d *Dossier, name, what string, c *verdict.Case) (*verdict.Case, error) {
	r := capb.Reconstruct.References[name]
	disagree := func(format string, args ...any) error {
		return &Disagreement{Reference: name, Case: what, Why: fmt.Sprintf(format, args...)}
	}
	stdout := capped.NewBuffer(64 << 10)
	stderr := capped.NewBuffer(64 << 10)
	addr := fmt.Sprintf("127.0.0.1:%d", capb.Interface.Port)
	var trace []verdict.Response
	run := &serviceRun{record: &trace}
	a := executors.Action{Stdout: stdout, Stderr: stderr,
		Attach: func(ctx context.Context, dial executors.Dialer) {
			drive(ctx, capb, c.Requests, 0, addr, dial, run)
		}}
	xr, err := ev.sandbox().Run(ctx, "reference "+name+" of capability."+capb.Name, r.Entrypoint, d.images[name], a)
	if errors.Is(err, executors.ErrNotStarted) {
		return nil, disagree("its entrypoint could not be started: %v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("running reference %s on case %s: %w", name, what, err)
	}
	n := len(c.Requests)
	if run.judged && !run.verdict.Pass {
		return nil, disagree("request %d of %d: %s", run.next+1, n, run.verdict.Reason)
	}
	if len(trace) < n {
		stage := "exited before it was ready"
		if run.ready {
			stage = fmt.Sprintf("exited while answering request %d of %d", len(trace)+1, n)
		}
		switch {
		case xr.TimedOut:
			stage += fmt.Sprintf(" (killed at the %v deadline)", evalTimeout)
		case xr.OOMKilled:
			stage += " (killed: out of memory)"
		default:
			stage += fmt.Sprintf(" (exit %d)", xr.ExitCode)
		}
		if tail := strings.TrimSpace(strings.Join(capped.TailLines(append(stdout.B.Bytes(), stderr.B.Bytes()...), 3), "\n")); tail != "" {
			stage += "; output " + abbreviate(fmt.Sprintf("%q", tail), 200)
		}
		return nil, disagree("the reference %s", stage)
	}
	out := *c
	out.Requests = slices.Clone(c.Requests)
	for i := range trace {
		if why := verdict.ReferenceEffect(capb, trace[i]); why != "" {
			return nil, disagree("request %d of %d (%s): the reference %s", i+1, n, c.Requests[i].Describe(), why)
		}
		out.Requests[i].Want = &trace[i]
	}
	return &out, nil
}

// traceEvidence says what a sealed suite whose cases expect reference ref's traces proved
// when it passed: count cases, each a sequence of requests from a fresh instance.
func traceEvidence(ref string, count int) string {
	return fmt.Sprintf("agreed with reference %s's trace of effects on %d sealed case(s), 0 disagreements", ref, count)
}

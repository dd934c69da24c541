package evaluate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/foundry-build/foundry/engine/shrink"
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
		how, tail := ended(xr, stdout, stderr)
		stage += " (" + how + ")"
		if tail != "" {
			stage += "; output " + tail
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

// traceRequest is a request of a trace case as its case file writes it: what the shrinker
// reduces (spec/capability.md §5b).
type traceRequest struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// shrinkTrace reduces the requests of rej's failing trace case (rej.trace) with
// engine/shrink, in at most budget tries, while the candidate's trace on the smaller
// sequence still diverges from the reference's: requests are dropped (and their paths and
// inputs reduced), each smaller sequence that is a valid trace case sent first to the
// reference, then to the candidate, each in a fresh sandbox of its own. A sequence the
// reference cannot answer is not tried on the candidate. The reference's runs are the
// evaluator's; each candidate run is counted in rej.ShrinkRuns.
func (ev *Evaluator) shrinkTrace(ctx context.Context, capb *lang.Capability, img executors.Image, d *Dossier, rej *rejection, budget int) error {
	var reqs []traceRequest
	for _, r := range rej.trace.Requests {
		reqs = append(reqs, traceRequest{Method: r.Method, Path: r.Path, Input: r.Input})
	}
	value, err := json.Marshal(reqs)
	if err != nil {
		return err
	}
	runs := 0
	res, err := shrink.Shrink(value, func(in []byte) (bool, error) {
		c, err := verdict.ParseTraceCase(rej.Case, append(append([]byte(`{"requests":`), in...), '}'), capb)
		if err != nil {
			return false, nil // not a trace case: never run
		}
		traced, err := ev.referenceTrace(ctx, capb, d, rej.ref, rej.Case, c)
		var dis *Disagreement
		if errors.As(err, &dis) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		runs++
		v, _, err := ev.runServiceCase(ctx, capb, img, traced, nil)
		return err == nil && !v.Pass, err
	}, budget)
	rej.ShrinkRuns = runs
	if err != nil {
		return fmt.Errorf("shrinking case %s: %w", rej.Case, err)
	}
	if res.Shrunk() {
		rej.Shrunk, rej.ShrunkFailure, rej.Original = abbreviate(string(res.Value), 160), "its trace diverges from the reference "+rej.ref+"'s", rej.caseDigest
	}
	return nil
}

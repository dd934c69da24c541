package evaluate

import (
	"context"
	"errors"
	"fmt"

	"github.com/foundry-build/foundry/engine/shrink"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
)

// DefaultShrinkRuns is how many runs of the candidate shrinking one counterexample may
// take, unless the evaluation is given fewer (a reconstruction's probes left).
const DefaultShrinkRuns = 24

// shrink reduces the input of rej, the rejection's failing case, to the smallest input
// engine/shrink finds on which the candidate still fails the same way, in at most budget
// runs of the candidate, each in a fresh sandbox. Only an intrinsic failure is shrunk
// (verdict.Intrinsic: a crash, output that is not JSON or violates the output schema):
// a smaller input has no expected output to compare with, so "still fails" can only mean
// "fails whatever was expected". A timeout is not shrunk: each try would take the whole
// deadline. Every smaller input tried must be valid for the contract's input schema (one
// that is not is never run, and costs nothing). It sets rej's Shrunk, ShrunkFailure,
// Original and ShrinkRuns when a smaller input failed; ShrinkRuns counts every run.
//
// A failing case of a differential suite (rej.ref) is shrunk whatever its failure: a
// smaller input still fails when the candidate's output on it is not what the reference's
// is (the reference run first, in a sandbox of its own, and not charged: an input it fails
// on is not tried).
func (ev *Evaluator) shrink(ctx context.Context, capb *lang.Capability, img executors.Image, d *Dossier, rej *rejection, budget int) error {
	if rej.trace != nil && rej.ref != "" && d != nil && budget > 0 {
		return ev.shrinkTrace(ctx, capb, img, d, rej, budget) // a service's trace case
	}
	differential := rej.ref != "" && d != nil
	if budget <= 0 || rej.input == nil || rej.intrinsic == "timed out" || (rej.intrinsic == "" && !differential) {
		return nil
	}
	runs, failure := 0, rej.intrinsic
	if differential {
		failure = "its output is not the reference " + rej.ref + "'s"
	}
	res, err := shrink.Shrink(rej.input, func(in []byte) (bool, error) {
		if !verdict.ValidInput(capb, in) {
			return false, nil
		}
		var want verdict.Expectation
		if differential {
			e, err := ev.referenceExpectation(ctx, capb, d, rej.ref, "", in)
			var dis *Disagreement
			if errors.As(err, &dis) {
				return false, nil
			} else if err != nil {
				return false, err
			}
			want = e
		}
		runs++
		o, err := ev.sandbox().RunCLI(ctx, "shrinking a counterexample of capability."+capb.Name, capb.Interface.Entrypoint, img, append(in, '\n'))
		if errors.Is(err, executors.ErrNotStarted) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !differential {
			return verdict.Intrinsic(capb, o) == rej.intrinsic, nil
		}
		v := verdict.Judge(capb, &verdict.Case{Input: in, Expect: want}, o)
		return !v.Pass, nil
	}, budget)
	rej.ShrinkRuns = runs
	if err != nil {
		return fmt.Errorf("shrinking case %s: %w", rej.Case, err)
	}
	if res.Shrunk() {
		rej.Shrunk, rej.ShrunkFailure, rej.Original = abbreviate(string(res.Value), 160), failure, rej.caseDigest
	}
	return nil
}

package run

import (
	"context"
	"fmt"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/provenance"
)

// AcceptanceError is a product whose acceptance failed: the case, the request that failed,
// what was expected and what came back, and the signed result that says so.
type AcceptanceError struct {
	Product  string
	Failure  evaluate.Rejection
	Evidence digest.Digest // the signed FAILED acceptance result
}

func (e *AcceptanceError) Error() string {
	f := e.Failure
	// The walk reports it under the product's address.
	return fmt.Sprintf("acceptance failed: %s\n  case %s\n    request:  %s\n    expected: %s\n    got:      %s\n  evidence: %s",
		f.Reason, f.Case, f.Input, f.Expected, f.Got, e.Evidence)
}

// settleProduct settles a product once its steps and checks have run (they are its
// dependencies): a product with an accept block is accepted now, through its service's
// interface (evaluate.Evaluator.Accept). A passing acceptance leaves its evidence in the
// product's result (acceptanceOf); a failing one fails the product with the report.
func (r *runner) settleProduct(ctx context.Context, n *graph.Node) error {
	ac := n.Product.Accept
	if ac == nil {
		return nil
	}
	base := r.result(ac.Image.Node)
	if base == nil {
		return fmt.Errorf("%s is not built", ac.Image.Node)
	}
	tree, err := r.assemble(ctx, ac.Files)
	if err != nil {
		return fmt.Errorf("assembling the service of %s: %w", n.Address, err)
	}
	res, err := r.eval.Accept(ctx, n, tree, base.image)
	if err != nil {
		return fmt.Errorf("accepting %s: %w", n.Address, err)
	}
	passed := res.Passed
	e := event.Event{Node: n.Address, Suite: provenance.SuiteAcceptance, Passed: &passed, Cases: &res.Cases, CasesPassed: &res.CasesPassed, Ref: string(res.Digest)}
	if !passed {
		e.Type, e.Message = "acceptance_failed", fmt.Sprintf("%d of %d cases passed; %s: %s", res.CasesPassed, res.Cases, res.Failure.Case, res.Failure.Reason)
		r.emit(e)
		return &AcceptanceError{Product: n.Address, Failure: *res.Failure, Evidence: res.Digest}
	}
	e.Type, e.Message = "product_accepted", fmt.Sprintf("%d of %d cases passed (evidence %s)", res.CasesPassed, res.Cases, res.Digest.Short())
	if res.Reused {
		e.Message = fmt.Sprintf("accepted before (evidence %s)", res.Digest.Short())
	}
	r.emit(e)
	r.setResult(n.Address, &nodeResult{tree: tree, accepted: res.Digest, acceptance: res.Evidence})
	return nil
}

// acceptanceOf returns the evidence that product (an address, "product.NAME") passed its
// acceptance in this apply: the envelope digest and bytes of the signed test result of suite
// acceptance whose subject is the accepted service's tree, under the product's node digest.
// ok is false when the product has no accept block, has not been settled, or failed. This
// is what a delivery requires and names (spec/provenance.md §acceptance).
func (r *runner) acceptanceOf(product string) (d digest.Digest, envelope []byte, ok bool) {
	nr := r.result(product)
	if nr == nil || nr.accepted == "" {
		return "", nil, false
	}
	return nr.accepted, nr.acceptance, true
}

// accepted is every product accepted in this apply, with its evidence (Result.Accepted).
func (r *runner) accepted() map[string]digest.Digest {
	out := map[string]digest.Digest{}
	for a, n := range r.g.Nodes {
		if n.Kind != graph.KindProduct {
			continue
		}
		if d, _, ok := r.acceptanceOf(a); ok {
			out[a] = d
		}
	}
	return out
}

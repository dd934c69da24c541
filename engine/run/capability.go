package run

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/trace"
	"github.com/foundry-build/foundry/executors"
)

// CapabilityError says why no recipe of a capability was admitted.
type CapabilityError struct {
	Capability string
	Rejections []evaluate.Rejection
}

func (e *CapabilityError) Error() string {
	var parts []string
	for _, r := range e.Rejections {
		parts = append(parts, r.String())
	}
	return fmt.Sprintf("%s: no recipe was admitted:\n%s", e.Capability, strings.Join(parts, "\n"))
}

// settleCapability resolves a capability at apply time: the admitted version the plan
// pinned, or else its recipes in plan order — each built, evaluated on dev and repair
// cases, then once on the sealed cases; the first that passes is admitted (signed test
// results and a verification summary) and published. A rejected recipe is reported with
// its smallest counterexample and the next one is tried. A capability the plan marks
// reconstruct is settled by its reconstruction job (engine/reconstruct).
func (r *runner) settleCapability(ctx context.Context, n *graph.Node) (outcome, error) {
	cp := r.planned.capabilities[n.Address]
	if cp == nil {
		return 0, fmt.Errorf("%s is not in the plan", n.Address)
	}
	if cp.Status == plan.StatusReconstruct {
		rejected, err := r.rec.Settle(ctx, n)
		if err != nil {
			return 0, err
		}
		// The rounds rejected before the admission go to the apply's report, as a recipe's do.
		r.mu.Lock()
		r.rejections = append(r.rejections, rejected...)
		r.mu.Unlock()
		return built, nil
	}
	capErr := &CapabilityError{Capability: n.Address}
	if cp.Status == plan.StatusRegistry {
		tree, err := r.adm.Pull(ctx, n, cp.Pinned)
		if err == nil {
			r.setResult(n.Address, &nodeResult{tree: tree})
			r.emit(event.Event{Type: "capability_pinned", Node: n.Address, Ref: cp.Pinned.Ref, Message: cp.Pinned.Ref})
			if n.Capability.Reconstruct != nil {
				return settled, r.rec.AdmittedElsewhere(ctx, n, cp.Pinned)
			}
			return settled, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%s: %w", n.Address, err)
		}
		// The pin is no longer usable (quarantined since the plan, or its evidence no
		// longer binds it): the recipes the plan kept as alternatives are tried instead.
		capErr.Rejections = append(capErr.Rejections, evaluate.Rejection{Recipe: cp.Pinned.Ref, Refused: true, Reason: "the pinned version is not usable: " + err.Error()})
		r.emit(event.Event{Type: "pin_refused", Node: n.Address, Ref: cp.Pinned.Ref, Message: fmt.Sprintf("%s: %v; trying its recipes", cp.Pinned.Ref, err)})
	}
	for _, o := range cp.Recipes {
		if o.Status != plan.StatusBuild && o.Status != plan.StatusAlternative {
			continue
		}
		recipe := r.g.Nodes[o.Address]
		tree, base, err := r.buildCandidate(ctx, recipe)
		if err != nil {
			capErr.Rejections = append(capErr.Rejections, r.rejected(n, evaluate.Rejection{Recipe: o.Address, Reason: err.Error()}))
			continue
		}
		c := &admit.Candidate{Recipe: o.Address, Tree: tree, Base: base, Steps: r.stepResults(recipe), Output: r.recordedOutput}
		if admitted, err := r.offer(ctx, n, c, &capErr.Rejections); err != nil {
			return 0, err
		} else if admitted {
			return built, nil
		}
	}
	return 0, capErr
}

// tryCandidate settles capability n with candidate c if it can: a candidate whose files
// are quarantined is refused; else it is evaluated (dev and repair, then sealed once), and
// one that passes is admitted and published, unless its manifest is quarantined. It
// returns the rejection (reported as candidate_rejected), or nil once n's result is the
// admitted tree (capability_admitted).
func (r *runner) tryCandidate(ctx context.Context, n *graph.Node, c *admit.Candidate) (*evaluate.Rejection, error) {
	if rej, err := r.refuseQuarantined(ctx, n, c); rej != nil || err != nil {
		return rej, err
	}
	ev, err := r.eval.Evaluate(ctx, n, c.Recipe, c.Tree, c.Base)
	if err != nil {
		return nil, fmt.Errorf("evaluating %s for %s: %w", c.Recipe, n.Address, err)
	}
	if ev.Rejection != nil {
		return r.rejectCandidate(n, c, *ev.Rejection), nil
	}
	return r.admitCandidate(ctx, n, c, ev.Tests)
}

// rejectCandidate reports candidate c's rejection rj (candidate_rejected) and returns it.
func (r *runner) rejectCandidate(n *graph.Node, c *admit.Candidate, rj evaluate.Rejection) *evaluate.Rejection {
	rj.Recipe = c.Recipe
	rj = r.rejected(n, rj)
	return &rj
}

// refuseQuarantined refuses candidate c when its files are quarantined: a rebuild of a
// withdrawn artifact is the same artifact, and is not evaluated or admitted again.
func (r *runner) refuseQuarantined(ctx context.Context, n *graph.Node, c *admit.Candidate) (*evaluate.Rejection, error) {
	why, err := r.quarantined(ctx, c.Tree)
	if err != nil || why == "" {
		return nil, err
	}
	return r.rejectCandidate(n, c, evaluate.Rejection{Refused: true, Reason: fmt.Sprintf("its files %s are quarantined (%s)", c.Tree, why)}), nil
}

// admitCandidate admits and publishes candidate c of capability n, which passed its
// evaluation with the signed test results tests, unless its manifest is quarantined (the
// rejection then). Admitted, n's result is its tree (capability_admitted).
func (r *runner) admitCandidate(ctx context.Context, n *graph.Node, c *admit.Candidate, tests [][]byte) (*evaluate.Rejection, error) {
	c.Tests = tests
	sp := trace.Start(ctx, "sign and publish", "phase")
	sp.Set("recipe", c.Recipe)
	ref, m, err := r.adm.Admit(ctx, n, c)
	sp.Set("ref", ref)
	sp.End()
	if err != nil {
		return nil, fmt.Errorf("admitting %s for %s: %w", c.Recipe, n.Address, err)
	}
	if why, err := r.quarantined(ctx, m); err != nil {
		return nil, err
	} else if why != "" {
		return r.rejectCandidate(n, c, evaluate.Rejection{Refused: true, Reason: fmt.Sprintf("its manifest %s is quarantined (%s)", m, why)}), nil
	}
	r.setResult(n.Address, &nodeResult{tree: c.Tree})
	msg := fmt.Sprintf("%s admitted as %s", c.Recipe, ref)
	if c.Evidence != "" {
		msg += ": " + c.Evidence
	}
	r.emit(event.Event{Type: "capability_admitted", Node: n.Address, Recipe: c.Recipe, Ref: ref, Message: msg})
	c.Ref = ref
	return nil, nil
}

// buildCandidate runs recipe's steps and package (recipe.Parts) and returns the package
// tree and the base image the candidate runs on (zero when the package has no base).
func (r *runner) buildCandidate(ctx context.Context, recipe *graph.Node) (digest.Digest, executors.Image, error) {
	inRecipe := map[string]bool{recipe.Address: true}
	for _, p := range recipe.Parts() {
		inRecipe[p] = true
	}
	var nodes []string
	deps := map[string][]string{}
	for _, a := range r.g.Order {
		if !inRecipe[a] {
			continue
		}
		nodes = append(nodes, a)
		for _, d := range r.g.Nodes[a].Deps {
			if inRecipe[d] { // everything outside the recipe was settled before the capability
				deps[a] = append(deps[a], d)
			}
		}
	}
	res := r.walk(ctx, nodes, deps)
	r.mu.Lock()
	r.nested = append(r.nested, res)
	r.mu.Unlock()
	if len(res.Failed) > 0 {
		var reasons []string
		for _, f := range res.Failed {
			reasons = append(reasons, f.Error())
		}
		return "", executors.Image{}, errors.New(strings.Join(reasons, "; "))
	}
	if recipe.Recipe.Reproducible {
		if err := r.rebuildRecipe(ctx, nodes); err != nil {
			return "", executors.Image{}, fmt.Errorf("%s has reproducible = true: %w", recipe.Address, err)
		}
	}
	pkg := r.result(packageOf(r.g, recipe))
	if pkg == nil || pkg.tree == "" {
		return "", executors.Image{}, fmt.Errorf("%s produced no package", recipe.Address)
	}
	var base executors.Image
	if b := recipe.Recipe.Package.Base; b != nil {
		br := r.result(b.Node)
		if br == nil {
			return "", executors.Image{}, fmt.Errorf("%s: base %s is not built", recipe.Address, b.Node)
		}
		base = br.image
	}
	return pkg.tree, base, nil
}

// rejected reports a candidate's rejection (event candidate_rejected) and returns it.
func (r *runner) rejected(n *graph.Node, rej evaluate.Rejection) evaluate.Rejection {
	r.emit(rej.Event(n.Address))
	return rej
}

// offer tries candidate c of capability n (tryCandidate). Rejected, it is added to
// rejected and offer returns false: the caller tries its next candidate. Admitted, the
// candidates rejected before it go to the apply's report.
func (r *runner) offer(ctx context.Context, n *graph.Node, c *admit.Candidate, rejected *[]evaluate.Rejection) (admitted bool, err error) {
	rej, err := r.tryCandidate(ctx, n, c)
	switch {
	case err != nil:
		return false, err
	case rej != nil:
		*rejected = append(*rejected, *rej)
		return false, nil
	}
	r.mu.Lock()
	r.rejections = append(r.rejections, *rejected...)
	r.mu.Unlock()
	return true, nil
}

// quarantined returns why digest d is quarantined, or "".
func (r *runner) quarantined(ctx context.Context, d digest.Digest) (string, error) {
	bad, reason, err := r.ws.State.IsQuarantined(ctx, d)
	if err != nil || !bad {
		return "", err
	}
	return reason, nil
}

// stepResults are the results of recipe's steps, by address.
func (r *runner) stepResults(recipe *graph.Node) map[string]*cache.Result {
	out := map[string]*cache.Result{}
	for _, p := range recipe.Parts() {
		if k := r.g.Nodes[p].Kind; k != graph.KindStep && k != graph.KindCheck {
			continue
		}
		if nr := r.result(p); nr != nil && nr.step != nil {
			out[p] = nr.step
		}
	}
	return out
}

package run

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/foundry-build/foundry/engine/deliver"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
)

// Delivered is a product this apply delivered, and where its release is.
type Delivered struct {
	Product  string
	Location string
}

// deliverProduct delivers product n once its steps and checks are settled and its
// acceptance passed (settleProduct): the walk starts a product only after its steps and
// checks, and skips it when one failed; a failed acceptance fails it before this. So a
// product is delivered only after its checks and acceptance passed, and the release names
// their signed evidence. A product with an accept block delivers the tree its acceptance
// ran on, or nothing (the receipt binds the two; provenance.AcceptanceOf). A product the
// plan did not find granted is refused here too, whatever the caller did with the plan.
func (r *runner) deliverProduct(ctx context.Context, n *graph.Node) error {
	dv := n.Product.Deliver
	if dv == nil {
		return nil
	}
	if pn := r.planned.nodes[n.Address]; pn == nil || pn.Status != plan.StatusBuild || pn.Deliver == nil || !pn.Deliver.Granted {
		return fmt.Errorf("%s: no grant allows delivering to %s; nothing was delivered", n.Address, dv.Dest)
	}
	grant, ok := r.plan.Grants().DeliveryGrant(dv.Dest)
	if !ok {
		return fmt.Errorf("%s: no grant allows delivering to %s; nothing was delivered", n.Address, dv.Dest)
	}
	tree, err := r.assemble(ctx, dv.Files)
	if err != nil {
		return fmt.Errorf("assembling the release of %s: %w", n.Address, err)
	}
	req := &deliver.Request{Product: n.Address, Revision: n.Digest, Source: r.plan.Digest, Target: r.g.Config.Project.Platform,
		Start: dv.Start, Dest: dv.Dest, Root: grant.Path, Tree: tree}
	for _, name := range slices.Sorted(maps.Keys(n.Product.Checks)) {
		a := n.Address + ".check." + name
		res := r.result(a)
		if res == nil || res.step == nil {
			return fmt.Errorf("%s: check %s has no result", n.Address, a)
		}
		if len(res.step.Attestations) == 0 {
			// Evidence before rows: a passed check is named by its signed provenance.
			return fmt.Errorf("%s: check %s passed without signed evidence (a result an older Foundry cached); run it again with -replace %s", n.Address, a, a)
		}
		c := deliver.Check{Address: a, Result: res.step.Action}
		for _, d := range res.step.Attestations {
			env, err := r.ws.Store.Get(d)
			if err != nil {
				return fmt.Errorf("%s: the evidence of %s: %w", n.Address, a, err)
			}
			c.Envelopes = append(c.Envelopes, env)
		}
		req.Checks = append(req.Checks, c)
	}
	if n.Product.Accept != nil {
		d, env, ok := r.acceptanceOf(n.Address)
		if !ok {
			return fmt.Errorf("%s: its acceptance has no passing result; nothing was delivered", n.Address)
		}
		if accepted := r.result(n.Address).tree; accepted != tree {
			return fmt.Errorf("%s: its deliver files (tree %s) are not the files its acceptance ran on (its accept block's files, tree %s): a release holds what was accepted, so deliver the accept block's files; nothing was delivered",
				n.Address, tree, accepted)
		}
		req.Checks = append(req.Checks, deliver.Check{Address: n.Address + ".accept", Result: d, Envelopes: [][]byte{env}})
		base := r.result(n.Product.Accept.Image.Node)
		if base == nil {
			return fmt.Errorf("%s: the image its acceptance ran on (%s) is not built; nothing was delivered", n.Address, n.Product.Accept.Image.Node)
		}
		req.Runtime = &deliver.Runtime{Image: string(base.image.Digest), Seed: n.Product.Accept.Image.Node}
	}
	loc, err := r.dlv.Deliver(ctx, req)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.delivered = append(r.delivered, Delivered{Product: n.Address, Location: loc})
	r.mu.Unlock()
	r.emit(event.Event{Type: "product_delivered", Node: n.Address, Ref: loc, Message: "delivered to " + loc})
	return nil
}

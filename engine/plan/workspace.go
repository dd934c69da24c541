package plan

import (
	"context"
	"fmt"
	"slices"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// cachedSteps reports which step and check nodes of g have a usable action cache entry in
// workspace w, with one database query for all of them.
func cachedSteps(ctx context.Context, w *workspace.Workspace, g *graph.Graph) (map[string]bool, error) {
	var actions []digest.Digest
	for _, a := range g.Order {
		if n := g.Nodes[a]; n.Kind == graph.KindStep || n.Kind == graph.KindCheck {
			actions = append(actions, n.Digest)
		}
	}
	entries, err := w.LookupMany(ctx, actions)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, a := range g.Order {
		if n := g.Nodes[a]; n.Kind == graph.KindStep || n.Kind == graph.KindCheck {
			out[a] = entries[n.Digest].Hit
		}
	}
	return out, nil
}

// ForWorkspace plans g against workspace w's action cache and, when reg is set, the
// admitted capabilities in that registry that verify with keys.
func ForWorkspace(ctx context.Context, w *workspace.Workspace, g *graph.Graph, reg registry.Store, keys []*provenance.Verifier) (*Plan, error) {
	cached, err := cachedSteps(ctx, w, g)
	if err != nil {
		return nil, err
	}
	opt := Options{
		Cached:      func(n *graph.Node) bool { return cached[n.Address] },
		SeedBuilt:   func(n *graph.Node) bool { return w.Seeds.Built(string(n.Digest)) }, // the key run gives a seed
		Quarantined: map[digest.Digest]string{},
	}
	qs, err := w.State.QuarantineList(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		opt.Quarantined[q.Digest] = q.Reason
	}
	sealed := evaluate.SealedNow(ctx, w, g.Config.Dir, keys)
	if reg != nil {
		opt.Admitted = func(n *graph.Node) (*admit.Admitted, string, error) {
			adm, why, err := admit.Lookup(ctx, reg, keys, w.State, n)
			if err != nil || adm == nil {
				return adm, why, err
			}
			su := sealed(n)
			if su == nil || slices.Contains(adm.Suites, su.Digest) {
				return adm, "", nil
			}
			note := fmt.Sprintf("%s passed an earlier sealed suite than the current one (%s)", adm.Ref, su.Digest.Short())
			switch {
			case g.Config.Project.KeepPins:
				return adm, note + "; pinned all the same, as the project's keep_pins says", nil
			case len(n.Providers) == 0:
				return adm, note + "; pinned all the same: no recipe provides a candidate to evaluate on it", nil
			}
			return nil, note + ": its recipe's candidate is evaluated on the current suite", nil
		}
	}
	p, err := Make(g, opt)
	if err != nil {
		return nil, err
	}
	for _, cp := range p.Capabilities {
		n := g.Nodes[cp.Address]
		if cp.Status == StatusRegistry || n.Capability.Suites["sealed"] == nil {
			continue
		}
		if su := sealed(n); su != nil && su.Undisclosed < evaluate.MinUndisclosed(g.Config.Project) {
			cp.Ready = false
			cp.Notes = append(cp.Notes, fmt.Sprintf("out of undisclosed sealed cases: %d left, and promotion needs %d; every other sealed case was shown to a builder and serves for repair now: add sealed cases",
				su.Undisclosed, evaluate.MinUndisclosed(g.Config.Project)))
		}
	}
	return p, nil
}

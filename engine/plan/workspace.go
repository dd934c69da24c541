package plan

import (
	"context"
	"fmt"
	"slices"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// ForWorkspace plans the part sel selects of g against workspace w's action cache and, when
// reg is set, the admitted capabilities in that registry that verify with keys.
func ForWorkspace(ctx context.Context, w *workspace.Workspace, g *graph.Graph, reg registry.Store, keys []*provenance.Verifier, sel Selection) (*Plan, error) {
	opt := Options{
		Selection:   sel,
		Lookup:      lookupIn(ctx, w),
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
	p.keysHold = w.Held()
	for _, cp := range p.Capabilities {
		n := g.Nodes[cp.Address]
		if cp.Reconstruct != nil && cp.Status == StatusReconstruct {
			if cp.Reconstruct.Job, err = jobOf(ctx, w.State, g, n); err != nil {
				return nil, err
			}
			if cp.Reconstruct.Job.Next != "" {
				p.Summary.Exhausted++
			}
		}
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

// ForRegistry plans the part sel selects of g for a project with no state yet (nothing
// applied: nothing cached, built or quarantined) against the admitted capabilities in reg
// that verify with keys, such as those another project sharing the registry admitted.
func ForRegistry(ctx context.Context, g *graph.Graph, reg registry.Store, keys []*provenance.Verifier, sel Selection) (*Plan, error) {
	return Make(g, Options{Selection: sel, Admitted: func(n *graph.Node) (*admit.Admitted, string, error) {
		return admit.Lookup(ctx, reg, keys, nil, n)
	}})
}

// lookupIn looks cache keys up in workspace w's action cache.
func lookupIn(ctx context.Context, w *workspace.Workspace) lookupFunc {
	return func(keys []digest.Digest) (map[digest.Digest]cache.Entry, error) {
		return w.Cache.LookupMany(ctx, keys)
	}
}

// Keys are the cache keys of p's steps known before anything runs, and what they found,
// for an apply in workspace w: those the plan found, when it was made under this hold of
// the apply lock, or else looked up again (a plan read from a file, or made without the
// lock: its hits may be gone).
func (p *Plan) Keys(ctx context.Context, w *workspace.Workspace, g *graph.Graph) (map[string]*Keyed, error) {
	if p.keys != nil && p.keysHold != 0 && p.keysHold == w.Held() {
		return p.keys, nil
	}
	return plannedKeys(g, p, lookupIn(ctx, w))
}

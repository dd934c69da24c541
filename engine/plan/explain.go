package plan

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
)

// Explanation says why a step will run or is cached (foundry explain).
type Explanation struct {
	Node   string        `json:"node"`
	Action digest.Digest `json:"action"` // the definition digest
	// CacheKey is the key its result is looked up by, when the plan could compute it: ""
	// when it waits for content this apply makes (Reason says which).
	CacheKey digest.Digest `json:"cache_key,omitempty"`
	Cached   bool          `json:"cached"`
	Status   string        `json:"status"`
	Reason   string        `json:"reason,omitempty"`
	// PreviousAction is the definition digest it last completed with, if it ever did, and
	// Changes what changed in its definition since.
	PreviousAction digest.Digest `json:"previous_action,omitempty"`
	HasPrevious    bool          `json:"has_previous"`
	Changes        []Change      `json:"changes"`
	// Unchanged are the inputs whose producer ran again in the run that last settled this
	// step from the cache: their bytes came out as before, so it stayed cached.
	Unchanged []UnchangedInput `json:"unchanged_inputs"`
	// Waits are the capabilities it needs, directly or through other nodes, that apply
	// acquires by reconstruction, each with its job: the step runs once they are admitted.
	Waits []Wait `json:"waits_for_jobs"`
}

// Wait is a capability to be reconstructed that a step waits for, and its job.
type Wait struct {
	Capability string   `json:"capability"`
	Job        *JobView `json:"job"`
	Budget     Budget   `json:"budget"`
}

// UnchangedInput is a mounted step output whose producer ran but made the same bytes.
type UnchangedInput struct {
	Path     string        `json:"path"`     // where it is mounted
	Producer string        `json:"producer"` // the step that made it
	Output   string        `json:"output"`   // the producer's output path
	Digest   digest.Digest `json:"digest"`   // its content
	Run      string        `json:"run"`      // the run in which the producer ran
}

// Explain explains step addr of g as planned by p, from what workspace w recorded.
func Explain(ctx context.Context, w *workspace.Workspace, g *graph.Graph, p *Plan, addr string) (*Explanation, error) {
	n := g.Nodes[addr]
	if n == nil || (n.Kind != graph.KindStep && n.Kind != graph.KindCheck) {
		return nil, fmt.Errorf("%s is not a step or check", addr)
	}
	e := &Explanation{Node: addr, Action: n.Digest, Changes: []Change{}, Unchanged: []UnchangedInput{}}
	for _, pn := range p.Nodes {
		if pn.Address == addr {
			e.Status, e.Reason = pn.Status, pn.Reason
		}
	}
	if e.Status == "" {
		return nil, fmt.Errorf("%s is not in the plan of %s: the targets do not need it", addr, strings.Join(p.Targets, ", "))
	}
	if k := p.keys[addr]; k != nil {
		e.CacheKey, e.Cached = k.Key, k.Result != nil
	}
	prev, found, err := w.State.LastDefinition(ctx, addr)
	if err != nil {
		return nil, err
	}
	e.HasPrevious = found
	if found {
		e.PreviousAction = prev.Action
		if prev.Action != n.Digest {
			if e.Changes, err = DiffJSON(prev.JSON, n.Definition); err != nil {
				return nil, err
			}
		}
	}
	if e.Unchanged, err = unchangedInputs(ctx, w, n); err != nil {
		return nil, err
	}
	e.Waits = waits(g, p, n)
	return e, nil
}

// waits are the capabilities p reconstructs that n needs, directly or through the nodes it
// depends on, in address order.
func waits(g *graph.Graph, p *Plan, n *graph.Node) []Wait {
	byAddr := map[string]*Capability{}
	for _, c := range p.Capabilities {
		if c.Status == StatusReconstruct && c.Reconstruct != nil {
			byAddr[c.Address] = c
		}
	}
	out := []Wait{}
	if len(byAddr) == 0 {
		return out
	}
	seen := map[string]bool{}
	var visit func(a string)
	visit = func(a string) {
		if seen[a] {
			return
		}
		seen[a] = true
		if c := byAddr[a]; c != nil {
			out = append(out, Wait{Capability: a, Job: c.Reconstruct.Job, Budget: c.Reconstruct.Budget})
			return // what its builder needs is the job's, not the step's
		}
		for _, d := range g.Nodes[a].Deps {
			visit(d)
		}
	}
	for _, d := range n.Deps {
		visit(d)
	}
	slices.SortFunc(out, func(a, b Wait) int { return strings.Compare(a.Capability, b.Capability) })
	return out
}

// unchangedInputs are n's mounted step outputs whose producer ran (done) in the run that
// last settled n from the cache, as workspace w recorded them.
func unchangedInputs(ctx context.Context, w *workspace.Workspace, n *graph.Node) ([]UnchangedInput, error) {
	out := []UnchangedInput{}
	last, found, err := w.State.LastNodeResult(ctx, n.Address)
	if err != nil || !found || last.Status != state.NodeCached {
		return out, err
	}
	for _, path := range slices.Sorted(maps.Keys(n.Step.Mounts)) {
		a := n.Step.Mounts[path]
		if a.Kind != lang.ArtifactStepOutput {
			continue
		}
		prod, found, err := w.State.LastNodeResult(ctx, a.Node)
		if err != nil {
			return nil, err
		}
		if !found || prod.RunID != last.RunID || prod.Status != state.NodeDone {
			continue
		}
		res, hit, err := w.Cache.Lookup(ctx, prod.Action)
		if err != nil || !hit {
			continue // its record is gone: nothing to name the bytes by
		}
		if o := res.Output(a.Path); o != nil {
			out = append(out, UnchangedInput{Path: path, Producer: a.Node, Output: a.Path, Digest: o.Digest, Run: prod.RunID})
		}
	}
	return out, nil
}

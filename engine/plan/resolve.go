package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/foundry-build/foundry/engine/admit"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/lang"
)

// resolution is the outcome of resolving one capability.
type resolution struct {
	status    string // registry, build or missing
	recipe    string
	pinned    *admit.Admitted
	reason    string
	reachable bool
	ready     bool
	options   []*RecipeOption
	cycle     []string // set when the capability was met again on its own stack
	witness   []string // a cycle that made it (or a prerequisite) unresolvable
	registry  string   // why the registry's version under the contract tag is not used
	// depth is how many reconstructions deep it is when its status is reconstruct: 1, plus
	// the deepest among the capabilities its builder mounts that are reconstructed too.
	depth int
}

// resolver resolves capabilities in the order the design fixes: an admitted version in the
// registry; else each recipe by (cost, name) whose prerequisites all resolve, recursively,
// with the requirement on an active stack; else unresolved, with, per recipe examined, the
// smallest observed set of missing prerequisites.
type resolver struct {
	g        *graph.Graph
	admitted func(*graph.Node) (*admit.Admitted, string, error)
	memo     map[string]*resolution
	err      error
}

// prerequisites lists the capabilities a recipe needs: those its steps and package refer to.
func prerequisites(g *graph.Graph, recipe string) []string {
	set := map[string]bool{}
	// The recipe's node and those under it, by the sorted addresses, as markRecipe finds
	// them, rather than a scan of every node for each recipe resolved.
	nodes := []*graph.Node{g.Nodes[recipe]}
	lo, hi := under(g.Index().Addrs, recipe+".")
	nodes = append(nodes, g.Index().Nodes[lo:hi]...)
	for _, n := range nodes {
		if n == nil {
			continue
		}
		for _, d := range n.Deps {
			if g.Nodes[d].Kind == graph.KindCapability {
				set[d] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (r *resolver) resolve(c string, stack []string) *resolution {
	for i, s := range stack {
		if s == c {
			w := append(append([]string{}, stack[i:]...), c)
			return &resolution{status: StatusMissing, cycle: w, witness: w,
				reason: "needs itself: " + strings.Join(append(append([]string{}, stack[i:]...), c), " → ")}
		}
	}
	if m, ok := r.memo[c]; ok {
		return m
	}
	n := r.g.Nodes[c]
	res := &resolution{status: StatusMissing}
	if r.admitted != nil && r.err == nil {
		adm, why, err := r.admitted(n)
		res.registry = why
		if err != nil {
			r.err = fmt.Errorf("looking up %s in the registry: %w", c, err)
		} else if adm != nil {
			res.status, res.pinned, res.reachable, res.ready = StatusRegistry, adm, true, true
			res.reason = "admitted version " + adm.Ref
		}
	}
	var opts []*RecipeOption
	for _, rec := range n.Providers {
		rn := r.g.Nodes[rec]
		opts = append(opts, &RecipeOption{Address: rec, Cost: rn.Recipe.Cost, Steps: len(rn.Recipe.Steps)})
	}
	sort.Slice(opts, func(i, j int) bool {
		if opts[i].Cost != opts[j].Cost {
			return opts[i].Cost < opts[j].Cost
		}
		return opts[i].Address < opts[j].Address
	})
	res.options = opts
	stack = append(stack, c)
	cyclic := false
	for _, o := range opts {
		if res.status == StatusRegistry {
			o.Status = StatusAlternative
			continue
		}
		ready := true
		for _, p := range prerequisites(r.g, o.Address) {
			pr := r.resolve(p, stack)
			if pr.witness != nil {
				cyclic = true
				if o.Cycle == nil && pr.status == StatusMissing {
					o.Cycle = pr.witness
				}
				if res.witness == nil {
					res.witness = pr.witness
				}
			}
			if pr.status == StatusMissing {
				o.Missing = append(o.Missing, p)
			}
			ready = ready && pr.ready
		}
		switch {
		case len(o.Missing) > 0:
			o.Status = StatusMissing
		case res.status == StatusMissing:
			o.Status = StatusBuild
			res.status, res.recipe, res.reachable, res.ready = StatusBuild, o.Address, true, ready
			res.reason = "built by " + o.Address
		default:
			o.Status = StatusAlternative
		}
	}
	if res.status == StatusMissing {
		switch {
		case len(opts) == 0:
			res.reason = "no recipe provides it and no admitted version is in the registry"
		default:
			var parts []string
			for _, o := range opts {
				part := fmt.Sprintf("%s needs %s", o.Address, strings.Join(o.Missing, ", "))
				if o.Cycle != nil {
					part += " (a cycle: " + strings.Join(o.Cycle, " → ") + ")"
				}
				parts = append(parts, part)
			}
			res.reason = "no recipe can be built: " + strings.Join(parts, "; ")
		}
		// Reachable by its reconstruct block, but not ready: no candidate exists yet. The
		// capabilities its builder mounts must resolve first, within the project's depth.
		if rc := n.Capability.Reconstruct; rc != nil {
			if why, depth, cyc := r.builderNeeds(rc, stack); why != "" {
				res.reason = fmt.Sprintf("%s; its reconstruct block cannot run: %s", res.reason, why)
				cyclic = cyclic || cyc
			} else {
				res.status, res.reachable, res.ready, res.depth = StatusReconstruct, true, false, depth
				res.reason = fmt.Sprintf("%s; to be reconstructed by its builder (budget: %d candidates)", res.reason, rc.Budget.Candidates)
			}
		}
	}
	// A result that depended on the active stack is valid only under it: do not memoize.
	if !cyclic {
		r.memo[c] = res
	}
	return res
}

// builderNeeds resolves the capabilities the builder of rc mounts, on stack (which ends
// with rc's capability). It says why the reconstruction cannot run ("" when it can), how
// deep it is, and whether the answer depended on the stack (a cycle).
func (r *resolver) builderNeeds(rc *lang.Reconstruct, stack []string) (why string, depth int, cyclic bool) {
	depth = 1
	// Proposals from outside mount nothing; a build mounts what it builds with.
	for _, st := range []*lang.Step{rc.Builder, rc.Build} {
		if st == nil {
			continue
		}
		for _, target := range slices.Sorted(maps.Keys(st.Mounts)) {
			a := st.Mounts[target]
			if a.Kind != lang.ArtifactCapability {
				continue
			}
			pr := r.resolve(a.Node, stack)
			cyclic = cyclic || pr.witness != nil
			switch {
			case pr.cycle != nil:
				return fmt.Sprintf("its %s needs %s, which needs it (a cycle: %s)", st.Kind, a.Node, strings.Join(pr.cycle, " → ")), 0, true
			case pr.status == StatusMissing:
				return fmt.Sprintf("its %s needs %s, which cannot be resolved", st.Kind, a.Node), 0, cyclic
			case pr.status == StatusReconstruct:
				depth = max(depth, pr.depth+1)
			}
		}
	}
	if limit := reconstructDepth(r.g.Config.Project); depth > limit {
		return fmt.Sprintf("it would be reconstructed %d deep (its builder needs a capability that is reconstructed too), and the project's reconstruct_depth is %d", depth, limit), 0, cyclic
	}
	return "", depth, cyclic
}

// reconstructDepth is how deep reconstructions may nest in project p.
func reconstructDepth(p *lang.Project) int {
	if p.ReconstructDepth > 0 {
		return p.ReconstructDepth
	}
	return lang.DefaultReconstructDepth
}

// resolveCapabilities resolves every capability of the graph, in the graph's order, and
// sets the statuses of the capability, recipe, package and step nodes accordingly. at is
// each node's position in that order, or -1. It reports whether something is not chosen:
// a node made an alternative, or a reconstruct block that will not run.
func resolveCapabilities(g *graph.Graph, p *Plan, byNum []*Node, at []int32, admitted func(*graph.Node) (*admit.Admitted, string, error)) (unchosen bool, err error) {
	r := &resolver{g: g, admitted: admitted, memo: map[string]*resolution{}}
	p.Capabilities = []*Capability{}
	// The capabilities are found by name: looking for them among the nodes would read
	// every node.
	var caps []int32
	for name := range g.Config.Capabilities {
		if n := g.Nodes["capability."+name]; n != nil && at[n.Num()] >= 0 {
			caps = append(caps, n.Num())
		}
	}
	slices.SortFunc(caps, func(a, b int32) int { return cmp.Compare(at[a], at[b]) })
	for _, k := range caps {
		n := g.Index().Nodes[k]
		a := n.Address
		res := r.resolve(a, nil)
		if r.err != nil {
			return false, r.err
		}
		cp := &Capability{Address: a, ContractDigest: n.Digest, Status: res.status, Recipe: res.recipe,
			Pinned: res.pinned, Reason: res.reason, Registry: res.registry, Reachable: res.reachable, Ready: res.ready, Recipes: res.options}
		if cp.Recipes == nil {
			cp.Recipes = []*RecipeOption{}
		}
		if rc := n.Capability.Reconstruct; rc != nil {
			cp.Reconstruct = reconstructOf(n.Address, rc)
			unchosen = unchosen || cp.Status != StatusReconstruct
			if cp.Status == StatusReconstruct {
				// The job apply opens; ForWorkspace says what an earlier apply recorded of it.
				id, _, _, err := JobIdentity(g, n)
				if err != nil {
					return false, err
				}
				cp.Reconstruct.Job = &JobView{ID: id, Status: "new"}
			}
		}
		for _, o := range cp.Recipes {
			switch o.Status {
			case StatusAlternative:
				markRecipe(g, byNum, o.Address, StatusAlternative, "fallback if the chosen recipe fails evaluation")
				unchosen = true
			case StatusMissing:
				markRecipe(g, byNum, o.Address, StatusMissing, "needs "+strings.Join(o.Missing, ", ")+", which cannot be resolved")
			}
		}
		byNum[k].Status, byNum[k].Reason = cp.Status, cp.Reason
		p.Capabilities = append(p.Capabilities, cp)
	}
	return unchosen, nil
}

// reconstructOf is the plan's view of capability c's reconstruct block.
func reconstructOf(c string, rc *lang.Reconstruct) *Reconstruct {
	v := &Reconstruct{Source: "builder", Builder: c + ".reconstruct.builder", Argv: []string{}, Candidates: rc.Budget.Candidates, Budget: budgetOf(rc.Budget)}
	if rc.Proposals != nil {
		v.Source = "proposals"
	}
	if b := rc.Builder; b != nil {
		v.Argv = b.Run
		if b.Image != nil {
			v.Image = b.Image.Node
		}
	}
	if b := rc.Build; b != nil {
		v.Build = &ReconstructBuild{Address: lang.BuildAddress(strings.TrimPrefix(c, "capability.")), Argv: b.Run, Outputs: b.Outputs}
		if b.Image != nil {
			v.Build.Image = b.Image.Node
		}
	}
	return v
}

// markRecipe sets the status of a recipe and of its package and steps, found among the
// sorted addresses: the recipe's own, then those under it. (An address such as
// recipe.r-x sorts between the two.)
func markRecipe(g *graph.Graph, byNum []*Node, recipe, st, reason string) {
	addrs := g.Index().Addrs
	mark := func(k int) {
		if pn := byNum[k]; pn != nil { // nil: not in the order of a graph that failed
			pn.Status, pn.Reason = st, reason
		}
	}
	if k, ok := slices.BinarySearch(addrs, recipe); ok {
		mark(k)
	}
	lo, hi := under(addrs, recipe+".")
	for k := lo; k < hi; k++ {
		mark(k)
	}
}

// under returns the range [lo, hi) of the sorted addresses that start with prefix: a
// recipe's or product's nodes, for prefix "recipe.r.", found without a scan of every node.
func under(sorted []string, prefix string) (lo, hi int) {
	lo, _ = slices.BinarySearch(sorted, prefix)
	hi = lo
	for hi < len(sorted) && strings.HasPrefix(sorted[hi], prefix) {
		hi++
	}
	return lo, hi
}

package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sort"
	"time"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/trace"
)

// outcome is how a node was settled, as the apply's Result counts it. A node that failed
// has an error instead, and counts as a failure only.
type outcome int

const (
	settled  outcome = iota // settled with nothing of its own to count: a recipe, a product, a pinned capability
	executed                // a step or check that ran
	cached                  // a step or check taken from the action cache
	built                   // a seed's image, a package, an admitted capability
	fetched                 // a source fetched in this apply (a stored one is settled)
	skipped                 // not settled: a node it needs failed (done.cause)
)

// String is the outcome as traces and reports name it (spec/cli.md).
func (o outcome) String() string {
	switch o {
	case executed:
		return "executed"
	case cached:
		return "cached"
	case built:
		return "built"
	case fetched:
		return "fetched"
	case skipped:
		return "skipped"
	}
	return "settled"
}

// planIndex is the plan's nodes and capabilities by address.
type planIndex struct {
	nodes        map[string]*plan.Node
	capabilities map[string]*plan.Capability
}

func indexPlan(p *plan.Plan) planIndex {
	ix := planIndex{nodes: make(map[string]*plan.Node, len(p.Nodes)), capabilities: make(map[string]*plan.Capability, len(p.Capabilities))}
	for _, n := range p.Nodes {
		ix.nodes[n.Address] = n
	}
	for _, c := range p.Capabilities {
		ix.capabilities[c.Address] = c
	}
	return ix
}

// activeNodes returns the nodes this apply must settle, in graph order, and each one's
// execution dependencies. Missing nodes are left out. Recipes are not walked here: the
// capability they provide drives them, one candidate at a time (buildCandidate), so a
// capability depends on whatever its recipes need from outside every recipe (seeds, other
// capabilities).
func (r *runner) activeNodes() ([]string, map[string][]string) {
	inRecipe := map[string]bool{} // the nodes of every recipe's block
	for a, n := range r.g.Nodes {
		if n.Kind == graph.KindRecipe {
			inRecipe[a] = true
			for _, p := range n.Parts() {
				inRecipe[p] = true
			}
		}
	}
	deps := map[string][]string{}
	// What the recipes of capabilities being built need from outside themselves: a seed
	// that only a fallback recipe uses is planned as an alternative, but must be ready in
	// case the fallback is tried.
	fallbackNeeds := map[string]bool{}
	for _, c := range r.plan.Capabilities {
		if c.Status != plan.StatusBuild {
			continue
		}
		need := map[string]bool{}
		for _, o := range c.Recipes {
			if o.Status != plan.StatusBuild && o.Status != plan.StatusAlternative {
				continue
			}
			for _, p := range r.g.Nodes[o.Address].Parts() {
				for _, d := range r.g.Nodes[p].Deps {
					if !inRecipe[d] {
						need[d] = true
					}
				}
			}
		}
		deps[c.Address] = append(deps[c.Address], slices.Sorted(maps.Keys(need))...)
		for d := range need {
			fallbackNeeds[d] = true
		}
	}
	var active []string
	for _, a := range r.g.Order {
		pn := r.planned.nodes[a]
		if pn == nil || pn.Status == plan.StatusMissing || inRecipe[a] {
			continue
		}
		if pn.Status == plan.StatusAlternative && !fallbackNeeds[a] {
			continue
		}
		active = append(active, a)
		// A capability's own dependencies are what its reconstruction reads: they are
		// waited for (and built) only when it is to be reconstructed.
		if n := r.g.Nodes[a]; n.Kind != graph.KindCapability || pn.Status == plan.StatusReconstruct {
			deps[a] = append(deps[a], n.Deps...)
		}
	}
	return active, deps
}

// done is a node the walk settled, or tried to.
type done struct {
	addr    string
	outcome outcome
	cause   string // skipped: the failed node it needs
	err     error
	panic   *Panic // settling the node panicked: raised again by the walk
	// start and end are when it was settled, on trace track tid (trace.TrackApply when the
	// walk settled it itself).
	start, end time.Time
	tid        int
}

// walker is the state of one walk: what each node still waits for, who uses it, which
// nodes are ready, and which are blocked by a failure.
type walker struct {
	r         *runner
	ctx       context.Context
	res       *Result
	users     map[string][]string
	deps      map[string][]string
	waiting   map[string]int
	failed    map[string]string // node → the root failure it is blocked by
	ready     []string
	remaining int
	// start is when the walk began, and readyAt when each node's last input settled (the
	// walk's start for a node that needs none): what it waited for, in the trace.
	start   time.Time
	readyAt map[string]time.Time
}

// walk runs the active nodes with at most Parallelism steps at once. A node whose
// dependency failed is skipped (and so are its users), reported once as skipped with the
// failure that blocked it.
func (r *runner) walk(ctx context.Context, active []string, deps map[string][]string) *Result {
	w := &walker{r: r, ctx: ctx, res: &Result{}, users: map[string][]string{}, deps: deps, waiting: map[string]int{},
		failed: map[string]string{}, remaining: len(active), start: time.Now(), readyAt: map[string]time.Time{}}
	for _, a := range active {
		w.waiting[a] = len(deps[a])
		for _, d := range deps[a] {
			w.users[d] = append(w.users[d], a)
		}
	}
	for _, a := range active {
		if w.waiting[a] == 0 {
			w.ready = append(w.ready, a)
			w.readyAt[a] = w.start
		}
	}
	// Buffered for every node, so that no goroutine is left blocked on a walk that stopped
	// early to raise a panic.
	results := make(chan done, len(active))
	sem := make(chan struct{}, r.opt.Parallelism)
	running := 0
	for w.remaining > 0 {
		for len(w.ready) > 0 && ctx.Err() == nil && r.fatalErr() == nil {
			a := w.ready[0]
			w.ready = w.ready[1:]
			n := r.g.Nodes[a]
			if cause, blocked := w.failed[a]; blocked {
				now := time.Now()
				w.finish(done{addr: a, outcome: skipped, cause: cause, start: now, end: now})
				continue
			}
			if r.precachedHit(n) {
				// Settled from the cache lookup made before the walk: no work, so no
				// goroutine to hand it to.
				r.emit(event.Event{Type: "node_cached", Node: a, Action: n.Digest})
				trace.Instant(ctx, a, "cache", map[string]any{"hit": "action cache", "digest": string(n.Digest)})
				now := time.Now()
				w.finish(done{addr: a, outcome: cached, start: now, end: now})
				continue
			}
			running++
			go func() { results <- r.settleOne(ctx, n, sem) }()
		}
		if running == 0 {
			break // cancelled or stopped: nothing more will finish
		}
		running--
		d := <-results
		if d.panic != nil {
			panic(d.panic)
		}
		w.finish(d)
	}
	sort.Strings(w.res.Skipped)
	sort.Strings(w.res.Interrupted)
	return w.res
}

// settleOne settles n on a goroutine of the walk, a step or check holding one of sem's
// slots while it does. A panic is returned, to be raised again by the walk.
func (r *runner) settleOne(ctx context.Context, n *graph.Node, sem chan struct{}) (d done) {
	d.addr = n.Address
	defer func() {
		if v := recover(); v != nil {
			p, ok := v.(*Panic) // from a nested walk: it keeps its own node and stack
			if !ok {
				p = &Panic{Node: n.Address, Value: v, Stack: debug.Stack()}
			}
			d = done{addr: n.Address, panic: p}
		}
	}()
	// A step or check is traced on the lane of the executor slot it holds; any other node
	// on an engine lane of its own, since nodes settle side by side.
	pool := trace.PoolEngine
	if n.Kind == graph.KindStep || n.Kind == graph.KindCheck {
		sem <- struct{}{}
		defer func() { <-sem }()
		pool = trace.PoolSlot
	}
	ctx, tid, release := trace.Lane(ctx, pool)
	defer release()
	d.tid, d.start = tid, time.Now()
	d.outcome, d.err = r.settle(ctx, n)
	d.end = time.Now()
	return d
}

// finish counts how d's node ended and releases its users: those it was the last to wait
// for are ready, and a failure (its own, or the one that blocked it) blocks them.
func (w *walker) finish(d done) {
	w.remaining--
	res, cause := w.res, ""
	switch {
	case d.outcome == skipped:
		w.skip(d.addr, d.cause)
		cause = d.cause
	case d.err != nil && w.ctx.Err() != nil:
		// Whatever ended with an error once the apply was cancelled was stopped by it (or
		// lost the race with it): it runs again next time, and no user of it is started now
		// anyway.
		res.Interrupted = append(res.Interrupted, d.addr)
		cause = d.addr
	case d.err != nil:
		var se *StepError
		if !errors.As(d.err, &se) {
			se = &StepError{Node: d.addr, Reason: d.err.Error()}
		}
		res.Failed = append(res.Failed, se)
		cause = d.addr
		w.recordFailed(d.addr, se)
	case d.outcome == executed:
		res.Executed++
	case d.outcome == cached:
		res.Cached++
	case d.outcome == built:
		res.Built++
	case d.outcome == fetched:
		res.Fetched++
	}
	w.trace(d, cause)
	for _, u := range w.users[d.addr] {
		if _, already := w.failed[u]; cause != "" && !already {
			w.failed[u] = cause
		}
		w.waiting[u]--
		if w.waiting[u] == 0 {
			w.ready = append(w.ready, u)
			w.readyAt[u] = time.Now()
		}
	}
}

// trace records how d's node ended in the apply's trace.
func (w *walker) trace(d done, cause string) {
	n := w.r.g.Nodes[d.addr]
	tn := trace.Node{Address: d.addr, Kind: string(n.Kind), Outcome: d.outcome.String(), Deps: w.deps[d.addr], Digest: string(n.Digest)}
	switch {
	case d.outcome == skipped:
		tn.Cause = cause
	case d.err != nil && w.ctx.Err() != nil:
		tn.Outcome, tn.Error = "interrupted", d.err.Error()
	case d.err != nil:
		tn.Outcome, tn.Error = "failed", d.err.Error()
		if se := (*StepError)(nil); errors.As(d.err, &se) {
			tn.Log = se.LogTail
		}
	}
	w.r.trace.Settled(tn, d.tid, d.start, d.end)
	// A step or check the walk handed to a goroutine held a slot's lane (d.tid); one it
	// settled itself (a cache hit found before the walk, a skip) waited for no slot.
	slot := (n.Kind == graph.KindStep || n.Kind == graph.KindCheck) && d.tid != trace.TrackApply
	w.r.trace.Waited(d.addr, w.start, w.readyAt[d.addr], d.start, slot)
}

// recordFailed records node a, which failed with se, in the run's node rows when it is not
// a step or check (those record their own end): a capability whose reconstruction was
// exhausted is one failure in apply's summary and in status alike (state.CountNodes).
func (w *walker) recordFailed(a string, se *StepError) {
	r := w.r
	n := r.g.Nodes[a]
	if n == nil || n.Kind == graph.KindStep || n.Kind == graph.KindCheck {
		return
	}
	ctx := context.WithoutCancel(w.ctx)
	err := r.ws.State.NodeStarted(ctx, r.runID, a, n.Digest)
	if err == nil {
		err = r.ws.State.NodeFinished(ctx, r.runID, a, state.NodeResult{Status: state.NodeFailed, Error: se.Error()})
	}
	if err != nil {
		r.stop(fmt.Errorf("recording %s as failed: %w", a, err))
	}
}

// skip reports node a as skipped because it needs cause, which failed: recorded for a step
// or check, and said for a product that would have been delivered.
func (w *walker) skip(a, cause string) {
	r := w.r
	w.res.Skipped = append(w.res.Skipped, a)
	why := "needs " + cause + ", which failed"
	switch n := r.g.Nodes[a]; {
	case n.Kind == graph.KindStep || n.Kind == graph.KindCheck:
		if err := r.ws.State.NodeFinished(w.ctx, r.runID, a, state.NodeResult{Status: state.NodeSkipped, Error: why}); err != nil {
			r.stop(fmt.Errorf("recording %s as skipped: %w", a, err))
		}
		r.emit(event.Event{Type: "node_skipped", Node: a, Message: why})
	case n.Kind == graph.KindProduct && n.Product.Deliver != nil:
		r.emit(event.Event{Type: "node_skipped", Node: a, Message: "not delivered: " + why})
	}
}

// settle produces one node's result, its work traced as the phase its kind names (a
// step's phases are traced as it runs: runStep).
func (r *runner) settle(ctx context.Context, n *graph.Node) (outcome, error) {
	if ph := phaseOf[n.Kind]; ph != "" {
		sp := trace.Start(ctx, ph, "phase")
		defer sp.End()
	}
	switch n.Kind {
	case graph.KindSeed:
		img, err := r.buildSeed(ctx, n)
		if err != nil {
			return 0, fmt.Errorf("building the image of %s: %w", n.Address, err)
		}
		r.setResult(n.Address, &nodeResult{image: img})
		return built, nil
	case graph.KindSource:
		return r.settleSource(ctx, n) // source.go
	case graph.KindStep, graph.KindCheck:
		return r.runStep(ctx, n) // precached ones are settled by walk
	case graph.KindPackage:
		tree, err := r.assemble(ctx, n.Package.Files)
		if err != nil {
			return 0, fmt.Errorf("packaging %s: %w", n.Address, err)
		}
		r.setResult(n.Address, &nodeResult{tree: tree})
		return built, nil
	case graph.KindRecipe:
		r.setResult(n.Address, r.result(packageOf(r.g, n)))
		return settled, nil
	case graph.KindCapability:
		o, err := r.settleCapability(ctx, n)
		r.caps.settled(n, err)
		return o, err
	case graph.KindProduct:
		// Accepted first (accept.go), then delivered (deliver.go).
		if err := r.settleProduct(ctx, n); err != nil {
			return 0, err
		}
		return settled, r.deliverProduct(ctx, n)
	}
	return 0, fmt.Errorf("%s: unknown node kind %s", n.Address, n.Kind)
}

// phaseOf names the phase of the nodes whose work is one phase.
var phaseOf = map[graph.NodeKind]string{
	graph.KindSeed:    "seed build",
	graph.KindSource:  "fetch",
	graph.KindPackage: "package",
	graph.KindProduct: "acceptance and delivery",
}

// packageOf is the address of recipe node n's package, "" when it has none.
func packageOf(g *graph.Graph, n *graph.Node) string {
	for _, p := range n.Parts() {
		if g.Nodes[p].Kind == graph.KindPackage {
			return p
		}
	}
	return ""
}

// stop stops the apply with err, the first such error: no node is started after it, and
// Apply returns it. It is for what the apply cannot go on without (an executor, a state
// database it can write), not for a node's failure.
func (r *runner) stop(err error) {
	r.fatal.CompareAndSwap(nil, &err)
}

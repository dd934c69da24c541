package run

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/fetch"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// Sources (spec/language.md §6a): a source node is settled before anything that mounts it
// runs, by engine/fetch, from this process. Its result is its record (nodeResult.source)
// and the tree it made (nodeResult.tree), which steps mount and key their cache by.

// settleSource takes a source from the store, or fetches it when the plan marks it fetch.
// A source the plan found no grant for is refused again here, whatever a caller did with
// the plan: nothing is fetched.
func (r *runner) settleSource(ctx context.Context, n *graph.Node) (outcome, error) {
	pn := r.planned.nodes[n.Address]
	if pn == nil || pn.Status == plan.StatusNeedsGrant {
		return 0, fmt.Errorf("%s: no grant allows fetching it; nothing was fetched", n.Address)
	}
	f := &fetch.Fetcher{Store: r.ws.Store, Cache: r.ws.Cache, Grants: r.plan.Grants(), Scratch: r.scratch}
	res, ok, err := f.Stored(ctx, n.Digest)
	if err != nil {
		return 0, err
	}
	if ok {
		r.setSource(n.Address, res)
		r.emit(event.Event{Type: "node_cached", Node: n.Address, Action: n.Digest, Message: "stored"})
		return settled, nil // not a step: the apply's cached count is of steps
	}
	start := time.Now()
	r.emit(event.Event{Type: "node_started", Node: n.Address, Action: n.Digest, Message: "fetching " + n.Source.URLs[0]})
	if err := os.MkdirAll(r.scratch, 0o755); err != nil {
		return 0, err
	}
	res, err = f.Fetch(ctx, n.Source, n.Digest, n.Definition)
	if err != nil {
		err = fmt.Errorf("fetching %s: %w", n.Address, err)
		r.emit(event.Event{Type: "node_failed", Node: n.Address, Action: n.Digest, Elapsed: time.Since(start), Message: err.Error()})
		return 0, err
	}
	r.setSource(n.Address, res)
	r.emit(event.Event{Type: "node_done", Node: n.Address, Action: n.Digest, Elapsed: time.Since(start), Message: "fetched from " + res.Origin})
	return fetched, nil
}

func (r *runner) setSource(a string, res *cache.Result) {
	tree, _ := fetch.TreeOf(res)
	r.setResult(a, &nodeResult{source: res, tree: tree})
}

// sourceInput materializes the tree of source a for mounting at target, refusing one that
// holds a sealed case's content (as a project directory is), and says what it is for
// provenance: where its pinned content came from, the pin, and the tree mounted.
func (r *runner) sourceInput(a *lang.Artifact, target string) (string, provenance.Dependency, error) {
	prod := r.result(a.Node)
	if prod == nil || prod.source == nil || prod.tree == "" {
		return "", provenance.Dependency{}, fmt.Errorf("%s was not fetched", a.Node)
	}
	man, err := r.ws.Store.ReadManifest(prod.tree)
	if err != nil {
		return "", provenance.Dependency{}, err
	}
	if err := r.refuseSealed(a.Node, man); err != nil {
		return "", provenance.Dependency{}, err
	}
	src, err := r.ws.MaterializeTree(prod.tree)
	if err != nil {
		return "", provenance.Dependency{}, err
	}
	return src, r.sourceDependency(a.Node, prod, target), nil
}

// sourceDependency names the fetched source at addr, seen by a step as name, for its
// provenance: where its pinned content came from, the pin, and its tree.
func (r *runner) sourceDependency(addr string, prod *nodeResult, name string) provenance.Dependency {
	s := r.g.Nodes[addr].Source
	dep := provenance.Dependency{Name: name, Source: addr, Tree: string(prod.tree)}
	switch s.Type {
	case lang.SourceGit:
		dep.URI, dep.GitCommit = "git+"+prod.source.Origin+"@"+s.Pin, s.Pin
	case lang.SourceOCI:
		dep.URI, dep.Digest = "oci://"+prod.source.Origin, s.Pin
	default:
		dep.URI, dep.Digest = prod.source.Origin, s.Pin
	}
	return dep
}

// imageSources names the sources laid into the image of seed addr by a layer.dir, its
// bases' (layer.from) first, each as "image:AT". A source is fetched before any seed that
// lays it is built, so each has its result here.
func (r *runner) imageSources(addr string) ([]provenance.Dependency, error) {
	n := r.g.Nodes[addr]
	if n == nil || n.Seed == nil {
		return nil, nil
	}
	var deps []provenance.Dependency
	for _, l := range n.Seed.Layers {
		switch {
		case l.From != nil:
			base, err := r.imageSources(l.From.Node)
			if err != nil {
				return nil, err
			}
			deps = append(deps, base...)
		case l.Dir != nil && l.Dir.Kind == lang.ArtifactSource:
			prod := r.result(l.Dir.Node)
			if prod == nil || prod.source == nil || prod.tree == "" {
				return nil, fmt.Errorf("%s, laid into %s, was not fetched", l.Dir.Node, addr)
			}
			deps = append(deps, r.sourceDependency(l.Dir.Node, prod, "image:"+l.At))
		}
	}
	return deps, nil
}

// sourceTree is the host directory holding source a's tree, for a seed's layer or a
// package: materialized from the store.
func (r *runner) sourceTree(a *lang.Artifact) (string, error) {
	prod := r.result(a.Node)
	if prod == nil || prod.tree == "" {
		return "", fmt.Errorf("%s was not fetched", a.Node)
	}
	return r.ws.MaterializeTree(prod.tree)
}

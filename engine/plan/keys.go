package plan

import (
	"slices"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/lang"
)

// Keyed is a step whose cache key the plan computed (graph.Graph.CacheKey): every step
// output it mounts comes from a step found in the cache, and every capability it mounts is
// pinned to an admitted version. Result is the record found under Key, nil for a miss.
type Keyed struct {
	Key    digest.Digest
	Result *cache.Result
}

// lookupFunc looks cache keys up (Cache.LookupMany).
type lookupFunc = func(keys []digest.Digest) (map[digest.Digest]cache.Entry, error)

// plannedKeys computes, before anything runs, the cache key of every step of the plan
// whose mounted content is already known, and looks the keys up: first the steps that
// mount no step output, then, a wave at a time, those whose producers were all found. A
// step left out runs unless what it mounts comes out unchanged (see waitsOn). Only steps
// the plan will run or take from the cache are keyed.
func plannedKeys(g *graph.Graph, p *Plan, lookup lookupFunc) (map[string]*Keyed, error) {
	pinned, fetched := pinnedTrees(p), sourceTrees(p)
	status := make(map[string]string, len(p.Nodes))
	for _, pn := range p.Nodes {
		status[pn.Address] = pn.Status
	}
	// A step's wave is one more than its latest producer's; a step whose content cannot
	// be known before the apply (a producer not keyed, a capability not pinned) has none.
	wave := map[string]int{}
	var waves [][]*graph.Node
	for _, a := range g.Order {
		n := g.Nodes[a]
		if (n.Kind != graph.KindStep && n.Kind != graph.KindCheck) || (status[a] != StatusRun && status[a] != StatusCached) {
			continue
		}
		w, known := 0, true
		for _, m := range n.Step.Mounts {
			switch m.Kind {
			case lang.ArtifactStepOutput:
				pw, ok := wave[m.Node]
				known = known && ok
				w = max(w, pw+1)
			case lang.ArtifactCapability:
				_, ok := pinned[m.Node]
				known = known && ok
			case lang.ArtifactSource:
				_, ok := fetched[m.Node]
				known = known && ok
			}
		}
		if !known {
			continue
		}
		wave[a] = w
		for w >= len(waves) {
			waves = append(waves, nil)
		}
		waves[w] = append(waves[w], n)
	}
	out := map[string]*Keyed{}
	content := func(a *lang.Artifact) (graph.Content, bool) {
		switch a.Kind {
		case lang.ArtifactCapability:
			t, ok := pinned[a.Node]
			return graph.TreeContent(t), ok
		case lang.ArtifactSource:
			t, ok := fetched[a.Node]
			return graph.TreeContent(t), ok
		}
		k := out[a.Node]
		if k == nil || k.Result == nil {
			return graph.Content{}, false
		}
		o := k.Result.Output(a.Path)
		if o == nil {
			return graph.Content{}, false
		}
		return OutputContent(o), true
	}
	for _, nodes := range waves {
		var wk []*graph.Node
		var keys []digest.Digest
		for _, n := range nodes {
			key, _, ok, err := g.CacheKey(n, content)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // a producer was not found in the cache: it will run
			}
			out[n.Address] = &Keyed{Key: key}
			wk, keys = append(wk, n), append(keys, key)
		}
		if len(keys) == 0 {
			break // no later wave can be keyed either
		}
		found, err := lookup(keys)
		if err != nil {
			return nil, err
		}
		for _, n := range wk {
			k := out[n.Address]
			if e := found[k.Key]; e.Hit && !p.replaced[n.Address] {
				k.Result = e.Result // a replaced step runs: what it makes is not known yet
			}
		}
	}
	return out, nil
}

// pinnedTrees are the files of the capabilities the plan pins, by address.
func pinnedTrees(p *Plan) map[string]digest.Digest {
	out := map[string]digest.Digest{}
	for _, c := range p.Capabilities {
		if c.Status == StatusRegistry && c.Pinned != nil && c.Pinned.Tree != "" {
			out[c.Address] = c.Pinned.Tree
		}
	}
	return out
}

// waitsOn names what a step that could not be keyed before the apply waits for: the
// producers of what it mounts that will run, be built or be fetched first.
func waitsOn(n *graph.Node, keys map[string]*Keyed, pinned, fetched map[string]digest.Digest) []string {
	var out []string
	for _, m := range n.Step.Mounts {
		switch m.Kind {
		case lang.ArtifactStepOutput:
			if k := keys[m.Node]; k == nil || k.Result == nil {
				out = append(out, m.Node)
			}
		case lang.ArtifactCapability:
			if _, ok := pinned[m.Node]; !ok {
				out = append(out, m.Node)
			}
		case lang.ArtifactSource:
			if _, ok := fetched[m.Node]; !ok {
				out = append(out, m.Node)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// OutputContent is the content of a recorded output as it is mounted: a file with the mode
// it is materialized with, or a tree.
func OutputContent(o *cache.Output) graph.Content {
	if o.Kind == cache.Tree {
		return graph.TreeContent(o.Digest)
	}
	return graph.FileContent(o.Digest, uint32(o.MountMode()))
}

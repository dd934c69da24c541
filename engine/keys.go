package engine

import (
	"fmt"
	"slices"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/lang"
)

// Content keys, on BuildKit's model. A step has two digests:
//
//   - its definition digest (Node.Digest), its identity: what it runs, with each step output
//     it mounts named by the producer's definition digest and path, and each capability by
//     its contract digest. Plans, explain and provenance show it.
//   - its cache key, computed once what it mounts exists: the same definition with every
//     step output and capability it mounts replaced by the content digest of what is
//     mounted. The action cache is keyed by it.
//
// So a producer that runs again and yields the same bytes leaves its users cached (early
// cutoff), and a step that mounts a capability runs again when another version of it is
// admitted. A step that mounts neither has its definition as its key.

// contentOf gives the content mounted for a step output or capability artifact, as an
// inputRef by digest, or ok false when it is not known (yet).
type contentOf func(a *lang.Artifact) (ref inputRef, ok bool)

// dynamic reports whether a mount's content is known only once something is built.
func dynamic(a *lang.Artifact) bool {
	return a.Kind == lang.ArtifactStepOutput || a.Kind == lang.ArtifactCapability
}

// hasDynamicMounts reports whether a step mounts a step output or a capability.
func hasDynamicMounts(s *lang.Step) bool {
	for _, a := range s.Mounts {
		if dynamic(a) {
			return true
		}
	}
	return false
}

// cacheKey is n's cache key and the canonical definition it is the digest of, with the
// content of its step-output and capability mounts from content; ok is false when some
// of that content is not known.
func (g *Graph) cacheKey(n *Node, content contentOf) (key digest.Digest, def []byte, ok bool, err error) {
	if !hasDynamicMounts(n.Step) {
		return n.Digest, n.Definition, true, nil
	}
	d := g.stepDefinition(n)
	for i, in := range d.Inputs {
		a := n.Step.Mounts[in.Path]
		if !dynamic(a) {
			continue
		}
		if d.Inputs[i].Ref, ok = content(a); !ok {
			return "", nil, false, nil
		}
	}
	if def, err = d.canonical(); err != nil {
		return "", nil, false, fmt.Errorf("%s: cache key: %w", n.Address, err)
	}
	return digest.FromBytes(def), def, true, nil
}

// outputContent is the reference by content of a recorded output, as it is mounted (a file
// with the mode it is materialized with, or a tree).
func outputContent(o *cache.Output) inputRef {
	if o.Kind == cache.Tree {
		return treeContent(o.Digest)
	}
	return inputRef{Kind: "file", Digest: o.Digest, Mode: uint32(outputMode(o))}
}

// treeContent is the reference by content of a tree (a capability's files, a tree output).
func treeContent(d digest.Digest) inputRef {
	return inputRef{Kind: "tree", Digest: d, Dir: true}
}

// outputOf finds the output a refers to in its producer's record.
func outputOf(res *cache.Result, a *lang.Artifact) *cache.Output {
	for i := range res.Outputs {
		if res.Outputs[i].Path == a.Path {
			return &res.Outputs[i]
		}
	}
	return nil
}

// keyed is a step whose cache key the plan computed: every step output it mounts comes
// from a step found in the cache, and every capability it mounts is pinned to an admitted
// version. res is the record found under the key, nil for a miss.
type keyed struct {
	key digest.Digest
	def []byte
	res *cache.Result
}

// lookupFunc looks cache keys up (Cache.LookupMany).
type lookupFunc = func(keys []digest.Digest) (map[digest.Digest]cache.Entry, error)

// plannedKeys computes, before anything runs, the cache key of every step of the plan
// whose mounted content is already known, and looks the keys up: first the steps that
// mount no step output, then, a wave at a time, those whose producers were all found. A
// step left out runs unless what it mounts comes out unchanged (see waitsOn). Only steps
// the plan will run or take from the cache are keyed.
func (g *Graph) plannedKeys(p *Plan, lookup lookupFunc) (map[string]*keyed, error) {
	pinned := pinnedTrees(p)
	status := make(map[string]string, len(p.Nodes))
	for _, pn := range p.Nodes {
		status[pn.Address] = pn.Status
	}
	// A step's wave is one more than its latest producer's; a step whose content cannot
	// be known before the apply (a producer not keyed, a capability not pinned) has none.
	wave := map[string]int{}
	var waves [][]*Node
	for _, a := range g.Order {
		n := g.Nodes[a]
		if (n.Kind != KindStep && n.Kind != KindCheck) || (status[a] != StatusRun && status[a] != StatusCached) {
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
	out := map[string]*keyed{}
	content := func(a *lang.Artifact) (inputRef, bool) {
		if a.Kind == lang.ArtifactCapability {
			t, ok := pinned[a.Node]
			return treeContent(t), ok
		}
		k := out[a.Node]
		if k == nil || k.res == nil {
			return inputRef{}, false
		}
		o := outputOf(k.res, a)
		if o == nil {
			return inputRef{}, false
		}
		return outputContent(o), true
	}
	for _, nodes := range waves {
		var wk []*Node
		var keys []digest.Digest
		for _, n := range nodes {
			key, def, ok, err := g.cacheKey(n, content)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // a producer was not found in the cache: it will run
			}
			out[n.Address] = &keyed{key: key, def: def}
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
			if e := found[k.key]; e.Hit {
				k.res = e.Result
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
// producers of what it mounts that will run or be built first.
func waitsOn(n *Node, keys map[string]*keyed, pinned map[string]digest.Digest) []string {
	var out []string
	for _, m := range n.Step.Mounts {
		switch m.Kind {
		case lang.ArtifactStepOutput:
			if k := keys[m.Node]; k == nil || k.res == nil {
				out = append(out, m.Node)
			}
		case lang.ArtifactCapability:
			if _, ok := pinned[m.Node]; !ok {
				out = append(out, m.Node)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

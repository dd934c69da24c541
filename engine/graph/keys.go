package graph

import (
	"fmt"

	"github.com/foundry-build/foundry/digest"
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

// Content is what a step output or capability mounted in a step holds, by digest, as its
// cache key names it (FileContent, TreeContent).
type Content struct{ ref inputRef }

// FileContent is a file of digest d, mounted with mode.
func FileContent(d digest.Digest, mode uint32) Content {
	return Content{inputRef{Kind: "file", Digest: d, Mode: mode}}
}

// TreeContent is a tree of digest d (a capability's files, a tree output).
func TreeContent(d digest.Digest) Content {
	return Content{inputRef{Kind: "tree", Digest: d, Dir: true}}
}

// ContentOf gives the content mounted for a step output or capability artifact, or ok
// false when it is not known (yet).
type ContentOf func(a *lang.Artifact) (c Content, ok bool)

// dynamic reports whether a mount's content is known only once something is built or
// fetched.
func dynamic(a *lang.Artifact) bool {
	return a.Kind == lang.ArtifactStepOutput || a.Kind == lang.ArtifactCapability || a.Kind == lang.ArtifactSource
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

// CacheKey is n's cache key and the canonical definition it is the digest of, with the
// content of its step-output and capability mounts from content; ok is false when some
// of that content is not known.
func (g *Graph) CacheKey(n *Node, content ContentOf) (key digest.Digest, def []byte, ok bool, err error) {
	if !hasDynamicMounts(n.Step) {
		return n.Digest, n.Definition, true, nil
	}
	d := g.stepDefinition(n)
	for i, in := range d.Inputs {
		a := n.Step.Mounts[in.Path]
		if !dynamic(a) {
			continue
		}
		var c Content
		if c, ok = content(a); !ok {
			return "", nil, false, nil
		}
		d.Inputs[i].Ref = c.ref
	}
	if def, err = d.canonical(); err != nil {
		return "", nil, false, fmt.Errorf("%s: cache key: %w", n.Address, err)
	}
	return digest.FromBytes(def), def, true, nil
}

// ReconstructStep is st, the builder or the build of capability c's reconstruct block, as
// a step node of its own: it is not in the graph, and each round of c's reconstruction
// runs it with the mounts the engine adds besides st's own, extra: by target, the tree each
// holds (the round's job at lang.JobDir and each reference it may inspect at
// lang.ReferenceDir/NAME for the builder, its proposal at lang.ProposalDir for the build).
// Its Digest, which is also its cache key, is the digest of its Definition: st's kind
// (builder or build), DefinitionVersion, c's contract digest, st's fields (StepFields), the
// digest of image, the image it runs in, and by target what every mount holds: the extra
// ones, a project directory by its digest, inline text by its bytes' digest, a capability
// by the tree it settled with (trees; an error when ""). So the same job for the same
// builder, or the same proposal for the same build, is the same action, and a round an
// apply died in finds the run it finished in the action cache; a builder that may inspect
// a reference is another action than one that may not.
func ReconstructStep(c *Node, st *lang.Step, image string, extra map[string]digest.Digest, trees func(capability string) digest.Digest) (*Node, error) {
	addr := lang.BuilderAddress(c.Capability.Name)
	if st.Kind == "build" {
		addr = lang.BuildAddress(c.Capability.Name)
	}
	n := &Node{Address: addr, Kind: KindStep, Step: st, Range: st.DeclRange}
	mounts := map[string]string{}
	for target, d := range extra {
		mounts[target] = string(d)
	}
	for target, a := range st.Mounts {
		d := a.Digest
		switch a.Kind {
		case lang.ArtifactInline:
			d = digest.FromBytes(a.Inline)
		case lang.ArtifactCapability:
			if d = trees(a.Node); d == "" {
				return nil, fmt.Errorf("%s is not settled", a.Node)
			}
		}
		mounts[target] = string(d)
	}
	key, def, err := digest.Of(map[string]any{"kind": st.Kind, "v": DefinitionVersion, "contract": c.Digest,
		"step": StepFields(n), "image": image, "mounts": mounts})
	if err != nil {
		return nil, fmt.Errorf("%s: cache key: %w", addr, err)
	}
	n.Digest, n.Definition = key, def
	return n, nil
}

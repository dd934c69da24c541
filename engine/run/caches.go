package run

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/volume"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
)

// cacheLease is one cache volume a step mounts while it runs (spec/language.md §9b).
type cacheLease struct {
	target string        // where the step sees it
	name   string        // the cache's name
	lease  *volume.Lease // nil for a rebuild's empty directory
	empty  string        // a rebuild's empty directory (emptyCacheDirs)
}

// source is the host directory mounted.
func (c cacheLease) source() string {
	if c.lease == nil {
		return c.empty
	}
	return c.lease.Path
}

// cacheDomain is the trust domain of a step's caches: the project's own steps share one
// ("project"); the steps of each recipe and of each product have their own, so that what a
// recipe's build leaves in a cache reaches no other build. A reconstruction's builder mounts
// no cache (lang refuses it), and an evaluation mounts no step's anything.
func cacheDomain(n *graph.Node) string {
	if n.Step.Scope == "" {
		return "project"
	}
	return n.Step.Scope
}

// acquireCaches takes the cache volumes n mounts, in the order of their paths, so that two
// steps taking the same locked caches cannot each hold one the other waits for. A locked
// cache another step holds is waited for, and said so (cache_waiting).
func (r *runner) acquireCaches(ctx context.Context, n *graph.Node, img executors.Image) ([]cacheLease, error) {
	if n.Kind != graph.KindStep && n.Kind != graph.KindCheck {
		return nil, nil
	}
	var out []cacheLease
	for _, target := range slices.Sorted(maps.Keys(n.Step.Caches)) {
		c := n.Step.Caches[target]
		spec := volume.Spec{Project: r.g.Config.Project.Name, Domain: cacheDomain(n), Name: c.Name, Image: img.Digest, Platform: n.Step.Platform, MaxSize: c.MaxSize}
		waiting := func() {
			r.emit(event.Event{Type: "cache_waiting", Node: n.Address, Action: n.Digest, Message: fmt.Sprintf("cache %q (%s) is in use by another step; waiting", c.Name, c.Sharing)})
		}
		l, err := r.ws.Volumes.Acquire(ctx, spec, c.Sharing, waiting)
		if err != nil {
			releaseCaches(out)
			return nil, err
		}
		if l.Note != "" {
			r.emit(event.Event{Type: "cache_replaced", Node: n.Address, Action: n.Digest, Message: fmt.Sprintf("cache %q: %s", c.Name, l.Note)})
		}
		out = append(out, cacheLease{target: target, name: c.Name, lease: l})
	}
	return out, nil
}

// fullCache returns the first of the leases whose volume the step filled (it met ENOSPC
// there), or nil. A rebuild's empty directories have no bound and are never full. Read once
// the step has ended and before the leases are released.
func fullCache(ls []cacheLease) *cacheLease {
	for i := range ls {
		if ls[i].lease.Full() { // nil-safe
			return &ls[i]
		}
	}
	return nil
}

// reason says which cache the step filled, as fullReason says it of limits.disk.
func (c *cacheLease) fullReason() string {
	return fmt.Sprintf("filled cache %q at %s (max_size = %s; a cache volume is bounded while the step runs: raise its max_size, or empty it with 'foundry cache prune -name %s')",
		c.name, c.target, lang.FormatSize(c.lease.MaxSize), c.name)
}

// releaseCaches ends the leases: other steps may take the volumes.
func releaseCaches(ls []cacheLease) {
	for _, l := range ls {
		l.lease.Release() // nil-safe
	}
}

package fetch

import (
	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
)

// A fetched source is recorded in the action cache under its node's digest (the digest of
// its definition, graph.SourceDefinition), as a result whose outputs are what the fetch
// stored: the tree steps mount, and for an http source the pinned bytes themselves. So a
// plan finds a source stored by the same batched lookup it keys steps with, a record whose
// blobs went missing is a miss (the source is fetched again), and the store's garbage
// collection keeps what a record names.
const (
	TreeOutput    = "/tree"    // the tree the source makes (kind tree)
	ArchiveOutput = "/archive" // an http source's bytes, as pinned (kind file)
)

// Executor is what a source record names as its executor: Foundry's own process fetched
// it, not a sandbox (its isolation is "none", and no step's record is ever one of these).
const Executor = "fetch"

// TreeOf is the tree a source record holds, and false when res is not a whole record.
func TreeOf(res *cache.Result) (digest.Digest, bool) {
	if res == nil || res.Executor != Executor {
		return "", false
	}
	o := res.Output(TreeOutput)
	if o == nil || o.Kind != cache.Tree {
		return "", false
	}
	return o.Digest, true
}

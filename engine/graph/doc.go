// Package graph compiles a configuration (lang.Config) into Foundry's content-addressed
// graph: a node for every block, an edge for every reference, a deterministic order, and
// every node's canonical definition and digest. Compile runs, in order: add nodes, add
// edges, reject cycles, order, digest; Restore rebuilds a compiled graph from what
// Compiled returned, without compiling again (engine/graphcache). CacheKey is a step's key
// in the action cache: its definition with every step output and capability it mounts
// named by content. It also renders the graph (DOT, Mermaid).
//
// It guarantees invariant 4 of ARCHITECTURE.md: a node's digest is the SHA-256 of its
// definition's RFC 8785 canonical JSON, which holds every field that determines the node's
// result and each dependency by its own digest, and nothing else (not names, descriptions,
// positions, nor the order of blocks and files). Same configuration, same digests, whatever
// the processors: the parallel passes give what the sequential ones give. A graph that
// fails to compile has no order and no digests.
//
// It is the bottom of the engine: of Foundry it imports only lang and digest, and internal
// helpers (ARCHITECTURE.md's import rules, checked by internal/architecture).
package graph

// Package workspace is a project's local state, the StateDir (.foundry) of its directory:
// the content store, the state database, the action cache over both, the seed image builder,
// the inputs materialized for steps, and the attestations minted (spec/state.md).
//
// It guarantees that one apply at a time writes a workspace (Lock: a process-wide lock that
// nests within a process), so that an action cache hit found while the lock is held stays
// a hit until it is released (Held numbers the holds); that a materialized input is a
// complete, read-only copy, renamed into place, shared by every step that mounts it; and,
// with Attester.Sign, the one way the engine records an attestation (invariant 3 of
// ARCHITECTURE.md), that an envelope is in the content store and the attestation directory
// before it is used.
//
// It never imports engine/graph: it knows nothing of nodes (ARCHITECTURE.md's import rules,
// checked by internal/architecture).
package workspace

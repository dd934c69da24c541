// Package plan says, before anything runs, what each node of a compiled graph will do and
// why: its status (run, cached, build, registry, missing, alternative, reconstruct,
// needs-grant) and reason, how every
// capability resolves (an admitted version in the registry, else its recipes by cost and
// name, with the smallest missing sets and cycle witnesses), and the renderings for people
// (WriteText) and tools (WriteJSON, spec/plan-json.md). Make plans a graph against what
// Options say; ForWorkspace plans it against a workspace's action cache, seed images,
// quarantine, sealed suites and registry. A plan computes the cache keys of the steps whose
// mounted content is known before anything runs and looks them up (Plan.Keys lends what
// it found to an apply under the same hold of the lock); Explain says why a step runs or is
// cached. Save and Load keep a plan in a file, and StaleReasons says what changed since a
// saved plan was made.
//
// It guarantees that a plan's digest is the SHA-256 of the canonical JSON of its identity
// (every node's digest and every input read, never a status), so that a saved plan is
// stale exactly when the configuration changed, and that a stale plan is refused before
// anything is written (invariant 8 of ARCHITECTURE.md); and that a node whose digest, or an
// input's, is quarantined is missing, with everything built from it (invariant 5).
//
// It never imports engine/run or engine/reconstruct (ARCHITECTURE.md's import rules,
// checked by internal/architecture).
package plan

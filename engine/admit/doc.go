// Package admit publishes the capability candidates that passed evaluation and judges what
// a registry holds: Admit publishes a candidate with its evidence (provenance, signed test
// results, a verification summary that binds contract, manifest and tree) through the
// outbox of external effects; Pull fetches a pinned admitted version; Inspect and Lookup
// judge the version a registry holds under a contract's tag, for plans and the CLI.
//
// It holds invariants 1, 5, 6 and 9 of ARCHITECTURE.md for its part: a version is admitted
// (Lookup, Pull) only when a verification summary signed by a trusted key binds the
// contract, the manifest and the tree recomputed from the layers fetched, and never when it
// is quarantined; a tag, an annotation or a row of the state database alone is never
// enough, and what an attacker pushed is reported, never an error that blocks resolution;
// the contract tag is moved only after every attestation is attached; a publish is
// dispatched under a deterministic effect ID, so that a killed apply's publish is reconciled
// by looking in the registry by digest (found: settled, also by the pull of the version a
// next plan pinned; not found: published again, idempotently, reusing the attestations it
// had signed onto that manifest), never repeated blindly.
//
// An Admitter gets what it needs from the run (engine/run) as fields: the workspace, an
// Attester, the graph, the registry and trusted keys, the run's ID and scratch directory,
// and where to emit events and fault points. It never imports engine/plan, engine/evaluate
// or engine/run (ARCHITECTURE.md's import rules, checked by internal/architecture).
package admit

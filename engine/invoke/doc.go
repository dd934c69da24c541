// Package invoke calls admitted capabilities: the one implementation of "run this
// capability once on this input" that every tool surface uses (foundry serve over HTTP,
// foundry mcp over MCP). Inventory lists the project's capabilities that have an admitted
// version in its registry; an Invoker's Call runs one by its pinned digest in a fresh
// evaluation sandbox, through its declared interface, with the input and the output
// validated in full against the contract's schemas; Lower rewrites a schema into the
// portable subset strict function-calling hosts accept, or refuses.
//
// It holds invariants 1, 5, 7 and 9 of ARCHITECTURE.md for its part:
//
//   - only an admitted version runs: Inventory lists a capability only when admit.Lookup
//     finds a version whose verification summary, signed by a trusted key, binds its
//     contract, manifest and tree; Call pulls that exact manifest digest with the same
//     checks (admit.PullPinned) before the first call, and runs the files pulled, never
//     what a tag, an annotation or the caller's Capability value says;
//   - a quarantined digest (the manifest, the contract, the tree or a layer) is refused at
//     every call, also after the version was pulled;
//   - every call runs in a fresh sandbox with no network but its own loopback and the
//     evaluation limits (engine/evaluate's Sandbox), exactly as the evaluator ran the cases
//     that admitted it;
//   - nothing here admits, signs, or changes the project's state: a call is not evidence.
//
// JSON values cross it as bytes: an input is handed to the capability as written (only
// insignificant whitespace removed) and its output returned likewise; numbers are decoded
// only to be validated, as json.Number, never as float64, so 9223372036854775807 and 3.0
// arrive exactly as sent.
//
// The artifact a registry holds is the package tree, not the package's base image
// (spec/artifact.md §2), so an admitted capability runs on its tree alone
// (spec/interfaces.md §2): one whose entrypoint needs files of its base fails to start.
//
// It never imports engine/plan or engine/run (ARCHITECTURE.md's import rules, checked by
// internal/architecture).
package invoke

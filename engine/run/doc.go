// Package run carries out a plan: Apply walks the graph in dependency order, in parallel
// (walk.go), and settles each node the plan gives work to. It builds seed images, runs
// steps in the executor's sandbox or takes them from the action cache, assembles packages,
// and settles each capability: it pulls the pinned admitted version, or builds its recipes
// one candidate at a time, has engine/evaluate evaluate each and engine/admit admit the
// first that passes; a capability the plan marks reconstruct is settled by
// engine/reconstruct, whose rounds run their builder and build here as steps are run
// (reconstruct.go implements reconstruct.Apply). It delivers each product with a deliver
// block once its steps and checks passed, with engine/deliver. It records everything in
// the workspace, emits progress events (engine/event), recovers from a killed apply, and
// stops at named fault points for tests.
//
// A node settles with an outcome (executed, cached, built, settled) or an error; a node
// that needs a failed one is skipped, with the failure that blocked it, and so are its
// users. A write to the state database that fails stops the apply with that error.
//
// It holds invariants 2, 3, 4, 5, 6, 7 and 10 of ARCHITECTURE.md for its part: a step mounts
// no file with a sealed case's content; a step's provenance is minted from what the
// executor observed, and stored before the cache entry that names it; a step whose action
// digest has a usable cache entry does not run again; a quarantined pin or candidate is
// refused and the next recipe tried; a killed apply leaves its nodes, attempts and
// dispatched effects for the next apply to recover, and what a dead run left in the
// runtime is removed before anything new runs; a step's sandbox has no network; a product
// the plan did not find granted is not delivered.
//
// Run is the top of the engine (ARCHITECTURE.md's import rules, checked by
// internal/architecture). The runner of an apply holds the walk and the nodes' results;
// evaluation, admission, reconstruction and delivery are the Evaluator, the Admitter, the
// Reconstructor and the Deliverer it builds, each given the few things it needs.
package run

// Package evaluate judges a capability's candidates: the suites as the evidence says they
// stand (dev; repair, with every sealed case a signed result disclosed; sealed, the cases
// never disclosed), each case run in a fresh sandbox of its own (cli on stdin, service over
// its loopback) and judged by engine/verdict, and a signed test result per suite. It also
// lists the project's sealed verdicts and withdraws one (Verdicts, WithdrawVerdict).
//
// It accepts products too (Accept): a product's service run as a service candidate is, with
// a persistent data volume kept across the restarts its cases ask for, judged by the accept
// block's contract, and signed as a test result of suite acceptance.
//
// It holds invariants 1, 3 and 9 of ARCHITECTURE.md for its part: the only test results
// it signs are of what its own sandboxes observed (no network but the loopback, the
// evaluation limits); the sealed suite runs once per candidate, contract and suite digest,
// and a recorded sealed verdict is reused only from a signed result that verifies, never
// from a row of the state database; a sealed case shown as a counterexample is recorded as
// disclosed in the signed result, and moves to repair for every later candidate.
//
// An Evaluator gets what it needs from the run that drives it (engine/run, and the rounds
// of engine/reconstruct) as fields: the workspace, an Attester, the trusted keys, the
// project, a way to get the executor, the run's scratch directory and container prefix, and
// where to emit events. It never imports engine/plan, engine/admit or engine/run
// (ARCHITECTURE.md's import rules, checked by internal/architecture).
package evaluate

// Package reconstruct runs reconstruction jobs (spec/capability.md §5a): a capability with
// no admitted version and no feasible recipe is settled by its reconstruct block, a round at
// a time, within a budget kept over every apply that works on the job.
//
// A Reconstructor settles one capability's job (Settle). Each round is a round value whose
// phases are its methods: begin (the brief at /job, and the proposal's reservation),
// propose (a ProposalSource makes a proposal: the command builder run in the sandbox, or a
// proposal sent from outside with SubmitProposal; with a build block the build then runs
// over it), pack (the candidate on the package's base, and the proposal's charge),
// evaluate and admit. Each part of a round is reserved in the state database before it is
// dispatched and charged when it ends (round.charge, round.fail), so an apply killed at any
// point resumes the job where it stood.
//
// It holds invariants 1, 2, 6 and 9 of ARCHITECTURE.md for its part: a round's candidate is
// evaluated and admitted only through the apply's evaluator and admission, as a recipe's
// is, and a candidate that met the sealed suite in a round an apply died in is settled from
// the signed results, never evaluated again; the brief a builder reads and the proposal a
// build reads hold no file with a sealed case's content (Apply.RefuseSealed), and disclosed
// sealed cases reach a builder only as the counterexample that disclosed them; a round
// resumed after a kill is charged once for each part; an earlier round's run joins an
// admission only when its signed provenance names the job and round, never because a row
// of the state database says so.
//
// It gets what it needs from the apply that drives it (engine/run) as fields, as
// engine/evaluate and engine/admit do, and runs steps, refuses and admits candidates
// through the Apply interface, which engine/run implements. It never imports engine/run
// (ARCHITECTURE.md's import rules, checked by internal/architecture).
package reconstruct

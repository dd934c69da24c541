// Package verdict judges one case of a capability's suite: given the contract, a parsed case
// file and what a candidate did on that case (its stdout, stderr, exit status), it says pass
// or fail, why, and what was expected and got, in a form short enough to show a builder as a
// counterexample.
//
// The evaluator runs each candidate in a fresh sandbox per case, feeds it Case.Stdin, and
// hands the observation to Judge. spec/capability-cases.md is the normative description of
// the case-file format and of every judgment rule; the code must match it.
//
// The package is pure, and must stay so:
//
//   - it never runs anything, opens files, or touches the network: it sees only the bytes it
//     is handed (ParseCase takes the case file's bytes, Judge takes the observation);
//   - it never sees who or what produced the candidate (builder, recipe, model): a verdict is
//     a function of the contract, the case and the observation alone, so that the same
//     behaviour always gets the same verdict;
//   - it never approximates a value to make two different outputs look the same: integers
//     compare exactly however large, and anything it cannot judge fails (fail closed).
//
// Verdicts are evidence, not authority: admitting a capability and minting attestations from
// verdicts is the evaluator's job, not this package's.
package verdict

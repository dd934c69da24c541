// Package provenance mints, signs and verifies Foundry's attestations: in-toto Statements v1
// with SLSA Provenance v1, in-toto Test Result v0.1 and SLSA Verification Summary v1
// predicates, in DSSE envelopes signed with sigstore's signers.
// spec/provenance.md is the normative description of every field; keep the two in step.
//
// Minting. The engine fills an Execution with what an executor observed while running one
// step — output digests, the inputs and image it mounted, the limits and network it enforced,
// its timestamps and logs — and calls NewProvenance, then Sign. The envelope bytes Sign
// returns are the attestation: store them as they are and address them by
// EnvelopeDigest(bytes). Never re-serialize a statement to recompute an identity (protojson's
// output is deliberately unstable, and ECDSA signatures are randomized).
//
// The evaluator fills an Evaluation (which suite, which candidate digest, each case's
// observed pass or fail) and calls NewTestResult: one in-toto test-result statement per suite
// run, PASSED only if every case passed, derived here. Admission fills an Admission with the
// exact envelopes it relied on and calls NewVerificationSummary: a SLSA VSA, always PASSED,
// listing those envelopes by digest. It verifies them itself and refuses unless a sealed
// test result PASSED for exactly that subject is among them, so that "nothing is admitted
// without a sealed pass" (ARCHITECTURE.md, invariant 1) holds here too, whoever calls it.
//
// Invariant (ARCHITECTURE.md, 3: "Attestations are minted only from observed execution"): this
// package has no API that takes a caller's claim and signs it. Statement has no exported
// fields or constructors besides NewProvenance, NewTestResult and NewVerificationSummary;
// Execution and Evaluation have no "success", "verdict" or free-form predicate field, only
// observations, and there is no way to mint a FAILED summary or a PASSED one without the
// evidence. A cached result reuses the original envelope; nothing here re-signs an old
// statement with new claims. Adding a Sign variant that takes arbitrary JSON or a raw in-toto
// Statement would break the invariant; don't.
//
// Verifying. Verify checks envelopes against public keys and a Policy and returns a Report of
// every check with a pass/fail and a reason. It follows the order DSSE and in-toto require:
// parse the envelope strictly, refuse a non-in-toto payloadType, verify the signature, then
// parse only the verified payload bytes; a subject must match the artifact's digest; a
// required predicate type counts only verified statements; builder ids are allowlisted;
// dependencies that are Foundry outputs are verified in turn through an AttestationSource.
// A verification summary is followed along its chain: each input attestation it lists is
// found by its envelope digest (EnvelopeSource) and verified, a sealed PASSED test result
// for the same subject must be among them, and so must verified provenance for the
// candidate's build (or the candidate's own).
//
// This package must never read keys from recipe files, and never accept an unverified
// statement as evidence of anything.
package provenance

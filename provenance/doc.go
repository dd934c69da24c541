// Package provenance mints, signs and verifies Foundry's attestations: in-toto Statements v1
// with SLSA Provenance v1 predicates, in DSSE envelopes signed with sigstore's signers.
// spec/provenance.md is the normative description of every field; keep the two in step.
//
// Minting. The engine fills an Execution with what an executor observed while running one
// step — output digests, the inputs and image it mounted, the limits and network it enforced,
// its timestamps and logs — and calls NewProvenance, then Sign. The envelope bytes Sign
// returns are the attestation: store them as they are and address them by
// EnvelopeDigest(bytes). Never re-serialize a statement to recompute an identity (protojson's
// output is deliberately unstable, and ECDSA signatures are randomized).
//
// Invariant (DESIGN.md, "Attestations are minted only from observed execution"): this
// package has no API that takes a caller's claim and signs it. Statement has no exported
// fields or constructors besides NewProvenance; Execution has no "success", "verdict" or
// free-form predicate field, only observations. A cached result reuses the original envelope;
// nothing here re-signs an old statement with new claims. Adding a Sign variant that takes
// arbitrary JSON or a raw in-toto Statement would break the invariant; don't.
//
// Verifying. Verify checks envelopes against public keys and a Policy and returns a Report of
// every check with a pass/fail and a reason. It follows the order DSSE and in-toto require:
// parse the envelope strictly, refuse a non-in-toto payloadType, verify the signature, then
// parse only the verified payload bytes; a subject must match the artifact's digest; a
// required predicate type counts only verified statements; builder ids are allowlisted;
// dependencies that are Foundry outputs are verified in turn through an AttestationSource.
//
// This package must never read keys from recipe files, and never accept an unverified
// statement as evidence of anything.
package provenance

// Package registry holds Foundry's OCI side: where admitted capabilities live, how they are
// laid out as OCI artifacts, how their attestations are attached, and how they are fetched
// back safely. spec/artifact.md is the normative description; keep the two in step.
//
// The core is one small interface, Store: resolve a tag, get and put manifests and blobs by
// digest, tag, list and push referrers. Two implementations: an OCI image layout on disk
// (address "oci-layout:PATH", the embedded default, no server) and a remote distribution
// registry (address "host[:port]/repo"). Open picks one from an address. Everything else is a
// verb on top of Store:
//
//   - Publish turns a tree from the content store (package store) and a capability contract
//     into an OCI image manifest with Foundry's artifactType.
//   - Attach adds a DSSE envelope, kept as its exact signed bytes, as a referrer of a
//     capability manifest (the OCI 1.1 referrers API where the registry has it, the
//     referrers tag schema where it does not), plus cosign's "sha256-<hex>.att" image so
//     that cosign verify-attestation finds the same envelopes. Referrers lists them back.
//   - Pull resolves a tag to a digest once, fetches by digest, verifies attestations and the
//     subject binding before it writes anything, then extracts entry by entry, each checked
//     first, through an os.Root into a temporary sibling of the destination that is renamed
//     into place only when the files hash to the declared tree.
//   - Handler serves a layout store over the distribution API (foundry registry serve):
//     go-containerregistry's registry with the referrers API, made persistent.
//   - RemoteSource lets provenance.Verify find attestations in a Store.
//
// Everything that comes back from a Store is untrusted: manifests are checked against the
// digest they were asked for, blobs against their descriptors (digest and size), and
// referrer lists are only hints (each referrer's subject is read from its own manifest).
//
// This package must never mint or sign attestations (package provenance does, from
// observations only), never trust a tag after it has been resolved once, and never write a
// pulled file outside the destination or before verification has passed.
package registry

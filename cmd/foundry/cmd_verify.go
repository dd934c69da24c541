package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/deliver"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

func init() {
	register(&command{
		name:    "verify",
		summary: "Check signed provenance and admission for built files and directories",
		usage:   "foundry verify -key PUB [-key PUB]... [-attestations DIR] [-attestation FILE]... [-type T]... [-builder ID]... [-evaluator ID]... [-verifier ID]... [-policy FILE] [-json] ARTIFACT...",
		help: `
Verify checks that each ARTIFACT was built by Foundry as its signed provenance says, using
only public keys. An ARTIFACT is a file (its digest is the SHA-256 of its bytes), a
directory (the digest of its canonical tree manifest, as Foundry names directory outputs),
or a digest written as sha256:<hex>.

For every candidate attestation (DSSE envelopes from -attestation files, and those in
-attestations DIR whose statements name the artifact's digest) it checks, in this order:
  envelope      strict DSSE JSON, at most 8 MiB; garbage, empty and truncated input refused
  payload-type  application/vnd.in-toto+json, nothing else
  signature     a signature verifies with one of the -key public keys (keyid is ignored)
  statement     the signed payload — and only it — is an in-toto Statement v1
  subject       a subject's sha256 digest equals the artifact's
  build-type    https://foundry.dev/buildtypes/step/v1 (for SLSA provenance)
  builder       builder.id is allowed (-builder, the policy, or by default Foundry's
                sandboxed executors: containerd and runc with isolation=container)
  signer        with a policy's "signers": a key that verified it may vouch for that builder
  dependencies  inputs that Foundry itself produced have verified provenance too,
                looked up by digest in -attestations DIR
Test results (https://in-toto.io/attestation/test-result/v0.1) are checked for a
well-formed Foundry configuration and an allowed evaluator (-evaluator, the policy, or by
default Foundry's evaluator on containerd and runc).

An admission summary (-type https://slsa.dev/verification_summary/v1) is checked along the
whole chain, each link reported as PASS or FAIL:
  verifier           verifier.id allowed (-verifier, the policy, or Foundry's admission)
  result, levels     verificationResult PASSED; FOUNDRY_SEALED_EVALUATION_PASSED claimed,
                     no level starting with SLSA_
  inputs             every input attestation it lists is found by its envelope digest (in
                     -attestations DIR or the -attestation files) and verifies: signature,
                     payloadType, statement, and its own type's checks
  sealed-evaluation  among them a sealed-suite test result, PASSED, for this same artifact,
                     under the summary's contract
  provenance         a verified provenance for the candidate's build: one the summary lists,
                     or else the artifact's own; its Foundry-produced inputs in turn
A changed, missing or substituted envelope has another digest and breaks the chain.

A release directory that a product's delivery wrote (DEST/<hex>, holding release.json,
files/, evidence/ and receipt.intoto.json) is verified by its delivery receipt
(https://foundry.dev/delivery-receipt/v1, the default type for it; no -attestations needed):
  release     the receipt is for the files' tree, recomputed, and for the release whose
              manifest is release.json, by the digest of its bytes
  acceptance  every acceptance envelope it lists (the checks' provenance, in evidence/) is
              found by its envelope digest and verifies
A changed byte in a delivered file, in release.json or in the receipt refuses it. A release
in an OCI destination (oci-layout:PATH@sha256:..., HOST[:PORT]/REPO@sha256:... or
REPO:release-<hex>, the oci: prefix of its destination allowed) is verified the same way:
the tree its layer forms, recomputed, and the release manifest its config's bytes are, by
its attached receipt and evidence; a tag moved to another release manifest, or a receipt
replaced among its referrers, refuses it.

The artifact is verified when, for each required predicate type (-type, the policy, or by
default https://slsa.dev/provenance/v1), at least one candidate passed every check. A
refused candidate never counts, and never spoils a good one.

A policy file is JSON: {"builders": [...], "predicateTypes": [...], "evaluators": [...],
"verifiers": [...], "signers": [{"keyId": "sha256:...", "builders": [...]}],
"skipDependencies": false, "maxDepth": 32}. Unknown keys are errors. "signers" pairs each key
(by the id keygen prints) with the builder, evaluator and verifier ids it may vouch for;
without it any trusted key vouches for any allowed id. -builder, -evaluator, -verifier and
-type add to what the policy lists. See spec/provenance.md for every check and refusal code.

Examples:
  foundry verify -key foundry.pub -attestations .foundry/attestations out/int-sort
  foundry verify -key foundry.pub -attestation int-sort.intoto.json out/int-sort
  foundry verify -key ci.pub -key release.pub -policy audit.json -json out/ sha256:4f2a...
  foundry verify -key foundry.pub -builder https://foundry.dev/builder/local@v1?isolation=none \
      -attestations .foundry/attestations build/tool
  foundry verify -key foundry.pub -attestations .foundry/attestations \
      -type https://slsa.dev/verification_summary/v1 sha256:4f2a...
  foundry verify -key .foundry/keys/signing.pub /srv/releases/app/3c1f...   # a release
  foundry verify -key .foundry/keys/signing.pub registry.example/releases/app@sha256:9be0...

The same envelope verifies with cosign:
  cosign verify-blob-attestation --key foundry.pub --signature int-sort.intoto.json \
      --type https://slsa.dev/provenance/v1 --insecure-ignore-tlog out/int-sort

Exit codes: 0 every artifact verified, 1 something did not verify (the report says which
check failed and why) or a key, policy or artifact could not be read, 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			var keys, types, builders, evaluators, verifierIDs, envelopes stringList
			fs.Var(&keys, "key", "trusted public key `PEM` file (repeatable; default, in a project directory, its own .foundry/keys/signing.pub)")
			fs.Var(&types, "type", "required predicate `TYPE`, e.g. https://slsa.dev/provenance/v1 (repeatable)")
			fs.Var(&builders, "builder", "allowed builder `ID` (repeatable)")
			fs.Var(&evaluators, "evaluator", "allowed test-result evaluator `ID` (repeatable)")
			fs.Var(&verifierIDs, "verifier", "allowed verification-summary verifier `ID` (repeatable)")
			fs.Var(&envelopes, "attestation", "a DSSE envelope `FILE` to check against the artifacts its statement names (repeatable)")
			dir := fs.String("attestations", "", "`DIR` of DSSE envelopes, searched by subject digest")
			policyPath := fs.String("policy", "", "JSON policy `FILE`")
			jsonOut := fs.Bool("json", false, "print the report as JSON")
			return func(env *cliEnv, args []string) int {
				return verifyArtifacts(env, verifyOptions{Keys: keys, Types: types, Builders: builders, Evaluators: evaluators,
					Verifiers: verifierIDs, Envelopes: envelopes, Dir: *dir, Policy: *policyPath, JSON: *jsonOut}, args)
			}
		},
	})
}

// verifySubject names what argument a of `foundry verify` asks to verify. A registry
// reference brings its attached attestations into opts, and its subject is the tree its
// layers form (fetched and recomputed here, never the manifest's annotation), bound to the
// manifest and its contract: a verification summary counts only if it names all three.
// With vsaDefault (no -type, no policy), a reference also requires a verification summary.
// Skipped referrers are noted on notes, when it is not nil.
func verifySubject(ctx context.Context, a string, opts *provenance.Options, vsaDefault bool, notes io.Writer) (provenance.Subject, error) {
	if isRelease(a) {
		return releaseSubject(a, opts, vsaDefault)
	}
	if !isOCIRef(a) {
		d, err := artifactDigest(a)
		if err != nil {
			return provenance.Subject{}, err
		}
		return provenance.Subject{Name: a, Digest: d}, nil
	}
	subj, atts, skipped, release, err := ociAttestations(ctx, a)
	if err != nil {
		return provenance.Subject{}, err
	}
	if notes != nil {
		for _, sk := range skipped {
			fmt.Fprintf(notes, "note: skipped referrer %s of %s: %s\n", sk.Digest, a, sk.Reason)
		}
	}
	opts.Attestations = append(opts.Attestations, atts...)
	switch {
	case vsaDefault && release:
		opts.Policy.PredicateTypes = appendNew(opts.Policy.PredicateTypes, provenance.PredicateDeliveryReceipt)
	case vsaDefault:
		opts.Policy.PredicateTypes = appendNew(opts.Policy.PredicateTypes, provenance.PredicateVSA)
	}
	return subj, nil
}

// isRelease reports whether a is the directory of a delivered release (spec/grants.md):
// it holds a release manifest and its files.
func isRelease(a string) bool {
	fi, err := os.Stat(filepath.Join(a, deliver.ManifestFile))
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	fi, err = os.Stat(filepath.Join(a, deliver.FilesDir))
	return err == nil && fi.IsDir()
}

// releaseSubject is what verifying the release in directory a means: its files, by the tree
// digest recomputed here, delivered as the release its manifest's bytes hash to; the
// receipt beside them and the acceptance envelopes it brings are added to opts, and with
// vsaDefault a delivery receipt is required. A changed byte in the files, the manifest or
// the receipt then breaks the signed binding.
func releaseSubject(a string, opts *provenance.Options, vsaDefault bool) (provenance.Subject, error) {
	b, err := os.ReadFile(filepath.Join(a, deliver.ManifestFile))
	if err != nil {
		return provenance.Subject{}, fmt.Errorf("release %s: %w", a, err)
	}
	_, tree, err := digest.Dir(filepath.Join(a, deliver.FilesDir))
	if err != nil {
		return provenance.Subject{}, fmt.Errorf("release %s: %w", a, err)
	}
	add := func(p string) error {
		env, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("release %s: %w", a, err)
		}
		opts.Attestations = append(opts.Attestations, provenance.Attestation{Source: p, Envelope: env})
		return nil
	}
	if err := add(filepath.Join(a, deliver.ReceiptFile)); err != nil {
		return provenance.Subject{}, err
	}
	evidence, _ := filepath.Glob(filepath.Join(a, deliver.EvidenceDir, "*.intoto.json"))
	for _, p := range evidence {
		if err := add(p); err != nil {
			return provenance.Subject{}, err
		}
	}
	if vsaDefault {
		opts.Policy.PredicateTypes = appendNew(opts.Policy.PredicateTypes, provenance.PredicateDeliveryReceipt)
	}
	return provenance.Subject{Name: a, Digest: string(tree), Manifest: string(digest.FromBytes(b))}, nil
}

// verifyReleaseDir verifies the release in directory dir with keys exactly as `foundry verify
// -key PUB... DIR` does (releaseSubject, then verifySubjects): its receipt binds the files'
// recomputed tree and release.json, and every acceptance envelope it names verifies.
// foundry release rollback uses it before it re-points a channel.
func verifyReleaseDir(ctx context.Context, dir string, keys []*provenance.Verifier) (*provenance.Report, error) {
	opts := provenance.Options{Keys: keys}
	subj, err := releaseSubject(dir, &opts, true)
	if err != nil {
		return nil, err
	}
	return verifySubjects(ctx, opts, []provenance.Subject{subj})
}

// verifySubjects verifies subjects under opts: when no directory of attestations was given,
// the envelopes in opts are the ones searched.
func verifySubjects(ctx context.Context, opts provenance.Options, subjects []provenance.Subject) (*provenance.Report, error) {
	if opts.Source == nil && len(opts.Attestations) > 0 {
		opts.Source = attestationList(opts.Attestations)
	}
	return provenance.Verify(ctx, opts, subjects...)
}

// artifactDigest names an artifact the way the engine names outputs: a file by the SHA-256
// of its bytes, a directory by its canonical tree-manifest digest (digest.Dir), and a
// literal sha256:<hex> as itself. A symbolic link given on the command line is followed;
// links inside a directory are part of its manifest, as digest.Dir records them.
func artifactDigest(arg string) (string, error) {
	if strings.HasPrefix(arg, "sha256:") {
		if _, err := os.Lstat(arg); err != nil {
			d, err := digest.Parse(arg)
			if err != nil {
				return "", fmt.Errorf("artifact %s: %w", arg, err)
			}
			return string(d), nil
		}
	}
	p, err := filepath.EvalSymlinks(arg)
	if err != nil {
		return "", fmt.Errorf("artifact: %w", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("artifact: %w", err)
	}
	switch {
	case fi.IsDir():
		_, d, err := digest.Dir(p)
		if err != nil {
			return "", fmt.Errorf("artifact %s: %w", arg, err)
		}
		return string(d), nil
	case fi.Mode().IsRegular():
		d, _, err := digest.File(p)
		if err != nil {
			return "", fmt.Errorf("artifact %s: %w", arg, err)
		}
		return string(d), nil
	default:
		return "", fmt.Errorf("artifact %s: not a file or directory (%s)", arg, fi.Mode().Type())
	}
}

// appendNew appends the values of add that list does not already hold.
func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, l := range list {
			if l == a {
				found = true
				break
			}
		}
		if !found {
			list = append(list, a)
		}
	}
	return list
}

// isOCIRef reports whether an argument names a registry artifact (REPO@sha256:HEX,
// REPO:TAG or oci-layout:PATH@…) rather than a file, directory or bare digest.
func isOCIRef(a string) bool {
	if _, err := os.Lstat(a); err == nil {
		return false
	}
	if strings.HasPrefix(a, "sha256:") {
		return false
	}
	_, _, err := registry.SplitReference(a)
	return err == nil
}

// ociAttestations resolves a reference (a tag exactly once), fetches its layers to
// recompute the tree they form, and returns the subject to verify with every attestation
// attached to the manifest, unverified, and the referrers that could not be read. For a
// capability the subject is that tree bound to the manifest digest and its contract. For a
// release that a delivery published (release reports it; spec/grants.md) it is that tree
// bound to the release its config's exact bytes hash to, as releaseSubject binds a dir:
// release to its release.json, so its delivery receipt must name both. A ref may carry the
// destination's own oci: prefix ("oci:HOST/REPO@sha256:…").
func ociAttestations(ctx context.Context, ref string) (subj provenance.Subject, _ []provenance.Attestation, _ []registry.Skipped, release bool, _ error) {
	s, m, err := registry.OpenReference(ctx, strings.TrimPrefix(ref, lang.SchemeOCI+":"))
	if err != nil {
		return subj, nil, nil, false, err
	}
	// The manifest is read here only to choose how to pull it; Pull fetches it again by
	// digest, checks it and refuses one that is not of the kind asked for.
	if raw, _, err := s.Manifest(ctx, m); err == nil {
		if pm, err := registry.ParseManifest(raw); err == nil {
			release = pm.ArtifactType == registry.ArtifactTypeRelease
		}
	}
	tmp, err := os.MkdirTemp("", "foundry-verify-")
	if err != nil {
		return subj, nil, nil, false, err
	}
	defer os.RemoveAll(tmp)
	// Verification is done by the caller, with its keys and policy: here the layers are only
	// fetched, checked and hashed.
	pulled, err := registry.Pull(ctx, s, string(m), filepath.Join(tmp, "files"), registry.PullOptions{NoVerify: true, Release: release})
	if err != nil {
		return subj, nil, nil, false, err
	}
	atts, skipped, err := registry.Referrers(ctx, s, m)
	if err != nil {
		return subj, nil, nil, false, err
	}
	var out []provenance.Attestation
	for _, a := range atts {
		out = append(out, provenance.Attestation{Source: s.String() + "@" + string(a.Digest), Envelope: a.Envelope})
	}
	subj = provenance.Subject{Name: ref, Digest: string(pulled.Tree), Contract: string(pulled.Contract), Manifest: string(m)}
	if release {
		subj = provenance.Subject{Name: ref, Digest: string(pulled.Tree), Manifest: string(pulled.Contract)}
	}
	return subj, out, skipped, release, nil
}

// attestationList is an AttestationSource over fixed envelopes: every lookup returns them
// all, and verification keeps the ones that apply.
type attestationList []provenance.Attestation

func (a attestationList) Lookup(context.Context, string) ([]provenance.Attestation, error) {
	return a, nil
}

// verifyOptions are what `foundry verify` reads from its flags.
type verifyOptions struct {
	Keys       []string // trusted public key files (-key)
	Types      []string // required predicate types (-type)
	Builders   []string // allowed builder IDs (-builder)
	Evaluators []string // allowed test-result evaluator IDs (-evaluator)
	Verifiers  []string // allowed verification-summary verifier IDs (-verifier)
	Envelopes  []string // DSSE envelope files (-attestation)
	Dir        string   // a directory of envelopes (-attestations)
	Policy     string   // a JSON policy file (-policy)
	JSON       bool     // print the report as JSON
}

// verifyArtifacts is the core of `foundry verify`: each artifact (a file, a tree, an OCI
// reference or a release) against its attestations, under the keys and policy of opt.
func verifyArtifacts(env *cliEnv, opt verifyOptions, artifacts []string) int {
	usage := func(format string, a ...any) int { return usageError(env, "verify", format, a...) }
	failed := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "foundry verify: "+format+"\n", a...)
		return exitError
	}
	if len(opt.Keys) == 0 {
		own, ok := projectKey(env, "verify", ".")
		if !ok {
			return usage("no -key: verification needs at least one trusted public key (inside a project, its own .foundry/keys/signing.pub is the default)")
		}
		opt.Keys = append(opt.Keys, own)
	}
	if len(artifacts) == 0 {
		return usage("no ARTIFACT to verify")
	}
	ociRefs := 0 // and releases: they bring their own attestations
	for _, a := range artifacts {
		if isOCIRef(a) || isRelease(a) {
			ociRefs++
		}
	}
	if opt.Dir == "" && len(opt.Envelopes) == 0 && ociRefs < len(artifacts) {
		return usage("no attestations: give -attestations DIR or -attestation FILE (OCI references bring their attached ones)")
	}
	verifiers, err := provenance.LoadVerifiers(opt.Keys...)
	if err != nil {
		return failed("%v", err)
	}
	var pol provenance.Policy
	if opt.Policy != "" {
		p, err := provenance.LoadPolicy(opt.Policy)
		if err != nil {
			return failed("%v", err)
		}
		pol = *p
	}
	pol.Builders = appendNew(pol.Builders, opt.Builders...)
	pol.PredicateTypes = appendNew(pol.PredicateTypes, opt.Types...)
	pol.Evaluators = appendNew(pol.Evaluators, opt.Evaluators...)
	pol.Verifiers = appendNew(pol.Verifiers, opt.Verifiers...)
	for _, b := range opt.Builders {
		if b == "" {
			return usage("empty -builder")
		}
	}
	for _, id := range append(append([]string{}, opt.Evaluators...), opt.Verifiers...) {
		if id == "" {
			return usage("empty -evaluator or -verifier")
		}
	}
	for _, t := range opt.Types {
		if t == "" {
			return usage("empty -type")
		}
	}

	opts := provenance.Options{Keys: verifiers, Policy: pol}
	for _, p := range opt.Envelopes {
		b, err := os.ReadFile(p)
		if err != nil {
			return failed("attestation: %v", err)
		}
		opts.Attestations = append(opts.Attestations, provenance.Attestation{Source: p, Envelope: b})
	}
	if opt.Dir != "" {
		src, err := provenance.NewDirSource(opt.Dir)
		if err != nil {
			return failed("%v", err)
		}
		if !opt.JSON {
			for i, s := range src.Skipped {
				if i == 5 {
					fmt.Fprintf(env.stderr, "note: and %d more\n", len(src.Skipped)-i)
					break
				}
				fmt.Fprintf(env.stderr, "note: skipped %s: %s\n", s.Path, s.Reason)
			}
		}
		opts.Source = src
	}

	var notes io.Writer
	if !opt.JSON {
		notes = env.stderr
	}
	subjects := make([]provenance.Subject, 0, len(artifacts))
	for _, a := range artifacts {
		subj, err := verifySubject(context.Background(), a, &opts, len(opt.Types) == 0 && opt.Policy == "", notes)
		if err != nil {
			return failed("%v", err)
		}
		subjects = append(subjects, subj)
	}
	rep, err := verifySubjects(context.Background(), opts, subjects)
	if err != nil {
		return failed("%v", err)
	}
	if opt.JSON {
		err = rep.WriteJSON(env.stdout)
	} else {
		err = rep.WriteText(env.stdout)
	}
	if err != nil {
		return failed("%v", err)
	}
	if !rep.OK {
		return exitError
	}
	return exitOK
}

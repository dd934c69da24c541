package provenance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// Refusal codes in Check.Code. Each names one reason an attestation or artifact was
// refused; the envelope-* codes come from package dsse.
const (
	CodeNoAttestation   = "no-attestation"        // no candidate envelope for the artifact
	CodeSourceError     = "source-error"          // the AttestationSource failed
	CodePayloadType     = "payload-type"          // payloadType is not in-toto's
	CodeSignature       = "signature-invalid"     // no signature verifies with any trusted key
	CodeStatement       = "statement-invalid"     // verified payload is not an in-toto Statement v1
	CodeSubject         = "subject-mismatch"      // no subject has the artifact's digest
	CodePredicate       = "predicate-invalid"     // SLSA predicate does not parse or validate
	CodeBuildType       = "build-type"            // buildType is not Foundry's
	CodeBuilder         = "builder-not-allowed"   // builder.id not in the allowlist
	CodeSignerBuilder   = "signer-not-allowed"    // no verifying key may vouch for this builder
	CodeDependency      = "dependency-unverified" // a Foundry-produced input did not verify
	CodeDependencyCycle = "dependency-cycle"      // a dependency is its own ancestor
	CodeDependencyDepth = "dependency-depth"      // dependencies nest deeper than MaxDepth
	CodeTypeMissing     = "type-missing"          // no verified statement of a required type

	// Test results and verification summaries (the admission chain).
	CodeEvaluator    = "evaluator-not-allowed" // a test result's evaluator is not in the allowlist
	CodeVerifier     = "verifier-not-allowed"  // a summary's verifier.id is not in the allowlist
	CodeResult       = "result-not-passed"     // a summary's verificationResult is not PASSED
	CodeLevels       = "levels-invalid"        // a summary lacks Foundry's sealed level or claims SLSA_ ones
	CodeInputMissing = "input-missing"         // an input attestation a summary lists is not found by its digest
	CodeInputRefused = "input-unverified"      // an input attestation a summary lists does not verify
	CodeNoSealedPass = "no-sealed-pass"        // no sealed PASSED test result for the subject among the inputs
	CodeNoProvenance = "no-provenance"         // no verified provenance for the candidate's build
	CodeContract     = "contract-mismatch"     // a test result is under another contract than the summary
	CodeChainCycle   = "summary-cycle"         // a summary relies on itself
	CodeManifest     = "manifest-mismatch"     // a summary does not name the manifest being resolved
	CodeImage        = "image-mismatch"        // a summary binds an image its sealed pass did not run on, or two images
)

const (
	defaultMaxDepth        = 32
	maxPolicySize          = 1 << 20 // a policy is a few lines; refuse to slurp anything big
	maxSubjectsInMessages  = 4       // keep refusal details readable
	maxReasonsInTypeDetail = 3
)

// Attestation is one candidate envelope and where it came from.
type Attestation struct {
	Source   string // a file path or registry reference, for reports
	Envelope []byte // the exact stored bytes
}

// AttestationSource finds attestations by subject digest. Implementations: DirSource (a
// directory of envelope files); an OCI registry's referrers are the next one.
type AttestationSource interface {
	// Lookup returns every stored attestation that may have the artifact with digest d
	// ("sha256:<hex>") as a subject. Results are unverified candidates: Verify checks each,
	// so a source may return too much, never needs to be trusted, and must not filter by
	// signature itself.
	Lookup(ctx context.Context, d string) ([]Attestation, error)
}

// Policy says what Verify requires beyond a valid signature and a matching subject.
// As a file (LoadPolicy) it is a JSON object with these keys; unknown keys are refused, so
// that a misspelt requirement is an error instead of a silently weaker check.
type Policy struct {
	// Builders is the builder.id allowlist for SLSA provenance. Empty means
	// DefaultBuilders(): Foundry's sandboxed executors only.
	Builders []string `json:"builders,omitempty"`
	// PredicateTypes must each be met by at least one verified statement about the
	// artifact. Empty means PredicateSLSAProvenance.
	PredicateTypes []string `json:"predicateTypes,omitempty"`
	// Signers, if set, pairs keys with the builders they may vouch for (SLSA: accept only
	// specific (signer, builder) pairs): SLSA provenance is then accepted only if a key that
	// verified it lists its builder.id. Without it, every trusted key may vouch for every
	// allowed builder.
	Signers []SignerRule `json:"signers,omitempty"`
	// Evaluators is the evaluator allowlist for test results. Empty means
	// DefaultEvaluators().
	Evaluators []string `json:"evaluators,omitempty"`
	// Verifiers is the verifier.id allowlist for verification summaries. Empty means
	// DefaultVerifiers().
	Verifiers []string `json:"verifiers,omitempty"`
	// SkipDependencies turns off verifying Foundry-produced inputs.
	SkipDependencies bool `json:"skipDependencies,omitempty"`
	// MaxDepth bounds how deep dependencies are followed (default 32).
	MaxDepth int `json:"maxDepth,omitempty"`
}

// SignerRule lets one key vouch for some builders. The ids may also be evaluator ids and
// verifier ids: with Policy.Signers set, a test result counts only if a key that verified it
// lists its evaluator, and a summary only if one lists its verifier.id.
type SignerRule struct {
	KeyID    string   `json:"keyId"`    // KeyID of the public key ("sha256:<hex>")
	Builders []string `json:"builders"` // builder, evaluator or verifier ids it may vouch for
}

// LoadPolicy reads a Policy from a JSON file.
func LoadPolicy(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPolicySize+1))
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	if len(b) > maxPolicySize {
		return nil, fmt.Errorf("policy %s: larger than %d bytes", path, maxPolicySize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("policy %s: data after the policy object", path)
	}
	if p.MaxDepth < 0 {
		return nil, fmt.Errorf("policy %s: maxDepth %d is negative", path, p.MaxDepth)
	}
	for _, b := range p.Builders {
		if b == "" {
			return nil, fmt.Errorf("policy %s: empty builder id", path)
		}
	}
	for _, t := range p.PredicateTypes {
		if t == "" {
			return nil, fmt.Errorf("policy %s: empty predicate type", path)
		}
	}
	for _, id := range append(slices.Clone(p.Evaluators), p.Verifiers...) {
		if id == "" {
			return nil, fmt.Errorf("policy %s: empty evaluator or verifier id", path)
		}
	}
	for i, r := range p.Signers {
		if !digestRE().MatchString(r.KeyID) {
			return nil, fmt.Errorf("policy %s: signers[%d].keyId %q is not a key id (sha256:<hex>, as foundry keygen prints)", path, i, r.KeyID)
		}
		if len(r.Builders) == 0 {
			return nil, fmt.Errorf("policy %s: signers[%d] lists no builders", path, i)
		}
	}
	return &p, nil
}

// Options are the inputs of Verify.
type Options struct {
	Keys   []*Verifier // trusted public keys; at least one
	Policy Policy
	// Source is searched by subject digest for the artifacts and their dependencies.
	Source AttestationSource
	// Attestations are explicitly given candidates, checked for every artifact.
	Attestations []Attestation
}

// Subject is an artifact to verify: a label for reports and its digest.
//
// Contract and Manifest bind a verification summary about the artifact to what is being
// resolved: with Contract set, a summary counts only if it admitted the artifact under
// exactly that contract digest; with Manifest set, only if it also names that manifest
// digest as a subject, under the same contract and with this artifact as its tree. A summary
// that binds anything else is refused (contract-mismatch, manifest-mismatch).
type Subject struct {
	Name     string `json:"name"`
	Digest   string `json:"digest"`
	Contract string `json:"contract,omitempty"`
	Manifest string `json:"manifest,omitempty"`
}

// Report is the result of Verify: OK only if every artifact verified.
type Report struct {
	OK       bool      `json:"ok"`
	Keys     []KeyInfo `json:"keys"`
	Builders []string  `json:"builders"`
	Types    []string  `json:"predicateTypes"`
	// Evaluators and Verifiers are the allowlists used for test results and summaries.
	Evaluators []string          `json:"evaluators,omitempty"`
	Verifiers  []string          `json:"verifiers,omitempty"`
	Artifacts  []*ArtifactReport `json:"artifacts"`
}

// KeyInfo names a trusted key in a report.
type KeyInfo struct {
	Name  string `json:"name"`
	KeyID string `json:"keyId"`
}

// ArtifactReport is what was checked for one artifact (or dependency).
type ArtifactReport struct {
	Name         string               `json:"name"`
	Digest       string               `json:"digest"`
	OK           bool                 `json:"ok"`
	Checks       []Check              `json:"checks"`
	Attestations []*AttestationReport `json:"attestations,omitempty"`
}

// AttestationReport is what was checked for one candidate envelope.
type AttestationReport struct {
	Source        string `json:"source"`
	Digest        string `json:"digest"` // EnvelopeDigest of the exact bytes
	OK            bool   `json:"ok"`     // accepted as evidence about the artifact
	PredicateType string `json:"predicateType,omitempty"`
	BuilderID     string `json:"builderId,omitempty"`
	EvaluatorID   string `json:"evaluatorId,omitempty"` // of a test result
	SuiteDigest   string `json:"suiteDigest,omitempty"` // of a test result: the cases it ran
	VerifierID    string `json:"verifierId,omitempty"`  // of a verification summary
	// Image is, for a verified summary, the image its sealed pass ran on and it binds
	// (AnnotationImage); "" when it binds none.
	Image    string    `json:"image,omitempty"`
	SignedBy []KeyInfo `json:"signedBy,omitempty"` // the trusted keys that verified it
	Checks   []Check   `json:"checks"`
	// Dependencies are the verification of Foundry-produced inputs, when followed.
	Dependencies []*ArtifactReport `json:"dependencies,omitempty"`
	// Inputs are, for a verification summary, the input attestations it lists, each found
	// by its envelope digest and verified in turn (the admission chain).
	Inputs []*AttestationReport `json:"inputs,omitempty"`
	// Provenance is, for a summary that lists no provenance, the candidate's own
	// provenance looked up by its digest.
	Provenance *ArtifactReport `json:"provenance,omitempty"`
	// Reproduces is, for a verified rebuild's provenance (internalParameters.reproduces),
	// the envelope digest of the execution whose outputs it made again byte for byte.
	Reproduces string `json:"reproduces,omitempty"`

	// For a test result found as a summary's input: what it says, for the chain.
	sealed, passed       bool
	suite, result, image string
}

// Check is one verification step: its name, whether it held, and why.
type Check struct {
	Name   string `json:"check"`
	OK     bool   `json:"ok"`
	Code   string `json:"code,omitempty"` // a Code* constant when !OK
	Detail string `json:"detail"`
}

type verifier struct {
	ctx        context.Context
	opts       Options
	keys       []signature.Verifier
	builders   []string
	evaluators []string
	verifiers  []string
	maxDepth   int
	// envelopes indexes every candidate seen (explicit or looked up) by envelope digest,
	// so a summary's inputs can be found among them.
	envelopes map[string]Attestation
	inChain   map[string]bool // summaries (by envelope digest) being followed
	explicit  []Attestation
	done      map[string]*ArtifactReport // dependency digest → its report, once verified
	inProcess map[string]bool
	// bind holds the top-level subjects that carry a Contract or Manifest, by digest.
	bind map[string]Subject
}

// Verify checks the artifacts against the attestations found for them. It returns an error
// only for unusable options (no keys, a malformed digest); every verification failure is in
// the Report, with a reason.
func Verify(ctx context.Context, opts Options, artifacts ...Subject) (*Report, error) {
	if len(opts.Keys) == 0 {
		return nil, errors.New("verify: no public keys: nothing could be trusted")
	}
	if len(artifacts) == 0 {
		return nil, errors.New("verify: no artifacts")
	}
	for _, a := range artifacts {
		if !digestRE().MatchString(a.Digest) {
			return nil, fmt.Errorf("verify: artifact %s: digest %q is not sha256:<64 lowercase hex>", a.Name, a.Digest)
		}
		for _, d := range []string{a.Contract, a.Manifest} {
			if d != "" && !digestRE().MatchString(d) {
				return nil, fmt.Errorf("verify: artifact %s: digest %q is not sha256:<64 lowercase hex>", a.Name, d)
			}
		}
	}
	v := &verifier{
		ctx:        ctx,
		opts:       opts,
		builders:   opts.Policy.Builders,
		maxDepth:   opts.Policy.MaxDepth,
		explicit:   opts.Attestations,
		done:       map[string]*ArtifactReport{},
		inProcess:  map[string]bool{},
		evaluators: opts.Policy.Evaluators,
		verifiers:  opts.Policy.Verifiers,
		envelopes:  map[string]Attestation{},
		inChain:    map[string]bool{},
		bind:       map[string]Subject{},
	}
	if len(v.builders) == 0 {
		v.builders = DefaultBuilders()
	}
	if len(v.evaluators) == 0 {
		v.evaluators = DefaultEvaluators()
	}
	if len(v.verifiers) == 0 {
		v.verifiers = DefaultVerifiers()
	}
	for _, a := range opts.Attestations {
		v.remember(a)
	}
	for _, a := range artifacts {
		if a.Contract != "" || a.Manifest != "" {
			v.bind[a.Digest] = a
		}
	}
	if v.maxDepth == 0 {
		v.maxDepth = defaultMaxDepth
	}
	types := opts.Policy.PredicateTypes
	if len(types) == 0 {
		types = []string{PredicateSLSAProvenance}
	}
	rep := &Report{OK: true, Builders: v.builders, Types: types}
	if slices.Contains(types, PredicateVSA) || slices.Contains(types, PredicateTestResult) {
		rep.Evaluators, rep.Verifiers = v.evaluators, v.verifiers
	}
	for _, k := range opts.Keys {
		if k == nil || k.v == nil {
			return nil, errors.New("verify: nil key")
		}
		v.keys = append(v.keys, k.v)
		rep.Keys = append(rep.Keys, KeyInfo{Name: k.Name, KeyID: k.KeyID})
	}
	for _, a := range artifacts {
		ar := v.artifact(a, types, 0)
		rep.Artifacts = append(rep.Artifacts, ar)
		rep.OK = rep.OK && ar.OK
	}
	return rep, nil
}

// artifact verifies one artifact: it needs, for each required type, one accepted envelope.
func (v *verifier) artifact(a Subject, types []string, depth int) *ArtifactReport {
	ar := &ArtifactReport{Name: a.Name, Digest: a.Digest}
	fail := func(code, format string, args ...any) *ArtifactReport {
		ar.Checks = append(ar.Checks, Check{Name: "attestations", Code: code, Detail: fmt.Sprintf(format, args...)})
		return ar
	}
	cands, err := v.candidates(a.Digest, depth)
	if err != nil {
		return fail(CodeSourceError, "looking up attestations for %s: %v", a.Digest, err)
	}
	seen := map[string]bool{}
	for _, c := range cands {
		d := EnvelopeDigest(c.Envelope)
		if seen[d] {
			continue // the same bytes from two places are one piece of evidence
		}
		seen[d] = true
		ar.Attestations = append(ar.Attestations, v.envelope(c, d, a.Digest, depth))
	}
	if len(ar.Attestations) == 0 {
		return fail(CodeNoAttestation, "no attestation found for %s", a.Digest)
	}
	ar.Checks = append(ar.Checks, Check{Name: "attestations", OK: true,
		Detail: fmt.Sprintf("%d candidate envelope(s) examined", len(ar.Attestations))})
	ar.OK = true
	for _, t := range types {
		c := Check{Name: "type " + t}
		var reasons []string
		for _, at := range ar.Attestations {
			if at.OK && at.PredicateType == t {
				c.OK = true
				c.Detail = "met by verified envelope " + at.Digest + " (" + at.Source + ")"
				break
			}
			if len(reasons) < maxReasonsInTypeDetail {
				reasons = append(reasons, at.Source+": "+at.refusal(t))
			}
		}
		if !c.OK {
			c.Code = CodeTypeMissing
			c.Detail = fmt.Sprintf("no verified statement of type %s about %s; %d candidate(s) refused: %s",
				t, a.Digest, len(ar.Attestations), strings.Join(reasons, "; "))
			ar.OK = false
		}
		ar.Checks = append(ar.Checks, c)
	}
	// An identical rebuild is the artifact's own fact, not only its envelope's: said beside
	// the verdict. It refuses nothing when absent.
	for _, at := range ar.Attestations {
		if at.OK && at.Reproduces != "" {
			ar.Checks = append(ar.Checks, Check{Name: "reproduced", OK: true, Detail: fmt.Sprintf(
				"%s: verified envelope %s is a rebuild in a fresh sandbox whose outputs are byte for byte those of envelope %s",
				ReproducedNote, at.Digest, at.Reproduces)})
			break
		}
	}
	return ar
}

// candidates are the explicit envelopes for d (explicitFor) and what the source finds.
func (v *verifier) candidates(d string, depth int) ([]Attestation, error) {
	cands := v.explicitFor(d, depth)
	if v.opts.Source != nil {
		found, err := v.opts.Source.Lookup(v.ctx, d)
		if err != nil {
			return nil, err
		}
		for _, f := range found {
			v.remember(f)
		}
		cands = append(cands, found...)
	}
	return cands, nil
}

// remember indexes a candidate by its envelope digest, computed from its bytes.
func (v *verifier) remember(a Attestation) {
	d := EnvelopeDigest(a.Envelope)
	if _, ok := v.envelopes[d]; !ok {
		v.envelopes[d] = a
	}
}

// explicitFor picks the explicitly given envelopes to try for digest d: those whose
// (unverified) statement claims d. For a top-level artifact, if none claims it, all are tried,
// so that the report says why each one does not fit (wrong subject, bad signature, garbage);
// for a dependency, unrelated envelopes would only be noise.
func (v *verifier) explicitFor(d string, depth int) []Attestation {
	var claiming []Attestation
	for _, a := range v.explicit {
		subjects, _ := ClaimedSubjects(a.Envelope)
		if slices.Contains(subjects, d) {
			claiming = append(claiming, a)
		}
	}
	if len(claiming) == 0 && depth == 0 {
		return slices.Clone(v.explicit)
	}
	return claiming
}

// refusal says in one line why an attestation does not meet type t.
func (at *AttestationReport) refusal(t string) string {
	for _, c := range at.Checks {
		if !c.OK {
			return c.Code + ": " + c.Detail
		}
	}
	return "verified, but of type " + at.PredicateType + ", not " + t
}

// envelope checks one candidate for the artifact with digest want, in the order DSSE and
// in-toto prescribe, stopping at the first failure.
func (v *verifier) envelope(att Attestation, envDigest, want string, depth int) *AttestationReport {
	r, st := v.open(att, envDigest)
	if st == nil {
		return r
	}
	if name, ok := matchSubject(st, want); ok {
		r.pass("subject", "subject %q has digest %s", name, want)
	} else {
		r.fail("subject", CodeSubject, "no subject has digest %s (subjects: %s)", want, describeSubjects(st))
		return r
	}
	v.predicate(r, st, want, depth)
	return r
}

func (r *AttestationReport) pass(name, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, OK: true, Detail: fmt.Sprintf(format, args...)})
}

func (r *AttestationReport) fail(name, code, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, Code: code, Detail: fmt.Sprintf(format, args...)})
}

// open runs the checks every candidate gets before its subject is looked at: strict
// envelope, payloadType, signature, and a statement parsed from the verified bytes only. It
// returns the statement, or nil after recording the refusal.
func (v *verifier) open(att Attestation, envDigest string) (*AttestationReport, *intoto.Statement) {
	r := &AttestationReport{Source: att.Source, Digest: envDigest}
	env, err := dsse.Parse(att.Envelope)
	if err != nil {
		var de *dsse.Error
		if errors.As(err, &de) {
			r.fail("envelope", de.Code, "%s", de.Msg)
		} else {
			r.fail("envelope", dsse.CodeMalformed, "%v", err)
		}
		return r, nil
	}
	r.pass("envelope", "DSSE envelope with %d signature(s), %d-byte payload", len(env.Signatures), len(env.Payload))

	// Checked before the signature so that the reason is exact; the signature covers the
	// payloadType too, so the order cannot let a changed type through.
	if env.PayloadType != PayloadType {
		r.fail("payload-type", CodePayloadType, "payloadType %q, want %q", env.PayloadType, PayloadType)
		return r, nil
	}
	r.pass("payload-type", "%s", env.PayloadType)

	for _, i := range env.Verify(v.keys) {
		r.SignedBy = append(r.SignedBy, KeyInfo{Name: v.opts.Keys[i].Name, KeyID: v.opts.Keys[i].KeyID})
	}
	if len(r.SignedBy) == 0 {
		r.fail("signature", CodeSignature, "none of the %d signature(s) verifies with any of the %d trusted key(s)", len(env.Signatures), len(v.keys))
		return r, nil
	}
	r.pass("signature", "verified with %s", strings.Join(r.signerNames(), ", "))

	// From here on, only env.Payload — the bytes the signature covers — is read.
	st, err := ParseStatement(env.Payload)
	if err != nil {
		r.fail("statement", CodeStatement, "%v", err)
		return r, nil
	}
	r.PredicateType = st.GetPredicateType()
	r.pass("statement", "in-toto Statement v1, predicateType %s", r.PredicateType)
	return r, st
}

func (r *AttestationReport) signerNames() []string {
	names := make([]string, len(r.SignedBy))
	for i, k := range r.SignedBy {
		names[i] = k.Name
	}
	return names
}

// signerMay checks the policy's (signer, identity) pairs for a statement whose identity
// (builder, evaluator or verifier id) is id; without signers every key may vouch.
func (v *verifier) signerMay(r *AttestationReport, id string) bool {
	rules := v.opts.Policy.Signers
	if len(rules) == 0 {
		return true
	}
	var by string
	for _, k := range r.SignedBy {
		for _, rule := range rules {
			if rule.KeyID == k.KeyID && slices.Contains(rule.Builders, id) {
				by = k.Name
			}
		}
	}
	if by == "" {
		r.fail("signer", CodeSignerBuilder, "none of the keys that verified it (%s) may vouch for %s under the policy's signers", strings.Join(r.signerNames(), ", "), id)
		return false
	}
	r.pass("signer", "%s may vouch for %s", by, id)
	return true
}

// predicate runs the checks of the statement's own type and sets r.OK if they all hold.
// want is the artifact digest the statement was found for.
func (v *verifier) predicate(r *AttestationReport, st *intoto.Statement, want string, depth int) {
	switch r.PredicateType {
	case PredicateSLSAProvenance:
		v.provenance(r, st, depth)
	case PredicateTestResult:
		v.testResult(r, st)
	case PredicateVSA:
		v.summary(r, st, want, depth)
	case PredicateDeliveryReceipt:
		v.receipt(r, st, want, depth)
	default:
		// Evidence of another kind: accepted for what it is; only a required type can
		// make it count (see artifact).
		r.OK = true
	}
}

// provenance checks a SLSA Provenance v1 statement: predicate, buildType, builder, signer,
// and the Foundry-produced dependencies.
func (v *verifier) provenance(r *AttestationReport, st *intoto.Statement, depth int) {
	v.provenanceOf(r, st, depth, !v.opts.Policy.SkipDependencies)
}

// provenanceOf is provenance, following the dependencies only when deps is set.
func (v *verifier) provenanceOf(r *AttestationReport, st *intoto.Statement, depth int, deps bool) {
	prov, err := ParseProvenance(st)
	if err != nil {
		r.fail("predicate", CodePredicate, "%v", err)
		return
	}
	r.pass("predicate", "SLSA Provenance v1")
	if bt := prov.GetBuildDefinition().GetBuildType(); bt != BuildTypeStep {
		r.fail("build-type", CodeBuildType, "buildType %q, want %q", bt, BuildTypeStep)
		return
	}
	r.pass("build-type", "%s", BuildTypeStep)
	r.BuilderID = prov.GetRunDetails().GetBuilder().GetId()
	if !slices.Contains(v.builders, r.BuilderID) {
		r.fail("builder", CodeBuilder, "builder.id %q is not in the allowlist (%s)", r.BuilderID, strings.Join(v.builders, ", "))
		return
	}
	r.pass("builder", "%s is allowed", r.BuilderID)
	if !v.signerMay(r, r.BuilderID) {
		return
	}
	if deps && !v.dependencies(r, prov, depth) {
		return
	}
	v.hermeticity(r, prov)
	r.OK = true
}

// hermeticity reports, for the reader, what a verified provenance says of the caches it
// mounted and of a rebuild it is (internalParameters.caches and reproduces): facts the
// signature vouches for, which refuse nothing.
func (v *verifier) hermeticity(r *AttestationReport, prov *slsa.Provenance) {
	internal := prov.GetBuildDefinition().GetInternalParameters().GetFields()
	if rp := internal["reproduces"].GetStructValue().GetFields(); rp != nil {
		r.Reproduces = rp["attestation"].GetStringValue()
		r.pass("reproduced", "%s: its outputs are byte for byte those of the execution of envelope %s (cache key %s)",
			ReproducedNote, rp["attestation"].GetStringValue(), rp["cacheKey"].GetStringValue())
	}
	var volumes []string
	for _, c := range internal["caches"].GetListValue().GetValues() {
		f := c.GetStructValue().GetFields()
		if !f["hermetic"].GetBoolValue() {
			volumes = append(volumes, fmt.Sprintf("%q at %s", f["name"].GetStringValue(), f["path"].GetStringValue()))
		}
	}
	if len(volumes) > 0 {
		r.pass("caches", "mounted cache volume(s) %s: non-hermetic inputs, named by no digest", strings.Join(volumes, ", "))
	}
}

// dependencies verifies every resolved dependency that names a Foundry producer, as an
// artifact that needs its own SLSA provenance. It reports false if any did not verify.
func (v *verifier) dependencies(r *AttestationReport, prov *slsa.Provenance, depth int) bool {
	n, bad := 0, 0
	for _, rd := range prov.GetBuildDefinition().GetResolvedDependencies() {
		producer := rd.GetAnnotations().GetFields()[AnnotationProducer].GetStringValue()
		if producer == "" {
			continue
		}
		n++
		name := rd.GetName()
		if name == "" {
			name = rd.GetUri()
		}
		hex := rd.GetDigest()["sha256"]
		d := "sha256:" + hex
		var dr *ArtifactReport
		switch {
		case !digestRE().MatchString(d):
			dr = &ArtifactReport{Name: name, Digest: d, Checks: []Check{{Name: "dependency", Code: CodeDependency,
				Detail: "Foundry-produced dependency has no sha256 digest"}}}
		case v.inProcess[d]:
			dr = &ArtifactReport{Name: name, Digest: d, Checks: []Check{{Name: "dependency", Code: CodeDependencyCycle,
				Detail: d + " depends on itself"}}}
		case v.done[d] != nil:
			prev := v.done[d]
			c := Check{Name: "dependency", OK: prev.OK, Detail: "verified above"}
			if !prev.OK {
				c.Code, c.Detail = CodeDependency, "refused above"
			}
			dr = &ArtifactReport{Name: name, Digest: d, OK: prev.OK, Checks: []Check{c}}
		case depth+1 > v.maxDepth:
			dr = &ArtifactReport{Name: name, Digest: d, Checks: []Check{{Name: "dependency", Code: CodeDependencyDepth,
				Detail: fmt.Sprintf("dependencies nest deeper than %d", v.maxDepth)}}}
		default:
			v.inProcess[d] = true
			dr = v.artifact(Subject{Name: name, Digest: d}, []string{PredicateSLSAProvenance}, depth+1)
			delete(v.inProcess, d)
			v.done[d] = dr
		}
		r.Dependencies = append(r.Dependencies, dr)
		if !dr.OK {
			bad++
		}
	}
	if bad > 0 {
		r.Checks = append(r.Checks, Check{Name: "dependencies", Code: CodeDependency,
			Detail: fmt.Sprintf("%d of %d Foundry-produced input(s) did not verify", bad, n)})
		return false
	}
	r.Checks = append(r.Checks, Check{Name: "dependencies", OK: true,
		Detail: fmt.Sprintf("%d Foundry-produced input(s) verified", n)})
	return true
}

// ParseStatement parses an in-toto Statement v1 from payload bytes. Call it only on bytes
// whose signature has been verified. Unknown fields are ignored, as the in-toto spec
// requires of consumers; the v0.1 statement type is refused.
func ParseStatement(payload []byte) (*intoto.Statement, error) {
	st := &intoto.Statement{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(payload, st); err != nil {
		return nil, fmt.Errorf("payload is not an in-toto statement: %w", err)
	}
	if st.GetType() != intoto.StatementTypeUri {
		return nil, fmt.Errorf("statement _type %q, want %q", st.GetType(), intoto.StatementTypeUri)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("invalid statement: %w", err)
	}
	return st, nil
}

// ParseProvenance decodes a statement's predicate as SLSA Provenance v1 and validates it.
func ParseProvenance(st *intoto.Statement) (*slsa.Provenance, error) {
	b, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	p := &slsa.Provenance{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("predicate is not SLSA Provenance v1: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid SLSA Provenance v1: %w", err)
	}
	return p, nil
}

func matchSubject(st *intoto.Statement, want string) (string, bool) {
	hex := strings.TrimPrefix(want, "sha256:")
	for _, s := range st.GetSubject() {
		if s.GetDigest()["sha256"] == hex {
			return s.GetName(), true
		}
	}
	return "", false
}

func describeSubjects(st *intoto.Statement) string {
	var parts []string
	for i, s := range st.GetSubject() {
		if i == maxSubjectsInMessages {
			parts = append(parts, fmt.Sprintf("and %d more", len(st.GetSubject())-i))
			break
		}
		d := "no sha256"
		if h, ok := s.GetDigest()["sha256"]; ok {
			d = "sha256:" + h
		}
		parts = append(parts, fmt.Sprintf("%q %s", s.GetName(), d))
	}
	return strings.Join(parts, ", ")
}

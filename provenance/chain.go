package provenance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	intoto "github.com/in-toto/attestation/go/v1"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// EnvelopeSource is an AttestationSource that can also find an envelope by its own digest
// (EnvelopeDigest of its exact bytes), which is how a verification summary names the
// attestations it relied on. DirSource and MultiSource implement it. Results are untrusted
// candidates: Verify keeps only those whose bytes have the digest asked for.
type EnvelopeSource interface {
	AttestationSource
	LookupEnvelope(ctx context.Context, envelopeDigest string) ([]Attestation, error)
}

// findEnvelope finds the envelope with digest d among the candidates seen so far and, if
// the source can, by asking it. Only bytes that hash to d are returned.
func (v *verifier) findEnvelope(d string) (Attestation, bool, error) {
	if a, ok := v.envelopes[d]; ok {
		return a, true, nil
	}
	es, ok := v.opts.Source.(EnvelopeSource)
	if !ok {
		return Attestation{}, false, nil
	}
	found, err := es.LookupEnvelope(v.ctx, d)
	if err != nil {
		return Attestation{}, false, err
	}
	for _, f := range found {
		if EnvelopeDigest(f.Envelope) == d {
			v.remember(f)
			return f, true, nil
		}
	}
	return Attestation{}, false, nil
}

// testResult checks a test-result statement: predicate, evaluator allowlist and signer. It
// returns the parsed result when they hold (r.OK is then true).
func (v *verifier) testResult(r *AttestationReport, st *intoto.Statement) *TestResult {
	tr, err := ParseTestResult(st)
	if err != nil {
		r.fail("predicate", CodePredicate, "%v", err)
		return nil
	}
	r.pass("predicate", "test result v0.1: suite %s, result %s, %d passed, %d failed, contract %s %s",
		tr.Suite, tr.Result, len(tr.Predicate.GetPassedTests()), len(tr.Predicate.GetFailedTests()), tr.Capability, tr.ContractDigest)
	r.EvaluatorID = tr.Evaluator
	if !slices.Contains(v.evaluators, tr.Evaluator) {
		r.fail("evaluator", CodeEvaluator, "evaluator %q is not in the allowlist (%s)", tr.Evaluator, strings.Join(v.evaluators, ", "))
		return nil
	}
	r.pass("evaluator", "%s is allowed", tr.Evaluator)
	if !v.signerMay(r, tr.Evaluator) {
		return nil
	}
	r.OK = true
	return tr
}

// summary checks a verification summary about want and follows its chain: the summary
// itself (predicate, verifier, signer, PASSED, Foundry's levels), then every input
// attestation it lists, found by envelope digest and verified; among them a sealed test
// result PASSED for want under the summary's contract; and verified provenance for the
// candidate's build (an input, or else the candidate's own provenance). r.OK is set only if
// every link holds.
func (v *verifier) summary(r *AttestationReport, st *intoto.Statement, want string, depth int) {
	if v.inChain[r.Digest] {
		r.fail("summary", CodeChainCycle, "summary %s is already being followed", r.Digest)
		return
	}
	v.inChain[r.Digest] = true
	defer delete(v.inChain, r.Digest)

	p, err := ParseVerificationSummary(st)
	if err != nil {
		r.fail("predicate", CodePredicate, "%v", err)
		return
	}
	r.pass("predicate", "SLSA verification summary v1 for %s, policy %s, %d input attestation(s)",
		p.GetResourceUri(), p.GetPolicy().GetUri(), len(p.GetInputAttestations()))
	r.VerifierID = p.GetVerifier().GetId()
	if !slices.Contains(v.verifiers, r.VerifierID) {
		r.fail("verifier", CodeVerifier, "verifier.id %q is not in the allowlist (%s)", r.VerifierID, strings.Join(v.verifiers, ", "))
		return
	}
	r.pass("verifier", "%s is allowed", r.VerifierID)
	if !v.signerMay(r, r.VerifierID) {
		return
	}
	if res := p.GetVerificationResult(); res != ResultPassed {
		r.fail("result", CodeResult, "verificationResult %s", res)
		return
	}
	r.pass("result", "verificationResult PASSED")
	levels := p.GetVerifiedLevels()
	for _, l := range levels {
		if strings.HasPrefix(strings.ToUpper(l), "SLSA_") {
			r.fail("levels", CodeLevels, "level %q: Foundry's levels never start with SLSA_", l)
			return
		}
	}
	if !slices.Contains(levels, LevelSealedEvaluationPassed) {
		r.fail("levels", CodeLevels, "verifiedLevels %v lack %s", levels, LevelSealedEvaluationPassed)
		return
	}
	r.pass("levels", "%s", strings.Join(levels, ", "))
	contract := subjectContract(st, want)
	if !digestRE().MatchString(contract) {
		r.fail("contract", CodeContract, "the subject has no %s annotation (sha256:<hex>): the contract it was admitted under is unknown", AnnotationContract)
		return
	}
	if b, ok := v.bind[want]; ok && depth == 0 {
		if b.Contract != "" && contract != b.Contract {
			r.fail("contract", CodeContract, "admitted under contract %s, not %s: not admitted for this contract", contract, b.Contract)
			return
		}
		if b.Manifest != "" {
			if _, named := matchSubject(st, b.Manifest); !named {
				r.fail("manifest", CodeManifest, "the summary does not name manifest %s (subjects: %s)", b.Manifest, describeSubjects(st))
				return
			}
			if c, t := subjectContract(st, b.Manifest), subjectAnnotation(st, b.Manifest, AnnotationTree); c != contract || t != want {
				r.fail("manifest", CodeManifest, "the summary names manifest %s under contract %q with tree %q, not contract %s with tree %s", b.Manifest, c, t, contract, want)
				return
			}
			r.pass("manifest", "names manifest %s with tree %s", b.Manifest, want)
		}
	}
	r.pass("contract", "admitted under contract %s", contract)
	// The image the admission binds: a sealed pass counts only on that image.
	image := subjectAnnotation(st, want, AnnotationImage)
	if b, ok := v.bind[want]; ok && depth == 0 && b.Manifest != "" {
		if mi := subjectAnnotation(st, b.Manifest, AnnotationImage); mi != image {
			r.fail("image", CodeImage, "the summary binds image %q to the tree and %q to manifest %s: one admission binds one image", image, mi, b.Manifest)
			return
		}
	}

	// Every input the summary lists must be found by its digest and verify: the summary
	// says it relied on all of them.
	var (
		bad        []string
		sealed     string
		sealedWhy  []string
		provenance string
	)
	for _, in := range p.GetInputAttestations() {
		d := "sha256:" + in.GetDigest()["sha256"]
		att, found, err := v.findEnvelope(d)
		var ir *AttestationReport
		switch {
		case err != nil:
			ir = &AttestationReport{Source: in.GetUri(), Digest: d}
			ir.fail("input", CodeSourceError, "looking up envelope %s: %v", d, err)
		case !found:
			ir = &AttestationReport{Source: in.GetUri(), Digest: d}
			ir.fail("input", CodeInputMissing, "no envelope with digest %s was found (tampered, substituted or not stored)", d)
		default:
			ir = v.input(att, d, want, contract, depth)
		}
		r.Inputs = append(r.Inputs, ir)
		if !ir.OK {
			bad = append(bad, d+": "+ir.refusal(""))
			if ir.PredicateType == PredicateTestResult {
				sealedWhy = append(sealedWhy, d+" refused")
			}
			continue
		}
		switch ir.PredicateType {
		case PredicateTestResult:
			why := ir.sealedPassFor()
			if why == "" && image != "" && ir.image != image {
				why = fmt.Sprintf("it ran on image %q, the summary binds %q", ir.image, image)
			}
			if why == "" {
				if sealed == "" {
					sealed = d
				}
			} else {
				sealedWhy = append(sealedWhy, d+": "+why)
			}
		case PredicateSLSAProvenance:
			if provenance == "" {
				provenance = d + " (builder " + ir.BuilderID + ")"
			}
		}
	}
	ok := true
	if n := len(p.GetInputAttestations()); len(bad) > 0 {
		code := CodeInputRefused
		for _, ir := range r.Inputs {
			if !ir.OK && len(ir.Checks) > 0 && ir.Checks[0].Code == CodeInputMissing {
				code = CodeInputMissing
			}
		}
		r.fail("inputs", code, "%d of %d input attestation(s) missing or refused: %s", len(bad), n, strings.Join(firstN(bad, maxReasonsInTypeDetail), "; "))
		ok = false
	} else {
		r.pass("inputs", "%d input attestation(s) found by envelope digest and verified", n)
	}
	if sealed != "" {
		r.Image = image
		r.pass("sealed-evaluation", "test result %s: sealed suite PASSED for %s on image %s", sealed, want, orNone(image))
	} else {
		detail := "no verified sealed-suite test result PASSED for " + want + " among the summary's inputs"
		if len(sealedWhy) > 0 {
			detail += " (" + strings.Join(firstN(sealedWhy, maxReasonsInTypeDetail), "; ") + ")"
		}
		r.fail("sealed-evaluation", CodeNoSealedPass, "%s", detail)
		ok = false
	}
	if provenance != "" {
		r.pass("provenance", "verified provenance %s listed by the summary", provenance)
	} else {
		r.Provenance = v.ownProvenance(want, depth)
		if r.Provenance.OK {
			r.pass("provenance", "the summary lists no provenance; the candidate's own provenance verified")
		} else {
			r.fail("provenance", CodeNoProvenance, "no verified provenance for %s: none among the summary's inputs, and none of its own", want)
			ok = false
		}
	}
	r.OK = ok
}

// input verifies one attestation a summary lists. A test result must be about want, under
// the summary's contract; a provenance statement is bound to the candidate by the signed
// summary listing it, and is verified as provenance (builder, signer, dependencies).
func (v *verifier) input(att Attestation, d, want, contract string, depth int) *AttestationReport {
	r, st := v.open(att, d)
	if st == nil {
		return r
	}
	switch r.PredicateType {
	case PredicateTestResult:
		if name, ok := matchSubject(st, want); ok {
			r.pass("subject", "subject %q has digest %s", name, want)
		} else {
			r.fail("subject", CodeSubject, "test result is about %s, not %s", describeSubjects(st), want)
			return r
		}
		tr := v.testResult(r, st)
		if tr == nil {
			return r
		}
		if tr.ContractDigest != contract {
			r.OK = false
			r.fail("contract", CodeContract, "test result is under contract %s, the summary under %s", tr.ContractDigest, contract)
			return r
		}
		r.sealed = tr.Suite == SuiteSealed
		r.passed = tr.Passed()
		r.suite, r.result, r.SuiteDigest = tr.Suite, tr.Result, tr.SuiteDigest
		r.image = tr.Configuration[ConfigCandidateImage]
	case PredicateSLSAProvenance:
		detail := "bound to " + want + " by the summary; subjects: " + describeSubjects(st)
		if name, ok := matchSubject(st, want); ok {
			detail = fmt.Sprintf("subject %q has digest %s", name, want)
		}
		r.pass("subject", "%s", detail)
		v.provenance(r, st, depth)
	case PredicateVSA:
		r.fail("input", CodeInputRefused, "a summary listed as the input of a summary is not followed")
	default:
		r.fail("input", CodeInputRefused, "predicateType %s is not part of the admission chain", r.PredicateType)
	}
	return r
}

// SealedSuites are the suite digests of the sealed passes that verified summaries in the
// report rely on: the sealed suites an admitted artifact was judged on.
func (r *Report) SealedSuites() []string {
	var out []string
	for _, a := range r.Artifacts {
		for _, at := range a.Attestations {
			if !at.OK || at.PredicateType != PredicateVSA {
				continue
			}
			for _, in := range at.Inputs {
				if in.OK && in.sealedPassFor() == "" && !slices.Contains(out, in.SuiteDigest) {
					out = append(out, in.SuiteDigest)
				}
			}
		}
	}
	return out
}

// AdmittedImage is the image the verified summaries of the report bind (AnnotationImage):
// the image the sealed suite passed on, where a call of the admitted version runs. It is
// "" when none binds one (an admission older than the binding), and ok is false when
// verified summaries bind different images.
func (r *Report) AdmittedImage() (image string, ok bool) {
	seen := false
	for _, a := range r.Artifacts {
		for _, at := range a.Attestations {
			if !at.OK || at.PredicateType != PredicateVSA {
				continue
			}
			if seen && at.Image != image {
				return "", false
			}
			image, seen = at.Image, true
		}
	}
	return image, true
}

func orNone(s string) string {
	if s == "" {
		return "(none named)"
	}
	return s
}

// sealedPassFor says why a verified test-result input is not a sealed pass, or "" if it is.
func (r *AttestationReport) sealedPassFor() string {
	switch {
	case !r.sealed:
		return "suite " + r.suite + ", not sealed"
	case !r.passed:
		return "sealed suite result " + r.result
	}
	return ""
}

// ownProvenance verifies the candidate's own SLSA provenance, found by its digest. Only
// candidates whose (unverified) statement claims to be provenance are tried, so that other
// summaries about the same digest are not followed from here.
func (v *verifier) ownProvenance(want string, depth int) *ArtifactReport {
	ar := &ArtifactReport{Name: "provenance of " + want, Digest: want}
	cands, err := v.candidates(want, depth+1)
	if err != nil {
		ar.Checks = append(ar.Checks, Check{Name: "attestations", Code: CodeSourceError, Detail: fmt.Sprintf("looking up attestations for %s: %v", want, err)})
		return ar
	}
	seen := map[string]bool{}
	for _, c := range cands {
		d := EnvelopeDigest(c.Envelope)
		if seen[d] || claimedPredicateType(c.Envelope) != PredicateSLSAProvenance {
			continue
		}
		seen[d] = true
		at := v.envelope(c, d, want, depth+1)
		ar.Attestations = append(ar.Attestations, at)
		if at.OK && at.PredicateType == PredicateSLSAProvenance {
			ar.OK = true
		}
	}
	if ar.OK {
		ar.Checks = append(ar.Checks, Check{Name: "type " + PredicateSLSAProvenance, OK: true, Detail: "met by a verified envelope"})
	} else {
		ar.Checks = append(ar.Checks, Check{Name: "type " + PredicateSLSAProvenance, Code: CodeTypeMissing,
			Detail: fmt.Sprintf("no verified provenance about %s; %d candidate(s) refused", want, len(ar.Attestations))})
	}
	return ar
}

// claimedPredicateType is the predicateType an envelope's statement claims, unverified: for
// routing only.
func claimedPredicateType(envelope []byte) string {
	env, err := dsse.Parse(envelope)
	if err != nil {
		return ""
	}
	st, err := ParseStatement(env.Payload)
	if err != nil {
		return ""
	}
	return st.GetPredicateType()
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

package provenance

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	vsa "github.com/in-toto/attestation/go/predicates/vsa/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// PredicateVSA is the predicateType of an admission: a SLSA Verification Summary v1.
const PredicateVSA = "https://slsa.dev/verification_summary/v1"

// VerifierIDAdmission is the verifier.id of Foundry's admission, the default (and only)
// verifier Verify trusts for a summary unless a Policy names others.
const VerifierIDAdmission = "https://foundry.dev/verifier/admission@v1"

// Foundry's verified levels. SLSA reserves the "SLSA_" prefix for its own levels, so
// Foundry's all start with "FOUNDRY_"; NewVerificationSummary accepts no other names.
const (
	// LevelSealedEvaluationPassed: Foundry's evaluator ran the sealed suite on this exact
	// subject and every case passed. Every Foundry summary carries it.
	LevelSealedEvaluationPassed = "FOUNDRY_SEALED_EVALUATION_PASSED"
	// LevelProvenanceVerified: a signed SLSA provenance from an allowed builder for the
	// candidate's build is among the input attestations.
	LevelProvenanceVerified = "FOUNDRY_PROVENANCE_VERIFIED"
)

// Annotations on a summary's subjects: the contract digest it was admitted under (on every
// subject), on the manifest subject the tree digest of the files it carries, and on every
// subject the image the sealed suite passed on (its test result's configuration
// "candidate-image"): what a call of the admitted version must run on.
const (
	AnnotationContract = "foundry_contract"
	AnnotationTree     = "foundry_tree"
	AnnotationImage    = "foundry_image"
	// AnnotationEvidence and AnnotationDossier, on every subject, say what the sealed
	// evaluation proved and against which reference dossier (Admission.Evidence, Dossier).
	AnnotationEvidence = "foundry_evidence"
	AnnotationDossier  = "foundry_reference_dossier"
)

// ConfigCandidateImage is the name of a test result's configuration descriptor that names
// the image the candidate ran in: its files on its base image.
const ConfigCandidateImage = "candidate-image"

// ConfigReferenceDossier is the name of a test result's configuration descriptor that names
// the reference dossier its differential cases took their expected outputs from.
const ConfigReferenceDossier = "reference-dossier"

// MediaTypeOCIManifest is the media type of the manifest subject of a summary.
const MediaTypeOCIManifest = "application/vnd.oci.image.manifest.v1+json"

var levelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`) })

// DefaultVerifiers is the verifier.id allowlist Verify uses when a Policy names none.
func DefaultVerifiers() []string { return []string{VerifierIDAdmission} }

// CheckLevel says whether name may be one of Foundry's verified levels: upper-case letters,
// digits and underscores, not starting with "SLSA_" (SLSA reserves it), and one of
// Foundry's defined levels.
func CheckLevel(name string) error {
	if strings.HasPrefix(strings.ToUpper(name), "SLSA_") {
		return fmt.Errorf("level %q: names starting with SLSA_ are reserved for SLSA's own levels", name)
	}
	if !levelRE().MatchString(name) {
		return fmt.Errorf("level %q: want upper-case letters, digits and underscores", name)
	}
	switch name {
	case LevelSealedEvaluationPassed, LevelProvenanceVerified:
		return nil
	}
	return fmt.Errorf("level %q is not one of Foundry's levels (%s, %s)", name, LevelSealedEvaluationPassed, LevelProvenanceVerified)
}

// Admission is what Foundry's admission observed when it admitted a candidate: the subject,
// the policy it applied, and the exact envelopes it relied on. It has no field for a
// verdict: NewVerificationSummary verifies the evidence itself and mints only PASSED.
type Admission struct {
	// Subject is the admitted capability: Name its name, Digest the candidate artifact's
	// digest, the same digest the sealed test result names as its subject.
	Subject Artifact
	// ContractDigest is the contract the candidate was admitted under ("sha256:<hex>"); the
	// sealed test result must name the same contract.
	ContractDigest string
	// Manifest, if set, is the digest of the OCI manifest the candidate is published as: the
	// summary names it as a second subject (with the contract and the tree), so that a pin,
	// a pull or cosign binds the admission to those exact bytes.
	Manifest string
	// ResourceURI is the VSA resourceUri, e.g. the registry reference the capability will
	// be published at. Empty means "foundry:capability/<name>@<digest>".
	ResourceURI string
	// Verifier is the verifier.id; empty means VerifierIDAdmission.
	Verifier string
	// TimeVerified is when admission decided.
	TimeVerified time.Time
	// Policy is the admission policy applied: an absolute URI and its digest.
	Policy PolicyRef
	// Inputs are the exact envelope bytes of every attestation admission relied on: the
	// candidate's provenance and its test results. Each must verify with one of Keys; the
	// summary lists them by EnvelopeDigest. Among them there must be a sealed-suite test
	// result, PASSED, for Subject.Digest under ContractDigest.
	Inputs []Attestation
	// Keys are the public keys the inputs must verify with (the executor's and evaluator's).
	Keys []*Verifier
	// Evaluators and Builders are the allowlists for the test results' evaluator and the
	// provenance's builder.id; empty means DefaultEvaluators() and DefaultBuilders().
	Evaluators []string
	Builders   []string
	// VerifiedLevels are the levels to claim besides LevelSealedEvaluationPassed, which is
	// always claimed. Each must pass CheckLevel and be backed by the inputs.
	VerifiedLevels []string
	// Evidence, when set, says what the sealed evaluation proved ("agreed with reference
	// R on N generated sealed case(s) from seed S, 0 disagreements; M hand-written sealed
	// case(s) passed"), and Dossier names the reference dossier it was proven against
	// ("sha256:<hex>"): the subjects carry them as the foundry_evidence and
	// foundry_reference_dossier annotations.
	Evidence string
	Dossier  string
}

// PolicyRef names a policy: its URI and digest ("sha256:<hex>").
type PolicyRef struct {
	URI    string
	Digest string
}

// NewVerificationSummary mints the SLSA VSA v1 statement admitting a capability. Its
// verificationResult is always PASSED: there is no way to mint a FAILED summary, nor to
// mint a PASSED one without the evidence. It verifies every input envelope itself (strict
// DSSE, in-toto payloadType, a signature by one of a.Keys, a valid statement) and refuses
// unless a sealed-suite test result with result PASSED for exactly a.Subject.Digest and
// a.ContractDigest, from an allowed evaluator, is among them. It also refuses inputs that
// contradict the admission: a test result for another subject or contract, a FAILED sealed
// result, or an attestation of a type admission does not rely on. This makes "nothing is
// admitted without a sealed pass" (ARCHITECTURE.md, invariant 1) hold at this layer.
func NewVerificationSummary(a *Admission) (*Statement, error) {
	if a == nil {
		return nil, errors.New("verification summary: nil admission")
	}
	if a.Subject.Name == "" {
		return nil, errors.New("verification summary: subject has no name")
	}
	subj, err := digestSet(a.Subject.Digest)
	if err != nil {
		return nil, fmt.Errorf("verification summary: subject: %w", err)
	}
	if !digestRE().MatchString(a.ContractDigest) {
		return nil, fmt.Errorf("verification summary: contract digest %q is not sha256:<64 hex>", a.ContractDigest)
	}
	verifierID := a.Verifier
	if verifierID == "" {
		verifierID = VerifierIDAdmission
	}
	if err := checkURI(verifierID); err != nil {
		return nil, fmt.Errorf("verification summary: verifier: %w", err)
	}
	resourceURI := a.ResourceURI
	if resourceURI == "" {
		resourceURI = "foundry:capability/" + a.Subject.Name + "@" + a.Subject.Digest
	}
	if err := checkURI(resourceURI); err != nil {
		return nil, fmt.Errorf("verification summary: resource uri: %w", err)
	}
	if a.TimeVerified.IsZero() {
		return nil, errors.New("verification summary: no verification time")
	}
	if err := checkURI(a.Policy.URI); err != nil {
		return nil, fmt.Errorf("verification summary: policy uri: %w", err)
	}
	policyDigest, err := digestSet(a.Policy.Digest)
	if err != nil {
		return nil, fmt.Errorf("verification summary: policy: %w", err)
	}
	levels := []string{LevelSealedEvaluationPassed}
	for _, l := range a.VerifiedLevels {
		if err := CheckLevel(l); err != nil {
			return nil, fmt.Errorf("verification summary: %w", err)
		}
		if !slices.Contains(levels, l) {
			levels = append(levels, l)
		}
	}
	sort.Strings(levels)
	if len(a.Keys) == 0 {
		return nil, errors.New("verification summary: no keys to verify the input attestations with")
	}
	var keys []signature.Verifier
	for _, k := range a.Keys {
		if k == nil || k.v == nil {
			return nil, errors.New("verification summary: nil key")
		}
		keys = append(keys, k.v)
	}
	evaluators := a.Evaluators
	if len(evaluators) == 0 {
		evaluators = DefaultEvaluators()
	}
	builders := a.Builders
	if len(builders) == 0 {
		builders = DefaultBuilders()
	}

	var inputs []*vsa.VerificationSummary_InputAttestation
	seen := map[string]bool{}
	sealedPass, provenanceOK := false, false
	image := "" // the image the sealed pass ran on
	for i, in := range a.Inputs {
		d := EnvelopeDigest(in.Envelope)
		if seen[d] {
			continue
		}
		seen[d] = true
		what := fmt.Sprintf("input %d (%s, %s)", i, in.Source, d)
		st, err := openVerified(in.Envelope, keys)
		if err != nil {
			return nil, fmt.Errorf("verification summary: %s: %w", what, err)
		}
		switch st.GetPredicateType() {
		case PredicateTestResult:
			tr, err := ParseTestResult(st)
			if err != nil {
				return nil, fmt.Errorf("verification summary: %s: %w", what, err)
			}
			if len(tr.Subjects) != 1 || tr.Subjects[0] != a.Subject.Digest {
				return nil, fmt.Errorf("verification summary: %s: test result is about %s, not the subject %s", what, strings.Join(tr.Subjects, ", "), a.Subject.Digest)
			}
			if tr.ContractDigest != a.ContractDigest {
				return nil, fmt.Errorf("verification summary: %s: test result is under contract %s, not %s", what, tr.ContractDigest, a.ContractDigest)
			}
			if !slices.Contains(evaluators, tr.Evaluator) {
				return nil, fmt.Errorf("verification summary: %s: evaluator %q is not allowed (%s)", what, tr.Evaluator, strings.Join(evaluators, ", "))
			}
			if tr.Suite == SuiteSealed {
				if !tr.Passed() {
					return nil, fmt.Errorf("verification summary: %s: the sealed suite FAILED for %s: a failed candidate is not admitted", what, a.Subject.Digest)
				}
				img := tr.Configuration[ConfigCandidateImage]
				if sealedPass && img != image {
					return nil, fmt.Errorf("verification summary: %s: the sealed suite passed on image %q, another sealed pass on %q: an admission binds one image", what, img, image)
				}
				if d := tr.Configuration[ConfigReferenceDossier]; a.Dossier != "" && d != a.Dossier {
					return nil, fmt.Errorf("verification summary: %s: the sealed suite ran under reference dossier %q, not %s", what, d, a.Dossier)
				}
				sealedPass, image = true, img
			}
		case PredicateSLSAProvenance:
			prov, err := ParseProvenance(st)
			if err != nil {
				return nil, fmt.Errorf("verification summary: %s: %w", what, err)
			}
			if bt := prov.GetBuildDefinition().GetBuildType(); bt != BuildTypeStep {
				return nil, fmt.Errorf("verification summary: %s: buildType %q, want %q", what, bt, BuildTypeStep)
			}
			if id := prov.GetRunDetails().GetBuilder().GetId(); !slices.Contains(builders, id) {
				return nil, fmt.Errorf("verification summary: %s: builder %q is not allowed (%s)", what, id, strings.Join(builders, ", "))
			}
			provenanceOK = true
		default:
			return nil, fmt.Errorf("verification summary: %s: predicateType %q: admission relies only on provenance and test results", what, st.GetPredicateType())
		}
		inputs = append(inputs, &vsa.VerificationSummary_InputAttestation{
			Digest: map[string]string{"sha256": strings.TrimPrefix(d, "sha256:")},
		})
	}
	if !sealedPass {
		return nil, fmt.Errorf("verification summary: no verified sealed-suite test result PASSED for %s among the %d input(s): nothing is admitted without a sealed pass", a.Subject.Digest, len(a.Inputs))
	}
	if slices.Contains(levels, LevelProvenanceVerified) && !provenanceOK {
		return nil, fmt.Errorf("verification summary: level %s claimed without a verified provenance among the inputs", LevelProvenanceVerified)
	}
	sort.Slice(inputs, func(i, j int) bool { return inputs[i].Digest["sha256"] < inputs[j].Digest["sha256"] })

	pred := &vsa.VerificationSummary{
		Verifier:           &vsa.VerificationSummary_Verifier{Id: verifierID},
		TimeVerified:       timestamppb.New(a.TimeVerified.UTC()),
		ResourceUri:        resourceURI,
		Policy:             &vsa.VerificationSummary_Policy{Uri: a.Policy.URI, Digest: policyDigest},
		InputAttestations:  inputs,
		VerificationResult: ResultPassed,
		VerifiedLevels:     levels,
	}
	predStruct, err := predicateStruct(pred)
	if err != nil {
		return nil, fmt.Errorf("verification summary: %w", err)
	}
	if a.Dossier != "" && !digestRE().MatchString(a.Dossier) {
		return nil, fmt.Errorf("verification summary: reference dossier %q is not sha256:<64 hex>", a.Dossier)
	}
	annotations := func(m map[string]any) map[string]any {
		if image != "" {
			m[AnnotationImage] = image
		}
		if a.Evidence != "" {
			m[AnnotationEvidence] = a.Evidence
		}
		if a.Dossier != "" {
			m[AnnotationDossier] = a.Dossier
		}
		return m
	}
	ann, err := structpb.NewStruct(annotations(map[string]any{AnnotationContract: a.ContractDigest}))
	if err != nil {
		return nil, fmt.Errorf("verification summary: %w", err)
	}
	subjects := []*intoto.ResourceDescriptor{{Name: a.Subject.Name, Digest: subj, MediaType: a.Subject.MediaType, Annotations: ann}}
	if a.Manifest != "" {
		md, err := digestSet(a.Manifest)
		if err != nil {
			return nil, fmt.Errorf("verification summary: manifest: %w", err)
		}
		mann, err := structpb.NewStruct(annotations(map[string]any{AnnotationContract: a.ContractDigest, AnnotationTree: a.Subject.Digest}))
		if err != nil {
			return nil, fmt.Errorf("verification summary: %w", err)
		}
		subjects = append(subjects, &intoto.ResourceDescriptor{Name: a.Subject.Name + ".manifest", Digest: md,
			MediaType: MediaTypeOCIManifest, Annotations: mann})
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       subjects,
		PredicateType: PredicateVSA,
		Predicate:     predStruct,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("verification summary: %w", err)
	}
	return &Statement{st: st}, nil
}

// openVerified parses envelope strictly, requires the in-toto payloadType and a signature
// by one of keys, and parses the verified payload as a statement.
func openVerified(envelope []byte, keys []signature.Verifier) (*intoto.Statement, error) {
	env, err := dsse.Parse(envelope)
	if err != nil {
		return nil, err
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("payloadType %q, want %q", env.PayloadType, PayloadType)
	}
	if len(env.Verify(keys)) == 0 {
		return nil, errors.New("no signature verifies with the given keys")
	}
	return ParseStatement(env.Payload)
}

// ParseVerificationSummary decodes a statement's predicate as a SLSA VSA v1 and checks the
// fields the spec requires: verifier.id, timeVerified, resourceUri, policy.uri,
// verificationResult (PASSED or FAILED), and a sha256 digest on every input attestation.
// Call it only on a verified statement.
func ParseVerificationSummary(st *intoto.Statement) (*vsa.VerificationSummary, error) {
	if st.GetPredicateType() != PredicateVSA {
		return nil, fmt.Errorf("predicateType %q, want %q", st.GetPredicateType(), PredicateVSA)
	}
	b, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	p := &vsa.VerificationSummary{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("predicate is not a SLSA verification summary v1: %w", err)
	}
	switch {
	case p.GetVerifier().GetId() == "":
		return nil, errors.New("no verifier.id")
	case p.GetTimeVerified() == nil:
		return nil, errors.New("no timeVerified")
	case p.GetTimeVerified().CheckValid() != nil:
		return nil, fmt.Errorf("timeVerified: %w", p.GetTimeVerified().CheckValid())
	case p.GetResourceUri() == "":
		return nil, errors.New("no resourceUri")
	case p.GetPolicy().GetUri() == "":
		return nil, errors.New("no policy.uri")
	}
	switch p.GetVerificationResult() {
	case ResultPassed, ResultFailed:
	default:
		return nil, fmt.Errorf("verificationResult %q: want PASSED or FAILED", p.GetVerificationResult())
	}
	for i, in := range p.GetInputAttestations() {
		if !digestRE().MatchString("sha256:" + in.GetDigest()["sha256"]) {
			return nil, fmt.Errorf("inputAttestations[%d] has no sha256 digest", i)
		}
	}
	return p, nil
}

// subjectContract is the contract digest annotated on the subject with digest want.
func subjectContract(st *intoto.Statement, want string) string {
	return subjectAnnotation(st, want, AnnotationContract)
}

// subjectAnnotation is annotation key of the subject with digest want, or "".
func subjectAnnotation(st *intoto.Statement, want, key string) string {
	hex := strings.TrimPrefix(want, "sha256:")
	for _, s := range st.GetSubject() {
		if s.GetDigest()["sha256"] == hex {
			return s.GetAnnotations().GetFields()[key].GetStringValue()
		}
	}
	return ""
}

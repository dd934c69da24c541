package provenance

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// PredicateDeliveryReceipt is the predicateType of a delivery receipt: what Foundry
// observed when it delivered a product's release to a destination (spec/provenance.md §5c).
const PredicateDeliveryReceipt = "https://foundry.dev/delivery-receipt/v1"

// Subject names of a delivery receipt.
const (
	ReceiptSubjectRelease  = "release"  // the release manifest (release.json), by the digest of its bytes
	ReceiptSubjectArtifact = "artifact" // the delivered files, by tree digest
	ReceiptSubjectManifest = "manifest" // for an OCI destination, the release's OCI manifest
)

// Delivery is what the engine observed of one delivery, from which NewDeliveryReceipt
// mints the receipt.
type Delivery struct {
	Project  string
	Product  string // its address, product.P
	Revision string // the product's definition digest
	Source   string // the digest of the plan the release was made from
	Release  string // the digest of the release manifest's bytes
	Artifact string // the tree digest of the delivered files
	Manifest string // the OCI manifest digest, for an oci-layout destination; else ""
	// Destination is where it was delivered ("dir:/srv/releases"), Location where the
	// release is there ("dir:/srv/releases/<hex>", "oci-layout:/srv/oci@sha256:…").
	Destination, Location string
	// Acceptance are the envelopes of the product's checks, by check address: each must
	// verify with one of Keys.
	Acceptance []Attestation
	Keys       []*Verifier
	// DeliveredOn is when the release was committed at the destination.
	DeliveredOn time.Time
}

// Receipt is a parsed delivery receipt predicate. Get one from ParseDeliveryReceipt, only
// for a verified statement.
type Receipt struct {
	Project     string     `json:"project"`
	Product     string     `json:"product"`
	Revision    string     `json:"revision"`
	Source      string     `json:"source"`
	Release     string     `json:"release"`
	Artifact    string     `json:"artifact"`
	Manifest    string     `json:"manifest,omitempty"`
	Destination string     `json:"destination"`
	Location    string     `json:"location"`
	Acceptance  []Evidence `json:"acceptance"`
	DeliveredOn string     `json:"deliveredOn"`
}

// Evidence is one acceptance envelope a receipt relies on: the check it is of, the
// envelope's digest (EnvelopeDigest) and its statement's type.
type Evidence struct {
	Name          string `json:"name"`
	Digest        string `json:"digest"`
	PredicateType string `json:"predicateType"`
}

// NewDeliveryReceipt mints the receipt of a delivery. It refuses a delivery without
// acceptance evidence, and unless every acceptance envelope is a signed in-toto statement
// that verifies with one of d.Keys: a check's provenance, or a passing test result of the
// product's acceptance bound to this delivery (AcceptanceOf). A receipt names only
// evidence that exists and is about what it delivered.
func NewDeliveryReceipt(d *Delivery) (*Statement, error) {
	if d == nil {
		return nil, errors.New("delivery receipt: nil delivery")
	}
	if d.Project == "" || !strings.HasPrefix(d.Product, "product.") {
		return nil, fmt.Errorf("delivery receipt: project %q and product %q are required", d.Project, d.Product)
	}
	for what, dg := range map[string]string{"revision": d.Revision, "source": d.Source, "release": d.Release, "artifact": d.Artifact} {
		if !digestRE().MatchString(dg) {
			return nil, fmt.Errorf("delivery receipt: %s %q is not sha256:<64 hex>", what, dg)
		}
	}
	if d.Manifest != "" && !digestRE().MatchString(d.Manifest) {
		return nil, fmt.Errorf("delivery receipt: manifest %q is not sha256:<64 hex>", d.Manifest)
	}
	if d.Destination == "" || d.Location == "" {
		return nil, errors.New("delivery receipt: destination and location are required")
	}
	if d.DeliveredOn.IsZero() {
		return nil, errors.New("delivery receipt: the time of delivery is required")
	}
	var keys []signature.Verifier
	for _, k := range d.Keys {
		if k == nil || k.v == nil {
			return nil, errors.New("delivery receipt: nil key")
		}
		keys = append(keys, k.v)
	}
	if len(d.Acceptance) == 0 {
		return nil, errNoAcceptance
	}
	if len(keys) == 0 {
		return nil, errors.New("delivery receipt: no keys to verify the acceptance evidence with")
	}
	rc := Receipt{Project: d.Project, Product: d.Product, Revision: d.Revision, Source: d.Source, Release: d.Release,
		Artifact: d.Artifact, Manifest: d.Manifest, Destination: d.Destination, Location: d.Location,
		Acceptance: []Evidence{}, DeliveredOn: d.DeliveredOn.UTC().Format(time.RFC3339Nano)}
	for _, a := range d.Acceptance {
		st, err := openVerified(a.Envelope, keys)
		if err != nil {
			return nil, fmt.Errorf("delivery receipt: acceptance evidence of %s: %w", a.Source, err)
		}
		switch t := st.GetPredicateType(); t {
		case PredicateSLSAProvenance:
		case PredicateTestResult:
			tr, err := ParseTestResult(st)
			if err != nil || !tr.Passed() {
				return nil, fmt.Errorf("delivery receipt: acceptance evidence of %s is not a passing test result", a.Source)
			}
			if err := AcceptanceOf(tr, d.Product, d.Revision, d.Artifact); err != nil {
				return nil, fmt.Errorf("delivery receipt: acceptance evidence of %s: %w", a.Source, err)
			}
		default:
			return nil, fmt.Errorf("delivery receipt: acceptance evidence of %s is a %s, not provenance or a test result", a.Source, t)
		}
		rc.Acceptance = append(rc.Acceptance, Evidence{Name: a.Source, Digest: EnvelopeDigest(a.Envelope), PredicateType: st.GetPredicateType()})
	}
	sort.Slice(rc.Acceptance, func(i, j int) bool {
		a, b := rc.Acceptance[i], rc.Acceptance[j]
		return a.Name < b.Name || (a.Name == b.Name && a.Digest < b.Digest)
	})
	subjects := []Artifact{{Name: ReceiptSubjectRelease, Digest: d.Release}, {Name: ReceiptSubjectArtifact, Digest: d.Artifact}}
	if d.Manifest != "" {
		subjects = append(subjects, Artifact{Name: ReceiptSubjectManifest, Digest: d.Manifest, MediaType: "application/vnd.oci.image.manifest.v1+json"})
	}
	subj, err := artifactRDs(subjects, "subject")
	if err != nil {
		return nil, fmt.Errorf("delivery receipt: %w", err)
	}
	pred, err := toStruct(rc)
	if err != nil {
		return nil, fmt.Errorf("delivery receipt: %w", err)
	}
	st := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subj, PredicateType: PredicateDeliveryReceipt, Predicate: pred}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("delivery receipt: %w", err)
	}
	return &Statement{st: st}, nil
}

// errNoAcceptance refuses a delivery, or a receipt, that names no acceptance evidence: a
// product is delivered only after its acceptance passed.
var errNoAcceptance = errors.New("delivery receipt: no acceptance evidence: a product is delivered only after its acceptance (a check or an accept block) passed")

// AcceptanceOf checks that tr, a test result a delivery names as acceptance evidence, is
// about that delivery (spec/provenance.md §5c): a result of suite acceptance, of product at
// revision (its contract descriptor names the product and its definition digest), whose
// only subject is artifact — the tree its acceptance ran is the tree delivered. A test
// result of a capability's suites, or of another product, revision or tree, is not.
func AcceptanceOf(tr *TestResult, product, revision, artifact string) error {
	switch {
	case tr.Suite != SuiteAcceptance:
		return fmt.Errorf("a test result of suite %q, not a product's acceptance", tr.Suite)
	case tr.Capability != product || tr.ContractDigest != revision:
		return fmt.Errorf("the acceptance of %s at %s, not of %s at %s", tr.Capability, tr.ContractDigest, product, revision)
	case len(tr.Subjects) != 1 || tr.Subjects[0] != artifact:
		return fmt.Errorf("the acceptance ran on %s, but the delivered artifact is %s: a release holds the files its acceptance ran on", strings.Join(tr.Subjects, ", "), artifact)
	}
	return nil
}

// ParseDeliveryReceipt decodes a statement's predicate as a delivery receipt and checks
// that it is whole: every digest well formed, a destination and location, the release and
// artifact named as subjects with the digests the predicate gives. Call it only on a
// verified statement.
func ParseDeliveryReceipt(st *intoto.Statement) (*Receipt, error) {
	if st.GetPredicateType() != PredicateDeliveryReceipt {
		return nil, fmt.Errorf("predicateType %q, want %q", st.GetPredicateType(), PredicateDeliveryReceipt)
	}
	b, err := protojson.Marshal(structOrEmpty(st.GetPredicate()))
	if err != nil {
		return nil, err
	}
	var rc Receipt
	if err := json.Unmarshal(b, &rc); err != nil {
		return nil, fmt.Errorf("delivery receipt: %w", err)
	}
	for what, dg := range map[string]string{"revision": rc.Revision, "source": rc.Source, "release": rc.Release, "artifact": rc.Artifact} {
		if !digestRE().MatchString(dg) {
			return nil, fmt.Errorf("delivery receipt: %s %q is not sha256:<64 hex>", what, dg)
		}
	}
	if rc.Project == "" || rc.Product == "" || rc.Destination == "" || rc.Location == "" {
		return nil, errors.New("delivery receipt: project, product, destination and location are required")
	}
	if _, err := time.Parse(time.RFC3339Nano, rc.DeliveredOn); err != nil {
		return nil, fmt.Errorf("delivery receipt: deliveredOn: %w", err)
	}
	if len(rc.Acceptance) == 0 {
		return nil, errNoAcceptance
	}
	for _, e := range rc.Acceptance {
		if e.Name == "" || !digestRE().MatchString(e.Digest) {
			return nil, fmt.Errorf("delivery receipt: acceptance evidence %q with digest %q", e.Name, e.Digest)
		}
	}
	named := map[string]string{}
	for _, s := range st.GetSubject() {
		named[s.GetName()] = "sha256:" + s.GetDigest()["sha256"]
	}
	if named[ReceiptSubjectRelease] != rc.Release || named[ReceiptSubjectArtifact] != rc.Artifact {
		return nil, errors.New("delivery receipt: its subjects are not the release and artifact its predicate names")
	}
	if rc.Manifest != "" && named[ReceiptSubjectManifest] != rc.Manifest {
		return nil, errors.New("delivery receipt: its subjects do not name the manifest its predicate names")
	}
	return &rc, nil
}

func structOrEmpty(s *structpb.Struct) *structpb.Struct {
	if s == nil {
		return &structpb.Struct{}
	}
	return s
}

// receipt checks a delivery receipt found for want: the predicate (ParseDeliveryReceipt);
// that want is the artifact it delivered; for a subject given with the release manifest it
// was found through (Subject.Manifest), that the receipt names that release; and every
// acceptance envelope it lists, found by envelope digest and verified (signature,
// statement, and provenance's builder or a test result's evaluator; their own
// dependencies are not followed: the receipt is about the delivered artifact).
func (v *verifier) receipt(r *AttestationReport, st *intoto.Statement, want string, depth int) {
	rc, err := ParseDeliveryReceipt(st)
	if err != nil {
		r.fail("predicate", CodePredicate, "%v", err)
		return
	}
	r.pass("predicate", "delivery receipt v1: %s of %s delivered to %s at %s", rc.Product, rc.Project, rc.Destination, rc.Location)
	if want != rc.Artifact && want != rc.Release {
		r.fail("release", CodeManifest, "the receipt delivered artifact %s (release %s), not %s", rc.Artifact, rc.Release, want)
		return
	}
	if b, ok := v.bind[want]; ok && depth == 0 && b.Manifest != "" {
		if rc.Release != b.Manifest {
			r.fail("release", CodeManifest, "the receipt is for release %s, not the release manifest given (%s)", rc.Release, b.Manifest)
			return
		}
		r.pass("release", "release %s with artifact %s", rc.Release, rc.Artifact)
	}
	var bad []string
	code := CodeInputRefused
	for _, e := range rc.Acceptance {
		att, found, err := v.findEnvelope(e.Digest)
		var ir *AttestationReport
		switch {
		case err != nil:
			ir = &AttestationReport{Source: e.Name, Digest: e.Digest}
			ir.fail("input", CodeSourceError, "looking up envelope %s: %v", e.Digest, err)
		case !found:
			ir = &AttestationReport{Source: e.Name, Digest: e.Digest}
			ir.fail("input", CodeInputMissing, "no envelope with digest %s was found (tampered, substituted or not stored)", e.Digest)
			code = CodeInputMissing
		default:
			ir = v.acceptanceInput(att, e, rc)
		}
		r.Inputs = append(r.Inputs, ir)
		if !ir.OK {
			bad = append(bad, e.Name+": "+ir.refusal(""))
		}
	}
	if len(bad) > 0 {
		r.fail("acceptance", code, "%d of %d acceptance envelope(s) missing or refused: %s", len(bad), len(rc.Acceptance), strings.Join(firstN(bad, maxReasonsInTypeDetail), "; "))
		return
	}
	r.pass("acceptance", "%d acceptance envelope(s) found by envelope digest and verified", len(rc.Acceptance))
	r.OK = true
}

// acceptanceInput verifies one acceptance envelope of receipt rc: a test result must also
// be the acceptance of the delivery rc records (AcceptanceOf).
func (v *verifier) acceptanceInput(att Attestation, e Evidence, rc *Receipt) *AttestationReport {
	r, st := v.open(att, e.Digest)
	if st == nil {
		return r
	}
	if r.PredicateType != e.PredicateType {
		r.fail("input", CodeInputRefused, "the receipt lists a %s, the envelope holds a %s", e.PredicateType, r.PredicateType)
		return r
	}
	switch r.PredicateType {
	case PredicateSLSAProvenance:
		v.provenanceOf(r, st, 0, false)
	case PredicateTestResult:
		if tr := v.testResult(r, st); tr != nil && !tr.Passed() {
			r.OK = false
			r.fail("result", CodeResult, "the test result says %s: not evidence of acceptance", tr.Result)
		} else if tr != nil {
			if err := AcceptanceOf(tr, rc.Product, rc.Revision, rc.Artifact); err != nil {
				r.OK = false
				r.fail("acceptance", CodeSubject, "not evidence of this delivery: %v", err)
			} else {
				r.pass("acceptance", "the acceptance of %s at %s, on the delivered artifact %s", rc.Product, rc.Revision, rc.Artifact)
			}
		}
	default:
		r.fail("input", CodeInputRefused, "predicateType %s is not acceptance evidence", r.PredicateType)
	}
	return r
}

package provenance

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	testresult "github.com/in-toto/attestation/go/predicates/test_result/v0"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// PredicateTestResult is the predicateType of one suite run (in-toto Test Result v0.1).
const PredicateTestResult = "https://in-toto.io/attestation/test-result/v0.1"

// Test results, as the test-result predicate spells them. Foundry writes only PASSED and
// FAILED; WARNED is never derived from a Foundry evaluation.
const (
	ResultPassed = "PASSED"
	ResultFailed = "FAILED"
	resultWarned = "WARNED"
)

// Suites of a capability (spec/capability.md §3): dev and repair are visible to builders,
// sealed is the evaluator's only. SuiteAcceptance is a product's acceptance cases, run
// through the interface its user will use (spec/provenance.md): its contract descriptor
// names the product and its node digest.
const (
	SuiteDev        = "dev"
	SuiteRepair     = "repair"
	SuiteSealed     = "sealed"
	SuiteAcceptance = "acceptance"
)

// EvaluatorIDPrefix starts every Foundry evaluator id:
// EvaluatorIDPrefix + "<executor>@v1?isolation=<isolation>".
const EvaluatorIDPrefix = "https://foundry.dev/evaluator/"

// Roles of the configuration descriptors in a test result (annotation AnnotationRole).
const (
	RoleContract      = "contract"      // the capability contract, by its canonical digest
	RoleSuite         = "suite"         // the suite that was run (name = dev|repair|sealed)
	RoleEvaluator     = "evaluator"     // the evaluator identity (uri), with the run's times
	RoleConfiguration = "configuration" // anything else the run used, by digest
	// RoleDisclosed marks a sealed case (by its content digest) that this run showed to a
	// builder as a counterexample: from then on it is disclosed, and leaves the sealed set.
	RoleDisclosed = "disclosed"
)

// Annotation keys on the evaluator descriptor of a test result.
const (
	AnnotationStartedOn  = "foundry_startedOn"
	AnnotationFinishedOn = "foundry_finishedOn"
)

// validCaseName: 1 to 256 characters (an invalid UTF-8 byte counts as one), none of them a
// control character. It is what the regular expression ^[^\x00-\x1f\x7f]{1,256}$ accepts,
// written out because compiling that expression in a package variable would cost every
// foundry process at start.
func validCaseName(s string) bool {
	n := 0
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
		n++
	}
	return n >= 1 && n <= 256
}

// EvaluatorID is the evaluator identity for an evaluator whose cases ran under the given
// executor and isolation, e.g. "https://foundry.dev/evaluator/containerd@v1?isolation=container".
// Like BuilderID, each mode is its own id: an unsandboxed evaluation never shares an id with
// a sandboxed one.
func EvaluatorID(executor, isolation string) (string, error) {
	b, err := BuilderID(executor, isolation)
	if err != nil {
		return "", err
	}
	return EvaluatorIDPrefix + strings.TrimPrefix(b, BuilderIDPrefix), nil
}

// DefaultEvaluators is the evaluator allowlist used when a Policy (or an Admission) names
// none: Foundry's evaluator on the sandboxed executors.
func DefaultEvaluators() []string {
	a, _ := EvaluatorID("containerd", IsolationContainer)
	b, _ := EvaluatorID("runc", IsolationContainer)
	return []string{a, b}
}

// Evaluation is what Foundry's evaluator observed while running one suite against one
// candidate. The evaluator fills it from its own observations: which cases it ran and
// whether each output matched the case's expectation under the contract's equivalence. It
// deliberately has no field for an overall result: NewTestResult derives PASSED or FAILED
// from the cases.
type Evaluation struct {
	// Capability is the capability's name, e.g. "int-sort" (the subject's name).
	Capability string
	// ContractDigest is the digest of the canonical contract ("sha256:<hex>").
	ContractDigest string
	// Candidate is the digest of what was evaluated: the candidate artifact's tree or
	// manifest digest ("sha256:<hex>"). It is the statement's subject.
	Candidate string
	// Suite is SuiteDev, SuiteRepair or SuiteSealed; SuiteDigest the digest of the suite's
	// cases as run ("sha256:<hex>").
	Suite       string
	SuiteDigest string
	// Evaluator is the evaluator identity, an absolute URI (EvaluatorID).
	Evaluator string
	// Cases are the cases run, each with the evaluator's observation. Case names are
	// published in the statement (passedTests/failedTests): they must not reveal a sealed
	// case's content. Reasons and counterexamples are deliberately not recorded here.
	Cases []CaseResult
	// StartedOn and FinishedOn bound the suite run.
	StartedOn  time.Time
	FinishedOn time.Time
	// Configuration is anything else the run used, by digest (the evaluator's image, the
	// case runner), recorded with role "configuration".
	Configuration []Dependency
	// URL, optional, is where the run's results are kept (the test-result "url").
	URL string
	// Disclosed are the failed cases this run showed to a builder as counterexamples, by
	// name (for a sealed suite, a case's name is its content digest). Each must be a failed
	// case of the run.
	Disclosed []string
}

// CaseResult is the evaluator's observation of one case.
type CaseResult struct {
	Name string // the case's name within its suite, unique
	Pass bool   // the candidate's result matched the case's expectation
}

// NewTestResult mints the in-toto Test Result v0.1 statement for one suite run. The result
// is PASSED only if there was at least one case and every case passed; it is derived here
// and cannot be supplied. An incomplete or malformed Evaluation is refused.
func NewTestResult(e *Evaluation) (*Statement, error) {
	if e == nil {
		return nil, errors.New("test result: nil evaluation")
	}
	if e.Capability == "" {
		return nil, errors.New("test result: no capability name")
	}
	if !digestRE().MatchString(e.ContractDigest) {
		return nil, fmt.Errorf("test result: contract digest %q is not sha256:<64 hex>", e.ContractDigest)
	}
	cand, err := digestSet(e.Candidate)
	if err != nil {
		return nil, fmt.Errorf("test result: candidate: %w", err)
	}
	if !knownSuite(e.Suite) {
		return nil, fmt.Errorf("test result: suite %q: want %s, %s, %s or %s", e.Suite, SuiteDev, SuiteRepair, SuiteSealed, SuiteAcceptance)
	}
	if err := checkURI(e.Evaluator); err != nil {
		return nil, fmt.Errorf("test result: evaluator: %w", err)
	}
	if e.StartedOn.IsZero() || e.FinishedOn.IsZero() {
		return nil, errors.New("test result: start and finish times are required")
	}
	if e.FinishedOn.Before(e.StartedOn) {
		return nil, fmt.Errorf("test result: finished %s before it started %s", e.FinishedOn.Format(time.RFC3339Nano), e.StartedOn.Format(time.RFC3339Nano))
	}
	if len(e.Cases) == 0 {
		return nil, errors.New("test result: no cases: a suite run with nothing in it is not an evaluation")
	}
	var passed, failed []string
	seen := map[string]bool{}
	for i, c := range e.Cases {
		if !validCaseName(c.Name) {
			return nil, fmt.Errorf("test result: case %d: name %q is empty, too long or has control characters", i, c.Name)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("test result: case %q listed twice", c.Name)
		}
		seen[c.Name] = true
		if c.Pass {
			passed = append(passed, c.Name)
		} else {
			failed = append(failed, c.Name)
		}
	}
	sort.Strings(passed)
	sort.Strings(failed)
	result := ResultPassed
	if len(failed) > 0 {
		result = ResultFailed
	}

	contract, err := roleRD(RoleContract, e.Capability, "", e.ContractDigest, nil)
	if err != nil {
		return nil, fmt.Errorf("test result: contract: %w", err)
	}
	suite, err := roleRD(RoleSuite, e.Suite, "", e.SuiteDigest, nil)
	if err != nil {
		return nil, fmt.Errorf("test result: suite: %w", err)
	}
	evaluator, err := roleRD(RoleEvaluator, "", e.Evaluator, "", map[string]any{
		AnnotationStartedOn:  e.StartedOn.UTC().Format(time.RFC3339Nano),
		AnnotationFinishedOn: e.FinishedOn.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, fmt.Errorf("test result: evaluator: %w", err)
	}
	config := []*intoto.ResourceDescriptor{contract, suite, evaluator}
	extra := make([]*intoto.ResourceDescriptor, 0, len(e.Configuration))
	for i, d := range e.Configuration {
		rd, err := dependencyRD(d, RoleConfiguration)
		if err != nil {
			return nil, fmt.Errorf("test result: configuration %d (%s): %w", i, d.Name, err)
		}
		extra = append(extra, rd)
	}
	sort.SliceStable(extra, func(i, j int) bool {
		return extra[i].GetName()+"\x00"+extra[i].GetUri() < extra[j].GetName()+"\x00"+extra[j].GetUri()
	})
	config = append(config, extra...)
	disclosed := slices.Clone(e.Disclosed)
	sort.Strings(disclosed)
	for _, name := range slices.Compact(disclosed) {
		if !slices.Contains(failed, name) {
			return nil, fmt.Errorf("test result: disclosed case %q is not a failed case of the run", name)
		}
		rd, err := roleRD(RoleDisclosed, name, "", "", nil)
		if err != nil {
			return nil, fmt.Errorf("test result: disclosed: %w", err)
		}
		config = append(config, rd)
	}
	if e.URL != "" {
		if err := checkURI(e.URL); err != nil {
			return nil, fmt.Errorf("test result: url: %w", err)
		}
	}

	pred := &testresult.TestResult{
		Result:        result,
		Configuration: config,
		Url:           e.URL,
		PassedTests:   passed,
		FailedTests:   failed,
	}
	predStruct, err := predicateStruct(pred)
	if err != nil {
		return nil, fmt.Errorf("test result: %w", err)
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: e.Capability, Digest: cand}},
		PredicateType: PredicateTestResult,
		Predicate:     predStruct,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("test result: %w", err)
	}
	return &Statement{st: st}, nil
}

func knownSuite(s string) bool {
	switch s {
	case SuiteDev, SuiteRepair, SuiteSealed, SuiteAcceptance:
		return true
	}
	return false
}

// roleRD is a configuration descriptor with annotation foundry_role = role.
func roleRD(role, name, uri, digest string, ann map[string]any) (*intoto.ResourceDescriptor, error) {
	rd := &intoto.ResourceDescriptor{Name: name, Uri: uri}
	if digest != "" || role == RoleContract || role == RoleSuite {
		ds, err := digestSet(digest)
		if err != nil {
			return nil, err
		}
		rd.Digest = ds
	}
	m := map[string]any{AnnotationRole: role}
	for k, v := range ann {
		m[k] = v
	}
	as, err := structpb.NewStruct(m)
	if err != nil {
		return nil, err
	}
	rd.Annotations = as
	return rd, nil
}

// checkURI accepts an absolute URI with a scheme and something after it.
func checkURI(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme == "" || (u.Opaque == "" && u.Host == "" && u.Path == "") {
		return fmt.Errorf("%q is not an absolute URI", s)
	}
	return nil
}

// predicateStruct turns a typed predicate into the statement's Struct (protojson round trip).
func predicateStruct(m proto.Message) (*structpb.Struct, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding predicate: %w", err)
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("encoding predicate: %w", err)
	}
	return s, nil
}

// TestResult is a parsed Foundry test result: the predicate and the Foundry facts read from
// its configuration. Get one from ParseTestResult, only for a verified statement.
type TestResult struct {
	Predicate      *testresult.TestResult
	Result         string   // PASSED or FAILED (WARNED is refused)
	Capability     string   // name of the contract descriptor
	ContractDigest string   // "sha256:<hex>"
	Suite          string   // dev, repair or sealed
	SuiteDigest    string   // "sha256:<hex>"
	Evaluator      string   // the evaluator identity
	Subjects       []string // the subjects' sha256 digests ("sha256:<hex>")
	// Disclosed are the cases the run showed to a builder (RoleDisclosed), by name.
	Disclosed []string
	// Configuration maps each configuration descriptor's name to its digest.
	Configuration map[string]string
}

// Passed reports whether this is a passing run: result PASSED, no failed test, at least one
// passed test. A statement that says PASSED while listing failures is inconsistent and does
// not count as a pass.
func (t *TestResult) Passed() bool {
	p := t.Predicate
	return t.Result == ResultPassed && len(p.GetFailedTests()) == 0 && len(p.GetWarnedTests()) == 0 && len(p.GetPassedTests()) > 0
}

// ParseTestResult decodes a test-result statement and reads Foundry's configuration
// descriptors: exactly one each of contract, suite and evaluator. Call it only on a verified
// statement.
func ParseTestResult(st *intoto.Statement) (*TestResult, error) {
	if st.GetPredicateType() != PredicateTestResult {
		return nil, fmt.Errorf("predicateType %q, want %q", st.GetPredicateType(), PredicateTestResult)
	}
	b, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	p := &testresult.TestResult{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("predicate is not a test result v0.1: %w", err)
	}
	t := &TestResult{Predicate: p, Result: p.GetResult()}
	switch t.Result {
	case ResultPassed, ResultFailed:
	case resultWarned:
		return nil, errors.New("result WARNED: Foundry evaluations pass or fail")
	default:
		return nil, fmt.Errorf("result %q: want PASSED or FAILED", t.Result)
	}
	if len(p.GetConfiguration()) == 0 {
		return nil, errors.New("no configuration (required by the test-result predicate)")
	}
	var nContract, nSuite, nEval int
	for i, rd := range p.GetConfiguration() {
		if err := rd.Validate(); err != nil {
			return nil, fmt.Errorf("configuration %d: %w", i, err)
		}
		role := rd.GetAnnotations().GetFields()[AnnotationRole].GetStringValue()
		switch role {
		case RoleContract:
			nContract++
			t.Capability, t.ContractDigest = rd.GetName(), sha256Of(rd)
		case RoleSuite:
			nSuite++
			t.Suite, t.SuiteDigest = rd.GetName(), sha256Of(rd)
		case RoleEvaluator:
			nEval++
			t.Evaluator = rd.GetUri()
		case RoleDisclosed:
			t.Disclosed = append(t.Disclosed, rd.GetName())
		case RoleConfiguration:
			if t.Configuration == nil {
				t.Configuration = map[string]string{}
			}
			t.Configuration[rd.GetName()] = sha256Of(rd)
		}
	}
	if nContract != 1 || nSuite != 1 || nEval != 1 {
		return nil, fmt.Errorf("configuration has %d contract, %d suite and %d evaluator descriptor(s); want one of each", nContract, nSuite, nEval)
	}
	if t.Capability == "" || t.ContractDigest == "" {
		return nil, errors.New("contract descriptor needs a name and a sha256 digest")
	}
	if !knownSuite(t.Suite) {
		return nil, fmt.Errorf("suite %q: want %s, %s, %s or %s", t.Suite, SuiteDev, SuiteRepair, SuiteSealed, SuiteAcceptance)
	}
	if t.SuiteDigest == "" {
		return nil, errors.New("suite descriptor has no sha256 digest")
	}
	if checkURI(t.Evaluator) != nil {
		return nil, fmt.Errorf("evaluator %q is not an absolute URI", t.Evaluator)
	}
	if t.Result == ResultPassed && !t.Passed() {
		return nil, fmt.Errorf("result PASSED with %d failed, %d warned and %d passed test(s)",
			len(p.GetFailedTests()), len(p.GetWarnedTests()), len(p.GetPassedTests()))
	}
	if t.Result == ResultFailed && len(p.GetFailedTests()) == 0 {
		return nil, errors.New("result FAILED with no failed test")
	}
	for _, s := range st.GetSubject() {
		if h, ok := s.GetDigest()["sha256"]; ok {
			t.Subjects = append(t.Subjects, "sha256:"+h)
		}
	}
	return t, nil
}

// sha256Of is "sha256:<hex>" of a descriptor's sha256 digest, or "" if it has none valid.
func sha256Of(rd *intoto.ResourceDescriptor) string {
	h, ok := rd.GetDigest()["sha256"]
	if !ok || !digestRE().MatchString("sha256:"+h) {
		return ""
	}
	return "sha256:" + h
}

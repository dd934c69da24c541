package provenance

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sigstore/sigstore/pkg/signature"
)

// ExecutionClaim is what a verified step provenance says about one execution, read from the
// signed bytes only: what a shared action-cache record must agree with before it is used.
type ExecutionClaim struct {
	CacheKey  string            // buildDefinition.internalParameters.cacheKey
	BuilderID string            // runDetails.builder.id
	Subjects  map[string]string // subject name → "sha256:<hex>"
	Inputs    map[string]string // buildDefinition.resolvedDependencies: name → URI
}

// OpenExecution verifies envelope as a step's SLSA provenance — strict DSSE, the in-toto
// payload type, a signature by one of keys — and returns its claim. A builder outside
// DefaultBuilders (an unsandboxed execution) is refused.
func OpenExecution(envelope []byte, keys []*Verifier) (*ExecutionClaim, error) {
	var vs []signature.Verifier
	for _, k := range keys {
		if k == nil || k.v == nil {
			return nil, errors.New("execution: nil key")
		}
		vs = append(vs, k.v)
	}
	if len(vs) == 0 {
		return nil, errors.New("execution: no keys to verify the provenance with")
	}
	st, err := openVerified(envelope, vs)
	if err != nil {
		return nil, fmt.Errorf("execution: %w", err)
	}
	if st.GetPredicateType() != PredicateSLSAProvenance {
		return nil, fmt.Errorf("execution: predicateType %q, want %q", st.GetPredicateType(), PredicateSLSAProvenance)
	}
	p, err := ParseProvenance(st)
	if err != nil {
		return nil, fmt.Errorf("execution: %w", err)
	}
	c := &ExecutionClaim{BuilderID: p.GetRunDetails().GetBuilder().GetId(), Subjects: map[string]string{}, Inputs: map[string]string{}}
	if !slices.Contains(DefaultBuilders(), c.BuilderID) {
		return nil, fmt.Errorf("execution: builder %q is not a sandboxed executor", c.BuilderID)
	}
	if v := p.GetBuildDefinition().GetInternalParameters().GetFields()["cacheKey"]; v != nil {
		c.CacheKey = v.GetStringValue()
	}
	for _, d := range p.GetBuildDefinition().GetResolvedDependencies() {
		c.Inputs[d.GetName()] = d.GetUri()
	}
	for _, s := range st.GetSubject() {
		if _, dup := c.Subjects[s.GetName()]; dup {
			return nil, fmt.Errorf("execution: subject %q named twice", s.GetName())
		}
		c.Subjects[s.GetName()] = "sha256:" + s.GetDigest()["sha256"]
	}
	return c, nil
}

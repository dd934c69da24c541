package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/foundry-build/foundry/engine/digest"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Quarantine says whether digests are quarantined (engine/state implements it).
type Quarantine interface {
	IsQuarantined(ctx context.Context, d digest.Digest) (bool, string, error)
}

// Inspection is what the registry holds for one capability contract.
type Inspection struct {
	Manifest    digest.Digest      `json:"manifest,omitempty"` // empty: nothing published under the contract tag
	Tree        digest.Digest      `json:"tree,omitempty"`
	Ref         string             `json:"ref,omitempty"`
	Quarantined string             `json:"quarantined,omitempty"` // the reason, when quarantined
	Verified    bool               `json:"verified"`              // its verification summary chain verifies
	Report      *provenance.Report `json:"report,omitempty"`
}

// InspectAdmitted reads what registry s holds under capability node n's contract tag
// (resolved to a digest once, here), whether it is quarantined, and whether its
// verification summary — and through it the sealed test result and the provenance —
// verifies with keys.
func InspectAdmitted(ctx context.Context, s registry.Store, keys []*provenance.Verifier, q Quarantine, n *Node) (*Inspection, error) {
	m, err := s.Resolve(ctx, ContractTag(n.Digest))
	if errors.Is(err, registry.ErrNotFound) {
		return &Inspection{}, nil
	}
	if err != nil {
		return nil, err
	}
	in := &Inspection{Manifest: m, Ref: s.String() + "@" + string(m)}
	raw, _, err := s.Manifest(ctx, m)
	if err != nil {
		return nil, err
	}
	man, err := registry.ParseCapability(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m, err)
	}
	in.Tree = digest.Digest(man.Annotations[registry.AnnotationTree])
	for _, d := range []digest.Digest{m, in.Tree} {
		bad, reason, err := q.IsQuarantined(ctx, d)
		if err != nil {
			return nil, err
		}
		if bad {
			in.Quarantined = reason
			return in, nil
		}
	}
	if len(keys) == 0 {
		return in, nil
	}
	atts, err := registry.Referrers(ctx, s, m)
	if err != nil {
		return nil, err
	}
	var given []provenance.Attestation
	for _, a := range atts {
		given = append(given, provenance.Attestation{Source: s.String() + "@" + string(a.Digest), Envelope: a.Envelope})
	}
	rep, err := provenance.Verify(ctx, provenance.Options{
		Keys:         keys,
		Policy:       provenance.Policy{PredicateTypes: []string{provenance.PredicateVSA}},
		Source:       attSet(given),
		Attestations: given,
	}, provenance.Subject{Name: n.Address, Digest: string(in.Tree)})
	if err != nil {
		return nil, err
	}
	in.Verified, in.Report = rep.OK, rep
	return in, nil
}

// LookupAdmitted returns the admitted version of capability node n in registry s, or nil:
// a version is admitted only when it is not quarantined and its verification summary chain
// verifies with keys. A registry tag or a row in the state database alone is never enough.
func LookupAdmitted(ctx context.Context, s registry.Store, keys []*provenance.Verifier, q Quarantine, n *Node) (*Admitted, error) {
	in, err := InspectAdmitted(ctx, s, keys, q, n)
	if err != nil || !in.Verified || in.Quarantined != "" {
		return nil, err
	}
	return &Admitted{Ref: in.Ref, Digest: in.Manifest}, nil
}

// attSet is an AttestationSource over a fixed set of envelopes: lookups by subject digest
// or by envelope digest both return the whole set, and Verify picks what applies.
type attSet []provenance.Attestation

func (a attSet) Lookup(context.Context, string) ([]provenance.Attestation, error) { return a, nil }

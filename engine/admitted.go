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

// LookupAdmitted finds an admitted version of capability node n in registry s: the artifact
// its contract tag names (resolved to a digest once, here), if neither the artifact nor its
// files are quarantined and its verification summary — and through it the sealed test
// result and the provenance — verifies with keys. Anything less is not admitted, whatever a
// registry tag or the state database says: nothing else can make resolution pin it.
func LookupAdmitted(ctx context.Context, s registry.Store, keys []*provenance.Verifier, q Quarantine, n *Node) (*Admitted, error) {
	m, err := s.Resolve(ctx, ContractTag(n.Digest))
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	raw, _, err := s.Manifest(ctx, m)
	if err != nil {
		return nil, err
	}
	man, err := registry.ParseCapability(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m, err)
	}
	tree := digest.Digest(man.Annotations[registry.AnnotationTree])
	for _, d := range []digest.Digest{m, tree} {
		if bad, _, err := q.IsQuarantined(ctx, d); err != nil || bad {
			return nil, err // quarantined: not a candidate for resolution
		}
	}
	if len(keys) == 0 {
		return nil, nil
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
	}, provenance.Subject{Name: n.Address, Digest: string(tree)})
	if err != nil {
		return nil, err
	}
	if !rep.OK {
		return nil, nil // present but not proven: never pinned
	}
	return &Admitted{Ref: s.String() + "@" + string(m), Digest: m}, nil
}

// attSet is an AttestationSource over a fixed set of envelopes: lookups by subject digest
// or by envelope digest both return the whole set, and Verify picks what applies.
type attSet []provenance.Attestation

func (a attSet) Lookup(context.Context, string) ([]provenance.Attestation, error) { return a, nil }

package admit

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// Quarantine says whether digests are quarantined (engine/state implements it).
type Quarantine interface {
	registry.Quarantine
	IsQuarantined(ctx context.Context, d digest.Digest) (bool, string, error)
}

// Admitted is an admitted version of a capability, found in the registry.
type Admitted struct {
	Ref    string        `json:"ref"`    // registry reference pinned by digest
	Digest digest.Digest `json:"digest"` // the capability artifact's manifest digest
	// Tree is the digest of the files, recomputed from the layers when it was judged.
	Tree digest.Digest `json:"tree,omitempty"`
	// Suites are the digests of the sealed suites its verified admissions passed.
	Suites []digest.Digest `json:"sealed_suites,omitempty"`
}

// Inspection is what the registry holds for one capability contract, judged by evidence.
type Inspection struct {
	Manifest    digest.Digest `json:"manifest,omitempty"` // empty: nothing published under the contract tag
	Tree        digest.Digest `json:"tree,omitempty"`     // recomputed from the layers fetched
	Ref         string        `json:"ref,omitempty"`
	Quarantined string        `json:"quarantined,omitempty"` // the reason, when quarantined
	// Verified: a signed verification summary binds this capability's contract digest, the
	// manifest digest and the tree its layers form, and its chain verifies.
	Verified bool `json:"verified"`
	// NotAdmitted says why the version under the contract tag is not admitted for this
	// contract, when it is not.
	NotAdmitted string             `json:"not_admitted,omitempty"`
	Skipped     []registry.Skipped `json:"skipped_referrers,omitempty"`
	Report      *provenance.Report `json:"report,omitempty"`
}

// Inspect reads what registry s holds under capability node n's contract tag
// (resolved to a digest once, here) and judges it as a pull would: the manifest must be a
// capability whose contract is n's, its layers are fetched and the tree they form
// recomputed, and a verification summary signed by one of keys must bind that contract,
// that manifest and that tree, with its chain (sealed test result, provenance) verifying.
// Anything the registry holds that fails this is reported in NotAdmitted, never as an
// error: a tag, a manifest or a referrer an attacker pushed cannot block resolution. The
// error is for what is not the registry's content (a temporary directory, a cancelled ctx).
func Inspect(ctx context.Context, s registry.Store, keys []*provenance.Verifier, q Quarantine, n *graph.Node) (*Inspection, error) {
	m, err := s.Resolve(ctx, ContractTag(n.Digest))
	if errors.Is(err, registry.ErrNotFound) {
		return &Inspection{}, nil
	}
	if err != nil {
		return &Inspection{NotAdmitted: "the registry could not be read: " + err.Error()}, ctx.Err()
	}
	in := &Inspection{Manifest: m, Ref: s.String() + "@" + string(m)}
	if len(keys) == 0 {
		in.NotAdmitted = "no trusted key to verify its evidence with"
		return in, nil
	}
	tmp, err := os.MkdirTemp("", "foundry-inspect-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	pulled, err := registry.Pull(ctx, s, string(m), filepath.Join(tmp, "files"), registry.PullOptions{
		Keys: keys, Quarantine: q, Contract: n.Digest,
		Policy: provenance.Policy{PredicateTypes: []string{provenance.PredicateVSA}},
	})
	if pulled != nil {
		in.Tree, in.Report, in.Skipped = pulled.Tree, pulled.Report, pulled.Skipped
	}
	var qe *registry.QuarantinedError
	switch {
	case errors.As(err, &qe):
		in.Quarantined = qe.Reason
	case err != nil:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		in.NotAdmitted = err.Error()
	default:
		in.Verified = true
	}
	return in, nil
}

// Lookup returns the admitted version of capability node n in registry s, or nil
// and why the registry's version (if any) is not admitted for n's contract. A registry tag,
// an annotation or a row in the state database alone is never enough (Inspect).
func Lookup(ctx context.Context, s registry.Store, keys []*provenance.Verifier, q Quarantine, n *graph.Node) (*Admitted, string, error) {
	in, err := Inspect(ctx, s, keys, q, n)
	switch {
	case err != nil:
		return nil, "", err
	case in.Manifest == "":
		return nil, "", nil
	case in.Quarantined != "":
		return nil, in.Ref + " is quarantined: " + in.Quarantined, nil
	case !in.Verified:
		return nil, in.Ref + " is not admitted for this contract: " + in.NotAdmitted, nil
	}
	adm := &Admitted{Ref: in.Ref, Digest: in.Manifest, Tree: in.Tree}
	for _, d := range in.Report.SealedSuites() {
		adm.Suites = append(adm.Suites, digest.Digest(d))
	}
	return adm, "", nil
}

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// The report's evidence is verified here exactly as `foundry verify -key PUB` verifies it
// (verifySubject, verifySubjects, verifyReleaseDir), with the project's own public key and
// any -trust-key given (reportKeys):
// who signed an envelope is the trusted key its signature verified with (SignedBy), never
// a key id the envelope claims.

// reportEvidence is one signed envelope as the report shows it.
type reportEvidence struct {
	What     string               `json:"what"`     // its predicateType ("" when it could not be read)
	Envelope string               `json:"envelope"` // the digest of its exact bytes
	Verified bool                 `json:"verified"` // it passed every check foundry verify makes of it
	SignedBy []provenance.KeyInfo `json:"signed_by"`
	Why      string               `json:"why,omitempty"` // the first check it failed
}

// verifiedChain is what verifying a release or a published capability says (chainAt):
// whether it verified, why not, and every envelope the verification relied on, each with
// its signers.
type verifiedChain struct {
	Verified bool             `json:"verified"`
	Why      string           `json:"why,omitempty"` // why it does not verify
	Evidence []reportEvidence `json:"evidence"`
}

// deliveryReceipt is a product's delivery in the run, its release verified by its receipt
// (its evidence: the receipt, then the acceptance envelopes it names).
type deliveryReceipt struct {
	Product  string `json:"product"`
	Location string `json:"location"` // the release directory or registry reference
	verifiedChain
}

// evidenceOf is what a verification says of one envelope.
func evidenceOf(a *provenance.AttestationReport) reportEvidence {
	e := reportEvidence{What: a.PredicateType, Envelope: a.Digest, Verified: a.OK, SignedBy: a.SignedBy}
	if e.SignedBy == nil {
		e.SignedBy = []provenance.KeyInfo{}
	}
	for _, c := range a.Checks {
		if !c.OK {
			e.Why = c.Name + ": " + c.Detail
			break
		}
	}
	return e
}

// chainOf is every envelope a verification relied on, in the order it followed them (an
// attestation, then the inputs it lists, then the provenance it looked up), each once; for
// an artifact that did not verify, every candidate, since any may be the one that should
// have passed.
func chainOf(rep *provenance.Report) []reportEvidence {
	out := []reportEvidence{}
	seen := map[string]bool{}
	var walk func(as []*provenance.AttestationReport, all bool)
	walk = func(as []*provenance.AttestationReport, all bool) {
		for _, a := range as {
			if (!a.OK && !all) || seen[a.Digest] {
				continue
			}
			seen[a.Digest] = true
			out = append(out, evidenceOf(a))
			walk(a.Inputs, true)
			if a.Provenance != nil {
				walk(a.Provenance.Attestations, !a.Provenance.OK)
			}
		}
	}
	for _, art := range rep.Artifacts {
		walk(art.Attestations, !art.OK)
	}
	return out
}

// whyNot is the first failed check of a verification that did not pass.
func whyNot(rep *provenance.Report) string {
	for _, art := range rep.Artifacts {
		for _, c := range art.Checks {
			if !c.OK {
				return c.Name + ": " + c.Detail
			}
		}
	}
	return "it did not verify"
}

// reportKeys are the keys the report verifies evidence with: the project's own public key
// and the -trust-key files given (trust), as plan and apply trust what they pull.
func reportKeys(ws *workspace.Workspace, trust []string) ([]*provenance.Verifier, error) {
	return trustedKeys(filepath.Dir(ws.Dir), trust)
}

// receiptsOf verifies the release of every product_delivered event among events by its
// delivery receipt, as `foundry verify -key PUB LOCATION` does: a release directory with
// verifyReleaseDir, a release in a registry through verifySubject.
func receiptsOf(ctx context.Context, keys []*provenance.Verifier, events []state.CapabilityEvent) []deliveryReceipt {
	out := []deliveryReceipt{}
	for _, e := range events {
		if e.Type == "product_delivered" {
			out = append(out, deliveryReceipt{Product: e.Capability, Location: e.Ref, verifiedChain: chainAt(ctx, keys, e.Ref)})
		}
	}
	return out
}

// capabilityChain is a capability the run admitted or pinned, its version verified as
// `foundry verify -key PUB REF` verifies it: the admission summary, the sealed test
// results it names and their provenance, each with the key that signed it.
type capabilityChain struct {
	Capability string `json:"capability"`
	Ref        string `json:"ref"` // the version, as capability_admitted or capability_pinned says
	// How is "admitted" (the run admitted and published it) or "pinned" (the run pulled a
	// version admitted before, perhaps by another project: its key must be trusted).
	How string `json:"how"`
	verifiedChain
}

// chainEvents are the capability events that name a version the run used, and how it got it.
var chainEvents = map[string]string{"capability_admitted": "admitted", "capability_pinned": "pinned"}

// chainsOf verifies the version each capability_admitted or capability_pinned event among
// events names, in the order they came.
func chainsOf(ctx context.Context, keys []*provenance.Verifier, events []state.CapabilityEvent) []capabilityChain {
	out := []capabilityChain{}
	for _, e := range events {
		if how, ok := chainEvents[e.Type]; ok {
			out = append(out, capabilityChain{Capability: e.Capability, Ref: e.Ref, How: how, verifiedChain: chainAt(ctx, keys, e.Ref)})
		}
	}
	return out
}

// chainAt is what verifying the release or published capability at loc with keys says
// (the envelopes in the order chainOf follows them).
func chainAt(ctx context.Context, keys []*provenance.Verifier, loc string) verifiedChain {
	rep, err := verifyRelease(ctx, loc, keys)
	if err != nil {
		return verifiedChain{Why: err.Error(), Evidence: []reportEvidence{}}
	}
	if !rep.OK {
		return verifiedChain{Why: whyNot(rep), Evidence: chainOf(rep)}
	}
	return verifiedChain{Verified: true, Evidence: chainOf(rep)}
}

// verifyRelease verifies the release a delivery wrote at loc (dir:PATH, or a registry
// reference as the delivery reported it), or the capability an admission published at loc
// (a registry reference: its admission summary is then the type required), with keys.
func verifyRelease(ctx context.Context, loc string, keys []*provenance.Verifier) (*provenance.Report, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("the project has no signing key (.foundry/keys/signing.pub) and no -trust-key was given to verify it with")
	}
	if dir, ok := strings.CutPrefix(loc, lang.SchemeDir+":"); ok {
		if !isRelease(dir) {
			return nil, fmt.Errorf("%s is no longer a release (moved or removed?)", dir)
		}
		return verifyReleaseDir(ctx, dir, keys)
	}
	if !isOCIRef(loc) {
		return nil, fmt.Errorf("%s is no longer a release (moved or removed?)", loc)
	}
	opts := provenance.Options{Keys: keys}
	subj, err := verifySubject(ctx, loc, &opts, true, nil)
	if err != nil {
		return nil, err
	}
	return verifySubjects(ctx, opts, []provenance.Subject{subj})
}

// stepEvidence verifies the signed provenance the action cache keeps for each step of the
// run that executed or was cached (by the step's action, its cache key), as `foundry verify
// -key PUB -attestations .foundry/attestations` verifies it for the subject it names: the
// report's "signed by" of each step.
func stepEvidence(ctx context.Context, ws *workspace.Workspace, keys []*provenance.Verifier, steps []state.Node) (map[string][]reportEvidence, error) {
	out := map[string][]reportEvidence{}
	if len(keys) == 0 {
		return out, nil
	}
	var src provenance.AttestationSource
	for _, s := range steps {
		if (s.Status != state.NodeDone && s.Status != state.NodeCached) || s.Action == "" {
			continue
		}
		res, ok, err := ws.Cache.Lookup(ctx, s.Action)
		if err != nil {
			return nil, fmt.Errorf("the evidence of %s: %w", s.Address, err)
		}
		if !ok {
			continue
		}
		for _, d := range res.Attestations {
			env, err := ws.Store.Get(d)
			if err != nil {
				return nil, fmt.Errorf("the evidence of %s: %w", s.Address, err)
			}
			subjects, err := provenance.ClaimedSubjects(env)
			if err != nil || len(subjects) == 0 {
				out[s.Address] = append(out[s.Address], reportEvidence{Envelope: provenance.EnvelopeDigest(env), SignedBy: []provenance.KeyInfo{}, Why: fmt.Sprintf("unreadable statement: %v", err)})
				continue
			}
			if src == nil {
				if src, err = provenance.NewDirSource(ws.AttestationDir()); err != nil {
					return nil, err
				}
			}
			opts := provenance.Options{Keys: keys, Source: src, Attestations: []provenance.Attestation{{Source: s.Address, Envelope: env}}}
			rep, err := verifySubjects(ctx, opts, []provenance.Subject{{Name: s.Address, Digest: subjects[0]}})
			if err != nil {
				return nil, fmt.Errorf("verifying the evidence of %s: %w", s.Address, err)
			}
			// The source may hold other envelopes about the same subject (another run's):
			// the step's own is reported.
			for _, a := range rep.Artifacts[0].Attestations {
				if a.Digest == provenance.EnvelopeDigest(env) {
					out[s.Address] = append(out[s.Address], evidenceOf(a))
					break
				}
			}
		}
	}
	return out, nil
}

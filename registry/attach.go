package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/provenance/dsse"
)

// Attestation attachment (spec/artifact.md §3).
const (
	// ArtifactTypeDSSE is the artifactType of an attestation referrer and the media type of
	// its one layer, the DSSE envelope (the media type cosign uses for the same bytes).
	ArtifactTypeDSSE = "application/vnd.dsse.envelope.v1+json"
	// AnnotationPredicateType names the statement's predicateType on the referrer manifest
	// and on its layer (the annotation docker buildx and oras use).
	AnnotationPredicateType = "in-toto.io/predicate-type"

	// cosign's legacy attachment: layers of the "sha256-<hex>.att" image.
	cosignSignatureAnnotation = "dev.cosignproject.cosign/signature"
	cosignPredicateAnnotation = "predicateType"
	// maxReferrers bounds how many referrers of one subject are read.
	maxReferrers = 1000
)

// Attestation is one DSSE envelope attached to a subject, with its exact stored bytes.
type Attestation struct {
	// Digest is the envelope's digest (provenance.EnvelopeDigest of Envelope).
	Digest digest.Digest `json:"digest"`
	// Manifest is the referrer manifest that carried it ("" for one found only in cosign's
	// .att image).
	Manifest digest.Digest `json:"manifest,omitempty"`
	// PredicateType as annotated: unverified, a hint for listing. Verify reads the
	// signed statement.
	PredicateType string `json:"predicateType"`
	Envelope      []byte `json:"-"`
}

// subjectLocks serializes attaches to one subject of one store within this process; stores
// that can (the layout) also lock across processes.
var subjectLocks sync.Map // store address + "@" + digest → *sync.Mutex

func lockSubject(ctx context.Context, s Store, d digest.Digest) (func(), error) {
	mu, _ := subjectLocks.LoadOrStore(s.String()+"@"+string(d), &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	unlock := mu.(*sync.Mutex).Unlock
	if l, ok := s.(subjectLocker); ok {
		fileUnlock, err := l.lockSubject(ctx, d)
		if err != nil {
			unlock()
			return nil, err
		}
		return func() { fileUnlock(); unlock() }, nil
	}
	return unlock, nil
}

// Attach stores envelope, unchanged, as a referrer of the manifest subject: its own OCI
// manifest (artifactType ArtifactTypeDSSE, the envelope as its only layer, subject set). It
// then adds the envelope to cosign's "sha256-<hex>.att" image, so that `cosign
// verify-attestation` finds it too (see writeCosignAttestations). predicateType
// may be empty (it is then read from the envelope's statement); if given it must match.
// Attaching the same envelope twice changes nothing. Attaches to one subject are
// serialized, so the referrers tag index never loses an entry to a concurrent attach.
func Attach(ctx context.Context, s Store, subject digest.Digest, envelope []byte, predicateType string) (Attestation, error) {
	env, err := dsse.Parse(envelope)
	if err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: %w", subject, err)
	}
	// The statement is read unverified, only to label the referrer; verifiers read the
	// signed bytes themselves.
	st, err := provenance.ParseStatement(env.Payload)
	if err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: %w", subject, err)
	}
	switch pt := st.GetPredicateType(); {
	case predicateType == "":
		predicateType = pt
	case predicateType != pt:
		return Attestation{}, fmt.Errorf("attach to %s: predicate type %q given, but the statement says %q", subject, predicateType, pt)
	}
	unlock, err := lockSubject(ctx, s, subject)
	if err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: %w", subject, err)
	}
	defer unlock()

	subjRaw, subjMT, err := fetchManifest(ctx, s, subject)
	if err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: subject: %w", subject, err)
	}
	if subjMT == "" {
		subjMT = MediaTypeManifest
	}
	envDesc := descriptorOf(ArtifactTypeDSSE, envelope)
	envDesc.Annotations = map[string]string{AnnotationPredicateType: predicateType}
	if err := putBytes(ctx, s, envDesc.Digest, envelope); err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: envelope: %w", subject, err)
	}
	cfg := descriptorOf(MediaTypeEmpty, emptyJSON)
	if err := putBytes(ctx, s, cfg.Digest, emptyJSON); err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: %w", subject, err)
	}
	subj := Descriptor{MediaType: subjMT, Digest: subject, Size: int64(len(subjRaw))}
	m := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, ArtifactType: ArtifactTypeDSSE,
		Config: cfg, Layers: []Descriptor{envDesc}, Subject: &subj,
		Annotations: map[string]string{AnnotationPredicateType: predicateType}}
	raw, err := json.Marshal(m)
	if err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: %w", subject, err)
	}
	md, err := s.PushReferrer(ctx, raw, MediaTypeManifest)
	if err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: %w", subject, err)
	}
	att := Attestation{Digest: envDesc.Digest, Manifest: md, PredicateType: predicateType, Envelope: envelope}
	if err := writeCosignAttestations(ctx, s, subject, att); err != nil {
		return Attestation{}, fmt.Errorf("attach to %s: cosign attestation image: %w", subject, err)
	}
	return att, nil
}

// writeCosignAttestations updates the "sha256-<hex>.att" image of subject, the layout
// cosign's legacy format reads: one layer per envelope (media type ArtifactTypeDSSE, an
// empty signature annotation, predicateType), in envelope-digest order, no duplicates. The
// usual case appends the new envelope to the image already there (its other layers are in
// the repository already). When that image holds fewer envelopes than the subject has
// referrers (an earlier rewrite failed, or the image is missing), it is rebuilt from the
// referrers themselves.
func writeCosignAttestations(ctx context.Context, s Store, subject digest.Digest, added Attestation) error {
	layers := map[digest.Digest]Descriptor{}
	if md, err := s.Resolve(ctx, cosignAttTag(subject)); err == nil {
		raw, _, err := fetchManifest(ctx, s, md)
		if err != nil {
			return err
		}
		m, err := ParseManifest(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", cosignAttTag(subject), err)
		}
		for _, l := range m.Layers {
			if l.MediaType == ArtifactTypeDSSE {
				layers[l.Digest] = l
			}
		}
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	cosignLayer := func(digest digest.Digest, size int64, predicateType string) Descriptor {
		return Descriptor{MediaType: ArtifactTypeDSSE, Digest: digest, Size: size,
			Annotations: map[string]string{cosignSignatureAnnotation: "", cosignPredicateAnnotation: predicateType}}
	}
	layers[added.Digest] = cosignLayer(added.Digest, int64(len(added.Envelope)), added.PredicateType)
	refs, err := s.Referrers(ctx, subject)
	if err != nil {
		return err
	}
	if len(layers) < len(refs) {
		atts, _, err := referrers(ctx, s, subject, false)
		if err != nil {
			return err
		}
		for _, a := range atts {
			layers[a.Digest] = cosignLayer(a.Digest, int64(len(a.Envelope)), a.PredicateType)
		}
	}
	var ls []Descriptor
	for _, l := range layers {
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Digest < ls[j].Digest })
	diffIDs := []digest.Digest{}
	for _, l := range ls {
		diffIDs = append(diffIDs, l.Digest)
	}
	// A minimal image config, as cosign's own .att images have, so image tools can read it.
	cfgRaw, err := json.Marshal(map[string]any{"architecture": "", "os": "", "config": map[string]any{},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}})
	if err != nil {
		return err
	}
	cfg := descriptorOf(MediaTypeConfig, cfgRaw)
	if err := putBytes(ctx, s, cfg.Digest, cfgRaw); err != nil {
		return err
	}
	raw, err := json.Marshal(Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, Config: cfg, Layers: ls})
	if err != nil {
		return err
	}
	_, err = putTagged(ctx, s, raw, MediaTypeManifest, cosignAttTag(subject))
	return err
}

// Skipped is a referrer (or a layer of cosign's attestation image) that Referrers did not
// read, and why: unreadable, oversized, corrupted, or past the MaxReferrers bound. One bad
// entry never hides the others.
type Skipped struct {
	Digest digest.Digest `json:"digest"`
	Reason string        `json:"reason"`
}

// Referrers returns the attestations attached to subject: every referrer manifest whose own
// subject field is subject (the registry's list is only a hint) and whose artifactType is
// ArtifactTypeDSSE, plus envelopes in cosign's "sha256-<hex>.att" image, deduplicated by
// envelope digest. Each envelope is checked against its descriptor's digest and size; none
// is verified (provenance.Verify does that with the keys the caller trusts). Entries are read
// one by one under per-entry limits (the manifest size, dsse.MaxEnvelopeSize, at most
// MaxReferrers of each kind): one that fails is skipped and reported, never fatal to the
// others. Only a failure to list the referrers at all is an error.
func Referrers(ctx context.Context, s Store, subject digest.Digest) ([]Attestation, []Skipped, error) {
	return referrers(ctx, s, subject, true)
}

// MaxReferrers bounds how many referrers of one subject, and how many layers of its cosign
// attestation image, are read; the rest are skipped.
const MaxReferrers = maxReferrers

func referrers(ctx context.Context, s Store, subject digest.Digest, withCosign bool) ([]Attestation, []Skipped, error) {
	if err := subject.Validate(); err != nil {
		return nil, nil, fmt.Errorf("referrers: %w", err)
	}
	descs, err := s.Referrers(ctx, subject)
	if err != nil {
		return nil, nil, fmt.Errorf("referrers of %s: %w", subject, err)
	}
	var out []Attestation
	var skipped []Skipped
	seen := map[digest.Digest]bool{}
	for i, d := range descs {
		md := digest.Digest(d.Digest.String())
		if i >= maxReferrers {
			skipped = append(skipped, Skipped{Digest: md, Reason: fmt.Sprintf("more than %d referrers: not read", maxReferrers)})
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		// artifactType in the list is not filtered on: some registries report the config
		// media type instead. The manifest itself decides.
		raw, _, err := fetchManifest(ctx, s, md)
		if err != nil {
			skipped = append(skipped, Skipped{Digest: md, Reason: err.Error()})
			continue
		}
		m, err := ParseManifest(raw)
		if err != nil || m.ArtifactType != ArtifactTypeDSSE || m.Subject == nil || m.Subject.Digest != subject ||
			len(m.Layers) != 1 || m.Layers[0].MediaType != ArtifactTypeDSSE {
			continue // not a Foundry attestation of this subject (another tool's, or mislisted)
		}
		if seen[m.Layers[0].Digest] {
			continue
		}
		env, err := fetchBlobBytes(ctx, s, m.Layers[0], dsse.MaxEnvelopeSize)
		if err != nil {
			skipped = append(skipped, Skipped{Digest: md, Reason: "envelope: " + err.Error()})
			continue
		}
		seen[m.Layers[0].Digest] = true
		out = append(out, Attestation{Digest: m.Layers[0].Digest, Manifest: md,
			PredicateType: m.Annotations[AnnotationPredicateType], Envelope: env})
	}
	if withCosign {
		extra, sk, err := cosignAttestations(ctx, s, subject, seen)
		if err != nil {
			skipped = append(skipped, Skipped{Digest: subject, Reason: cosignAttTag(subject) + ": " + err.Error()})
		}
		out = append(out, extra...)
		skipped = append(skipped, sk...)
	}
	return out, skipped, nil
}

// cosignAttestations reads envelopes from the "sha256-<hex>.att" image that are not in seen
// (attached by cosign itself, or by a Foundry whose referrer push failed). A layer that
// cannot be read is skipped; an error means the image itself could not be read.
func cosignAttestations(ctx context.Context, s Store, subject digest.Digest, seen map[digest.Digest]bool) ([]Attestation, []Skipped, error) {
	md, err := s.Resolve(ctx, cosignAttTag(subject))
	if errors.Is(err, ErrNotFound) {
		return nil, nil, nil // nothing attached the cosign way
	}
	if err != nil {
		return nil, nil, err
	}
	raw, _, err := fetchManifest(ctx, s, md)
	if err != nil {
		return nil, nil, err
	}
	m, err := ParseManifest(raw)
	if err != nil {
		return nil, nil, err
	}
	var out []Attestation
	var skipped []Skipped
	for i, l := range m.Layers {
		if l.MediaType != ArtifactTypeDSSE || seen[l.Digest] {
			continue
		}
		if i >= maxReferrers {
			skipped = append(skipped, Skipped{Digest: l.Digest, Reason: fmt.Sprintf("%s: more than %d layers: not read", cosignAttTag(subject), maxReferrers)})
			continue
		}
		env, err := fetchBlobBytes(ctx, s, l, dsse.MaxEnvelopeSize)
		if err != nil {
			skipped = append(skipped, Skipped{Digest: l.Digest, Reason: cosignAttTag(subject) + ": " + err.Error()})
			continue
		}
		seen[l.Digest] = true
		out = append(out, Attestation{Digest: l.Digest, PredicateType: l.Annotations[cosignPredicateAnnotation], Envelope: env})
	}
	return out, skipped, nil
}

// RemoteSource is a provenance.AttestationSource over a Store: Lookup returns the
// attestations attached to a digest (Referrers), so that provenance.Verify can check OCI
// references. Results are unverified candidates, as the interface requires.
type RemoteSource struct {
	Store Store
}

var _ provenance.AttestationSource = RemoteSource{}

// Lookup implements provenance.AttestationSource.
func (r RemoteSource) Lookup(ctx context.Context, d string) ([]provenance.Attestation, error) {
	dg, err := digest.Parse(d)
	if err != nil {
		return nil, err
	}
	atts, _, err := Referrers(ctx, r.Store, dg)
	if err != nil {
		return nil, err
	}
	out := make([]provenance.Attestation, 0, len(atts))
	for _, a := range atts {
		out = append(out, provenance.Attestation{Source: refString(r.Store, dg) + " referrer " + string(a.Digest), Envelope: a.Envelope})
	}
	return out, nil
}

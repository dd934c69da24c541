package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/store"
)

// The functions below use a registry as a shared content-addressed store (the Temporal
// engine, spec/temporal.md): content-store blobs and trees, and OCI images, move between
// machines by digest. Nothing fetched is taken on the registry's word: every blob is checked
// against the digest and size it was asked for before a local store takes it, and a tree's
// files against the entries of its verified manifest.

// PushBlob copies blob d of src into s, unless s already holds it, and returns its size.
func PushBlob(ctx context.Context, s Store, src *store.Store, d digest.Digest) (int64, error) {
	size, err := src.Stat(d)
	if err != nil {
		return 0, err
	}
	err = s.PutBlob(ctx, d, size, func() (io.ReadCloser, error) { return src.Open(d) })
	if err != nil {
		return 0, fmt.Errorf("%s: push %s: %w", s, d.Short(), err)
	}
	return size, nil
}

// PushTree copies tree d of src into s: every file blob, then the manifest blob, so that a
// reader that finds the manifest finds its files. It returns the manifest's size.
func PushTree(ctx context.Context, s Store, src *store.Store, d digest.Digest) (int64, error) {
	man, err := src.ReadManifest(d)
	if err != nil {
		return 0, err
	}
	seen := map[digest.Digest]bool{}
	for _, e := range man.Entries {
		if e.Digest == "" || seen[e.Digest] {
			continue
		}
		seen[e.Digest] = true
		if _, err := PushBlob(ctx, s, src, e.Digest); err != nil {
			return 0, err
		}
	}
	return PushBlob(ctx, s, src, d)
}

// FetchBlob copies blob d of size bytes from s into dst, refusing bytes that do not match.
func FetchBlob(ctx context.Context, s Store, dst *store.Store, d digest.Digest, size int64) error {
	if ok, _ := dst.Has(d); ok {
		return nil
	}
	rc, err := openVerified(ctx, s, Descriptor{Digest: d, Size: size})
	if err != nil {
		return fmt.Errorf("%s: fetch %s: %w", s, d.Short(), err)
	}
	defer rc.Close()
	if _, err := dst.PutExpected(rc, d); err != nil {
		return fmt.Errorf("%s: fetch %s: %w", s, d.Short(), err)
	}
	return nil
}

// FetchTree copies tree d, whose manifest has size bytes, from s into dst: the manifest,
// checked to be a canonical tree manifest, then each file it names.
func FetchTree(ctx context.Context, s Store, dst *store.Store, d digest.Digest, size int64) error {
	if size > MaxManifestSize*16 {
		return fmt.Errorf("%s: tree %s: manifest of %d bytes: %w", s, d.Short(), size, ErrTooLarge)
	}
	if err := FetchBlob(ctx, s, dst, d, size); err != nil {
		return err
	}
	man, err := dst.ReadManifest(d)
	if err != nil {
		return fmt.Errorf("%s: tree %s: %w", s, d.Short(), err)
	}
	for _, e := range man.Entries {
		if e.Digest == "" {
			continue
		}
		if err := FetchBlob(ctx, s, dst, e.Digest, e.Size); err != nil {
			return err
		}
	}
	return nil
}

// CopyImage copies the OCI image manifest d with its config and layers from src to dst,
// each blob checked against its descriptor on the way. It copies a single-platform image
// manifest (what seed images are), not an index.
func CopyImage(ctx context.Context, dst, src Store, d digest.Digest) error {
	raw, mt, err := fetchManifest(ctx, src, d)
	if err != nil {
		return err
	}
	var m struct {
		Config Descriptor   `json:"config"`
		Layers []Descriptor `json:"layers"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: image %s: %w", src, d.Short(), err)
	}
	for _, b := range append([]Descriptor{m.Config}, m.Layers...) {
		if err := b.check("image blob"); err != nil {
			return fmt.Errorf("%s: image %s: %w", src, d.Short(), err)
		}
		if err := copyBlob(ctx, dst, src, b); err != nil {
			return err
		}
	}
	if _, err := dst.PutManifest(ctx, raw, mt); err != nil {
		return fmt.Errorf("%s: image %s: %w", dst, d.Short(), err)
	}
	return nil
}

// copyBlob copies blob b from src to dst. src's bytes are read only if dst lacks the blob,
// and checked against b as they stream; dst checks them against b's digest too before the
// blob becomes visible (Store.PutBlob), so a forged blob never lands.
func copyBlob(ctx context.Context, dst, src Store, b Descriptor) error {
	return dst.PutBlob(ctx, b.Digest, b.Size, func() (io.ReadCloser, error) { return openVerified(ctx, src, b) })
}

// Media types of an action-cache record shared through a registry.
const (
	ArtifactTypeActionRecord = "application/vnd.foundry.action-record.v1"
	MediaTypeActionRecord    = "application/vnd.foundry.action-record.v1+json"
	MediaTypeActionDef       = "application/vnd.foundry.action-definition.v1+json"
	MediaTypeEnvelope        = "application/vnd.dsse.envelope.v1+json"
	// maxRecordBlob bounds a record, its definition and each of its envelopes as fetched.
	maxRecordBlob = 4 << 20
)

// RecordTag is the tag a shared record of the action with cache key key, signed by the key
// whose ID is signer ("sha256:<hex>"), is found by: "action-<key hex>-<16 hex of signer>".
// Each signer's records have tags of their own, so that an apply that trusts some signers
// finds theirs, whatever others push.
func RecordTag(key digest.Digest, signer string) string {
	id := strings.TrimPrefix(signer, "sha256:")
	if len(id) > 16 {
		id = id[:16]
	}
	return "action-" + key.Hex() + "-" + id
}

// SharedRecord is an action-cache record as it travels: the record, the action definition
// it names, and the envelopes that vouch for it.
type SharedRecord struct {
	Record     []byte
	Definition []byte // may be empty
	Envelopes  [][]byte
}

// PutRecord stores r as an artifact whose config is the record and whose layers are the
// definition and the envelopes, tagged RecordTag(key, signer). A later record for the same
// key and signer moves the tag.
func PutRecord(ctx context.Context, s Store, key digest.Digest, signer string, r SharedRecord) error {
	put := func(mediaType string, b []byte) (Descriptor, error) {
		d := descriptorOf(mediaType, b)
		if err := putBytes(ctx, s, d.Digest, b); err != nil {
			return d, fmt.Errorf("%s: record of %s: %w", s, key.Short(), err)
		}
		return d, nil
	}
	cfg, err := put(MediaTypeActionRecord, r.Record)
	if err != nil {
		return err
	}
	m := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, ArtifactType: ArtifactTypeActionRecord, Config: cfg}
	type layer struct {
		mediaType string
		b         []byte
	}
	var layers []layer
	if len(r.Definition) > 0 {
		layers = append(layers, layer{MediaTypeActionDef, r.Definition})
	}
	for _, env := range r.Envelopes {
		layers = append(layers, layer{MediaTypeEnvelope, env})
	}
	for _, l := range layers {
		d, err := put(l.mediaType, l.b)
		if err != nil {
			return err
		}
		m.Layers = append(m.Layers, d)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := putTagged(ctx, s, raw, MediaTypeManifest, RecordTag(key, signer)); err != nil {
		return fmt.Errorf("%s: record of %s: %w", s, key.Short(), err)
	}
	return nil
}

// GetRecord returns the record tagged RecordTag(key, signer), each blob checked against the
// manifest the tag resolved to, or found=false when there is none. The bytes are only what
// the registry holds (anyone who can push can move a tag): the caller verifies what they say.
func GetRecord(ctx context.Context, s Store, key digest.Digest, signer string) (r SharedRecord, found bool, err error) {
	md, err := s.Resolve(ctx, RecordTag(key, signer))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return r, false, nil
		}
		return r, false, err
	}
	raw, _, err := fetchManifest(ctx, s, md)
	if err != nil {
		return r, false, err
	}
	m, err := ParseManifest(raw)
	if err != nil {
		return r, false, fmt.Errorf("%s: record of %s: %w", s, key.Short(), err)
	}
	if m.ArtifactType != ArtifactTypeActionRecord || m.Config.MediaType != MediaTypeActionRecord {
		return r, false, fmt.Errorf("%s: record of %s: artifact type %q, want %q", s, key.Short(), m.ArtifactType, ArtifactTypeActionRecord)
	}
	if r.Record, err = fetchBlobBytes(ctx, s, m.Config, maxRecordBlob); err != nil {
		return r, false, err
	}
	for _, l := range m.Layers {
		b, err := fetchBlobBytes(ctx, s, l, maxRecordBlob)
		if err != nil {
			return r, false, err
		}
		switch l.MediaType {
		case MediaTypeActionDef:
			r.Definition = b
		case MediaTypeEnvelope:
			r.Envelopes = append(r.Envelopes, b)
		}
	}
	return r, true, nil
}

package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/foundry-build/foundry/digest"
)

// Media types of the OCI documents Foundry reads and writes.
const (
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeEmpty    = "application/vnd.oci.empty.v1+json"
	MediaTypeLayerTar = "application/vnd.oci.image.layer.v1.tar"
	MediaTypeLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
)

// emptyJSON is the OCI 1.1 empty descriptor's content, "{}".
var emptyJSON = []byte("{}")

// Bounds on documents read from a store. A registry is untrusted: these keep a hostile one
// from making Foundry allocate without limit before anything is checked.
const (
	// MaxManifestSize bounds a manifest or index (the distribution spec's recommended 4 MiB).
	MaxManifestSize = 4 << 20
	// maxDescriptors bounds the layers of a manifest and the entries of an index.
	maxDescriptors = 10000
)

// Descriptor is an OCI content descriptor as Foundry reads it.
type Descriptor struct {
	MediaType    string            `json:"mediaType"`
	Digest       digest.Digest     `json:"digest"`
	Size         int64             `json:"size"`
	ArtifactType string            `json:"artifactType,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Data         []byte            `json:"data,omitempty"`
}

// Manifest is an OCI image manifest. Field order is the order of the JSON Foundry writes,
// which is therefore deterministic (encoding/json sorts map keys).
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	ArtifactType  string            `json:"artifactType,omitempty"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Subject       *Descriptor       `json:"subject,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Index is an OCI image index (also the referrers response and the fallback tag's index).
type Index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	ArtifactType  string            `json:"artifactType,omitempty"`
	Manifests     []Descriptor      `json:"manifests"`
	Subject       *Descriptor       `json:"subject,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// ParseManifest decodes raw as an OCI image manifest and checks it: schemaVersion 2, OCI
// media type (a Docker schema 2 manifest is refused), well-formed descriptors, bounded size
// and layer count. Unknown fields are ignored, as the image spec requires of consumers.
func ParseManifest(raw []byte) (*Manifest, error) {
	if err := checkDocument(raw); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("manifest: schemaVersion %d, want 2", m.SchemaVersion)
	}
	if m.MediaType != MediaTypeManifest {
		return nil, fmt.Errorf("manifest: mediaType %q, want %q", m.MediaType, MediaTypeManifest)
	}
	if len(m.Layers) > maxDescriptors {
		return nil, fmt.Errorf("manifest: %d layers, more than %d", len(m.Layers), maxDescriptors)
	}
	if err := m.Config.check("config"); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	for i := range m.Layers {
		if err := m.Layers[i].check(fmt.Sprintf("layer %d", i)); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
	}
	if m.Subject != nil {
		if err := m.Subject.check("subject"); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
	}
	return &m, nil
}

// ParseIndex decodes raw as an OCI image index with the same checks as ParseManifest.
func ParseIndex(raw []byte) (*Index, error) {
	if err := checkDocument(raw); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	var ix Index
	if err := json.Unmarshal(raw, &ix); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if ix.SchemaVersion != 2 {
		return nil, fmt.Errorf("index: schemaVersion %d, want 2", ix.SchemaVersion)
	}
	// The image spec makes mediaType optional in an index; when present it must be OCI's.
	if ix.MediaType != "" && ix.MediaType != MediaTypeIndex {
		return nil, fmt.Errorf("index: mediaType %q, want %q", ix.MediaType, MediaTypeIndex)
	}
	if len(ix.Manifests) > maxDescriptors {
		return nil, fmt.Errorf("index: %d entries, more than %d", len(ix.Manifests), maxDescriptors)
	}
	for i := range ix.Manifests {
		if err := ix.Manifests[i].check(fmt.Sprintf("entry %d", i)); err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
	}
	return &ix, nil
}

// checkDocument bounds the size and requires one UTF-8 JSON object with nothing after it.
func checkDocument(raw []byte) error {
	if len(raw) > MaxManifestSize {
		return fmt.Errorf("%d bytes, more than %d", len(raw), MaxManifestSize)
	}
	if !utf8.Valid(raw) {
		return errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if len(v) == 0 || v[0] != '{' {
		return errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

func (d *Descriptor) check(what string) error {
	if d.MediaType == "" {
		return fmt.Errorf("%s: no mediaType", what)
	}
	if err := d.Digest.Validate(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if d.Size < 0 {
		return fmt.Errorf("%s: negative size %d", what, d.Size)
	}
	if d.Data != nil && (int64(len(d.Data)) != d.Size || digest.FromBytes(d.Data) != d.Digest) {
		return fmt.Errorf("%s: embedded data does not match the descriptor's size and digest", what)
	}
	return nil
}

// toV1 converts to go-containerregistry's descriptor (the Store interface's currency).
func (d Descriptor) toV1() v1.Descriptor {
	h, _ := v1.NewHash(string(d.Digest))
	return v1.Descriptor{MediaType: types.MediaType(d.MediaType), Digest: h, Size: d.Size,
		ArtifactType: d.ArtifactType, Annotations: d.Annotations, Data: d.Data}
}

// descriptorOf describes raw bytes of the given media type.
func descriptorOf(mediaType string, raw []byte) Descriptor {
	return Descriptor{MediaType: mediaType, Digest: digest.FromBytes(raw), Size: int64(len(raw))}
}

package seed

import (
	"encoding/json"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The JSON documents of a built seed are encoded from the structs below and nothing else, so
// the bytes — and the manifest digest — change only when this file changes. Field order is
// the struct order (encoding/json); empty optional fields are omitted. The config has no
// "created" time and no "history": both would carry nothing but non-determinism.
//
// Imported images keep their own manifest and config bytes; these structs only read them.

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	// URLs marks a foreign (non-distributable) layer; such layers are refused.
	URLs []string `json:"urls,omitempty"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Variant      string    `json:"variant,omitempty"`
	Config       runConfig `json:"config"`
	RootFS       rootFS    `json:"rootfs"`
}

type runConfig struct {
	Env        []string `json:"Env,omitempty"`
	User       string   `json:"User,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// layerRef is one layer of an image being assembled: its blob descriptor and the digest of
// its uncompressed tar (the config's diff_id).
type layerRef struct {
	desc   descriptor
	diffID string
}

func encodeConfig(pl platform, env []string, user, workdir string, layers []layerRef) ([]byte, error) {
	cfg := imageConfig{
		Architecture: pl.Arch,
		OS:           pl.OS,
		Variant:      pl.Variant,
		Config:       runConfig{Env: env, User: user, WorkingDir: workdir},
		RootFS:       rootFS{Type: "layers", DiffIDs: make([]string, 0, len(layers))},
	}
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.diffID)
	}
	return json.Marshal(cfg)
}

func encodeManifest(config descriptor, layers []layerRef) ([]byte, error) {
	m := manifest{
		SchemaVersion: 2,
		MediaType:     string(types.OCIManifestSchema1),
		Config:        config,
		Layers:        make([]descriptor, 0, len(layers)),
	}
	for _, l := range layers {
		m.Layers = append(m.Layers, l.desc)
	}
	return json.Marshal(m)
}

// layerMediaTypes are the layer blob types an image may have here. Docker's types are
// byte-compatible with the OCI ones they map to (used when a built seed stacks on an
// imported Docker image: an OCI manifest must name OCI layer types).
var layerMediaTypes = map[string]string{
	string(types.OCIUncompressedLayer):    string(types.OCIUncompressedLayer),
	string(types.OCILayer):                string(types.OCILayer),
	string(types.OCILayerZStd):            string(types.OCILayerZStd),
	string(types.DockerLayer):             string(types.OCILayer),
	string(types.DockerUncompressedLayer): string(types.OCIUncompressedLayer),
}

func parseManifest(raw []byte) (*manifest, error) {
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	switch types.MediaType(m.MediaType) {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
	case "":
		// OCI allows an omitted mediaType; schemaVersion 2 with a config is a manifest.
	default:
		return nil, fmt.Errorf("manifest media type %q is not an image manifest", m.MediaType)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("manifest schemaVersion %d, want 2", m.SchemaVersion)
	}
	if _, err := v1.NewHash(m.Config.Digest); err != nil {
		return nil, fmt.Errorf("manifest config digest: %w", err)
	}
	for i, l := range m.Layers {
		if _, ok := layerMediaTypes[l.MediaType]; !ok {
			return nil, fmt.Errorf("layer %d: unsupported media type %q", i, l.MediaType)
		}
		if len(l.URLs) > 0 {
			return nil, fmt.Errorf("layer %d: foreign layer (urls) refused", i)
		}
		if _, err := v1.NewHash(l.Digest); err != nil {
			return nil, fmt.Errorf("layer %d digest: %w", i, err)
		}
	}
	return &m, nil
}

func parseConfig(raw []byte, nlayers int) (*imageConfig, error) {
	var c imageConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("parse image config: %w", err)
	}
	if len(c.RootFS.DiffIDs) != nlayers {
		return nil, fmt.Errorf("image config has %d diff_ids for %d layers", len(c.RootFS.DiffIDs), nlayers)
	}
	for i, d := range c.RootFS.DiffIDs {
		if _, err := v1.NewHash(d); err != nil {
			return nil, fmt.Errorf("diff_id %d: %w", i, err)
		}
	}
	return &c, nil
}

package seed

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/foundry-build/foundry/executors"
)

// importImage copies an existing image into the store and returns its manifest digest.
func (b *Builder) importImage(ctx context.Context, st *store, s *Spec) (v1.Hash, error) {
	im := s.Import
	n := 0
	for _, v := range []string{im.OCILayout, im.Tarball, im.Ref} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return v1.Hash{}, errors.New("import: set exactly one of OCILayout, Tarball and Ref")
	}
	var want *v1.Hash
	if im.Digest != "" {
		h, err := v1.NewHash(im.Digest)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("import digest: %w", err)
		}
		want = &h
	}
	switch {
	case im.Ref != "":
		return b.importRef(ctx, st, im.Ref, want, s.Platform)
	case im.OCILayout != "":
		return importLayout(ctx, st, im.OCILayout, want, s.Platform)
	default:
		return b.importTarball(ctx, st, im.Tarball, want, s.Platform)
	}
}

// cached reports whether the pinned manifest is already a complete image in the store.
func cached(st *store, want *v1.Hash) bool {
	if want == nil {
		return false
	}
	ok, err := st.inIndex(*want)
	return err == nil && ok
}

func (b *Builder) importRef(ctx context.Context, st *store, ref string, want *v1.Hash, plat string) (v1.Hash, error) {
	at := strings.LastIndex(ref, "@")
	if at < 0 {
		return v1.Hash{}, fmt.Errorf("import ref %q: not pinned by digest; tags are refused, use host/repo@sha256:<hex>", ref)
	}
	if repo := ref[:at]; strings.Contains(repo[strings.LastIndex(repo, "/")+1:], ":") {
		return v1.Hash{}, fmt.Errorf("import ref %q: has a tag as well as a digest; drop the tag", ref)
	}
	d, err := name.NewDigest(ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("import ref %q: %w", ref, err)
	}
	pinned, err := v1.NewHash(d.DigestStr())
	if err != nil {
		return v1.Hash{}, fmt.Errorf("import ref %q: %w", ref, err)
	}
	if want != nil && *want != pinned {
		return v1.Hash{}, fmt.Errorf("import ref %q: digest field %s disagrees with the reference", ref, want)
	}
	if cached(st, &pinned) {
		return pinned, nil
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, b.RemoteOptions...)
	if plat != "" {
		p, err := v1.ParsePlatform(plat)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("platform %q: %w", plat, err)
		}
		opts = append(opts, remote.WithPlatform(*p))
	}
	desc, err := remote.Get(d, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("fetch %s: %w", ref, err)
	}
	if desc.MediaType.IsIndex() && plat == "" {
		return v1.Hash{}, fmt.Errorf("import ref %q names a multi-platform index; set Spec.Platform", ref)
	}
	img, err := desc.Image() // for an index: the manifest for the platform in opts
	if err != nil {
		return v1.Hash{}, fmt.Errorf("fetch %s: %w", ref, err)
	}
	h, err := copyImage(ctx, st, img)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("import %s: %w", ref, err)
	}
	return h, nil
}

func importLayout(ctx context.Context, st *store, dir string, want *v1.Hash, plat string) (v1.Hash, error) {
	if cached(st, want) {
		return *want, nil
	}
	img, err := selectFromLayout(dir, want, plat)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("import layout %s: %w", dir, err)
	}
	h, err := copyImage(ctx, st, img)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("import layout %s: %w", dir, err)
	}
	return h, nil
}

// selectFromLayout picks the image named by want (a manifest, or an index resolved with
// plat) from the layout's index.json, or its only entry when want is nil.
func selectFromLayout(dir string, want *v1.Hash, plat string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	var desc *v1.Descriptor
	switch {
	case want != nil:
		for i := range im.Manifests {
			if im.Manifests[i].Digest == *want {
				desc = &im.Manifests[i]
				break
			}
		}
		if desc == nil {
			return nil, fmt.Errorf("index.json does not list %s", want)
		}
	case len(im.Manifests) == 1:
		desc = &im.Manifests[0]
	case len(im.Manifests) == 0:
		return nil, errors.New("index.json lists no manifests")
	default:
		return nil, fmt.Errorf("index.json lists %d manifests; set Import.Digest to choose one", len(im.Manifests))
	}
	if !desc.MediaType.IsIndex() {
		return ii.Image(desc.Digest)
	}
	child, err := ii.ImageIndex(desc.Digest)
	if err != nil {
		return nil, err
	}
	return imageForPlatform(child, plat)
}

func imageForPlatform(ii v1.ImageIndex, plat string) (v1.Image, error) {
	if plat == "" {
		return nil, errors.New("digest names a multi-platform index; set Spec.Platform")
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil {
		return nil, fmt.Errorf("platform %q: %w", plat, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Satisfies(*p) && d.MediaType.IsImage() {
			return ii.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("index has no image for platform %s", plat)
}

// copyImage stores img's manifest bytes, config and layer blobs, verifying every digest.
func copyImage(ctx context.Context, st *store, img v1.Image) (v1.Hash, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read manifest: %w", err)
	}
	m, err := parseManifest(raw)
	if err != nil {
		return v1.Hash{}, err
	}
	cfgRaw, err := img.RawConfigFile()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read config: %w", err)
	}
	if got := sha256Hex(cfgRaw); got != m.Config.Digest {
		return v1.Hash{}, fmt.Errorf("config digest is %s, manifest says %s", got, m.Config.Digest)
	}
	if _, err := parseConfig(cfgRaw, len(m.Layers)); err != nil {
		return v1.Hash{}, err
	}
	if _, _, err := st.writeBlobBytes(cfgRaw); err != nil {
		return v1.Hash{}, err
	}
	for _, l := range m.Layers {
		h, _ := v1.NewHash(l.Digest)
		if st.hasBlob(h) {
			continue
		}
		layer, err := img.LayerByDigest(h)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("layer %s: %w", h, err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("layer %s: %w", h, err)
		}
		_, _, err = st.writeBlob(ctx, rc, &h)
		rc.Close()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("layer %s: %w", h, err)
		}
	}
	h, _, err := st.writeBlobBytes(raw)
	return h, err
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// importTarball imports a docker-save tarball (manifest.json) or an OCI archive (a tar of an
// OCI layout: index.json + oci-layout).
func (b *Builder) importTarball(ctx context.Context, st *store, path string, want *v1.Hash, plat string) (v1.Hash, error) {
	if cached(st, want) {
		return *want, nil
	}
	kind, err := tarballKind(path)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("import tarball %s: %w", path, err)
	}
	var h v1.Hash
	if kind == "oci" {
		tmp, err := os.MkdirTemp(st.tmp, "oci-archive-")
		if err != nil {
			return v1.Hash{}, fmt.Errorf("import tarball %s: %w", path, err)
		}
		defer removeTemp(tmp)
		f, err := os.Open(path)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("import tarball %s: %w", path, err)
		}
		err = unpackTar(ctx, tmp, f, b.maxUnpack())
		f.Close()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("import tarball %s: extract: %w", path, err)
		}
		img, err := selectFromLayout(tmp, want, plat)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("import tarball %s: %w", path, err)
		}
		if h, err = copyImage(ctx, st, img); err != nil {
			return v1.Hash{}, fmt.Errorf("import tarball %s: %w", path, err)
		}
	} else {
		if h, err = importDockerTarball(ctx, st, path); err != nil {
			return v1.Hash{}, fmt.Errorf("import tarball %s: %w", path, err)
		}
	}
	if want != nil && h != *want {
		return v1.Hash{}, fmt.Errorf("import tarball %s: manifest digest is %s, expected %s", path, h, want)
	}
	return h, nil
}

// tarballKind reports "docker" if the archive has manifest.json, "oci" if it has index.json
// (and no manifest.json).
func tarballKind(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	hasIndex := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read tar: %w", err)
		}
		switch filepath.Clean(hdr.Name) {
		case "manifest.json":
			return "docker", nil
		case "index.json":
			hasIndex = true
		}
	}
	if hasIndex {
		return "oci", nil
	}
	return "", errors.New("neither manifest.json (docker save) nor index.json (OCI archive) found")
}

// importDockerTarball writes an OCI manifest over the tarball's config and its layers stored
// uncompressed. docker save records no manifest digest, and compressing would make the digest
// depend on the compressor; uncompressed layers make it a function of the tarball's content.
func importDockerTarball(ctx context.Context, st *store, path string) (v1.Hash, error) {
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return v1.Hash{}, err
	}
	cfgRaw, err := img.RawConfigFile()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read layers: %w", err)
	}
	cfg, err := parseConfig(cfgRaw, len(layers))
	if err != nil {
		return v1.Hash{}, err
	}
	refs := make([]layerRef, 0, len(layers))
	for i, l := range layers {
		want, _ := v1.NewHash(cfg.RootFS.DiffIDs[i])
		rc, err := l.Uncompressed()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("layer %d: %w", i, err)
		}
		h, size, err := st.writeBlob(ctx, rc, &want)
		rc.Close()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("layer %d: %w", i, err)
		}
		refs = append(refs, layerRef{
			desc:   descriptor{MediaType: string(types.OCIUncompressedLayer), Digest: h.String(), Size: size},
			diffID: h.String(),
		})
	}
	return writeImage(st, cfgRaw, refs)
}

// fromLayers returns the layers of an already built seed image for stacking, copying their
// blobs into this store if the image lives in another layout. The base's trailing
// mount-point layer is dropped: the new image ends with its own.
func fromLayers(ctx context.Context, st *store, from *executors.Image, mountPoints string) ([]layerRef, error) {
	h, err := v1.NewHash(from.Digest)
	if err != nil {
		return nil, fmt.Errorf("from: image digest: %w", err)
	}
	if from.LayoutPath == "" {
		return nil, fmt.Errorf("from %s: image has no LayoutPath", h)
	}
	src := &store{layout: from.LayoutPath, blobs: filepath.Join(from.LayoutPath, "blobs", "sha256")}
	raw, err := src.readBlob(h, maxJSONBlob)
	if err != nil {
		return nil, fmt.Errorf("from %s: %w", h, err)
	}
	if got := sha256Hex(raw); got != h.String() {
		return nil, fmt.Errorf("from %s: manifest blob has digest %s", h, got)
	}
	m, err := parseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("from %s: %w", h, err)
	}
	cfg, err := src.readConfig(m)
	if err != nil {
		return nil, fmt.Errorf("from %s: %w", h, err)
	}
	var out []layerRef
	for i, l := range m.Layers {
		if i == len(m.Layers)-1 && l.Digest == mountPoints {
			break
		}
		lh, _ := v1.NewHash(l.Digest)
		if !st.hasBlob(lh) {
			f, err := os.Open(src.blobPath(lh))
			if err != nil {
				return nil, fmt.Errorf("from %s: layer %s: %w", h, lh, err)
			}
			_, _, err = st.writeBlob(ctx, f, &lh)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("from %s: layer %s: %w", h, lh, err)
			}
		}
		d := l
		d.MediaType = layerMediaTypes[l.MediaType]
		out = append(out, layerRef{desc: d, diffID: cfg.RootFS.DiffIDs[i]})
	}
	return out, nil
}

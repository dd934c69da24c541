package registry

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/store"
)

// The capability artifact (spec/artifact.md).
const (
	// ArtifactTypeCapability is the artifactType of a capability manifest.
	ArtifactTypeCapability = "application/vnd.foundry.capability.v1"
	// MediaTypeContract is the config's media type: the canonical (RFC 8785) contract JSON.
	MediaTypeContract = "application/vnd.foundry.capability.contract.v1+json"

	AnnotationTitle   = "org.opencontainers.image.title"   // the capability's name
	AnnotationVersion = "org.opencontainers.image.version" // its version
	// AnnotationTarget is the platform the files are for, e.g. "linux/amd64".
	AnnotationTarget = "dev.foundry.capability.target"
	// AnnotationTree is the tree digest (digest.Dir) of the packaged files: Pull recomputes
	// it from the layers before writing anything and refuses a mismatch.
	AnnotationTree = "dev.foundry.capability.tree"
	// AnnotationContract is the contract's digest (the config's digest, repeated so that a
	// referrers listing or `crane manifest` shows the capability's identity).
	AnnotationContract = "dev.foundry.capability.contract"
)

// reserved are the annotations Publish sets itself; Capability.Annotations may not override
// them.
var reserved = map[string]bool{AnnotationTitle: true, AnnotationVersion: true, AnnotationTarget: true,
	AnnotationTree: true, AnnotationContract: true}

// Capability is what Publish packages: a contract and a tree of files from the content store.
type Capability struct {
	// Contract is the capability contract as JSON; it is stored in canonical form (RFC 8785),
	// whose digest is the capability's identity.
	Contract []byte
	// Tree is the content store's tree digest of the packaged files.
	Tree    digest.Digest
	Name    string
	Version string
	Target  string // platform, e.g. "linux/amd64"
	// Annotations are extra manifest annotations; the ones Publish sets are reserved.
	Annotations map[string]string
	// Tag, if set, is pointed at the manifest after it is stored (a "channel"). Plans and
	// applies use the returned digest, never the tag.
	Tag string
}

// Publish stores c in dst as a capability artifact and returns the manifest's digest. The
// layer is a deterministic tar of the tree (sorted, mtime 0, uid/gid 0, normalized modes), so
// publishing the same capability twice gives the same digest and uploads nothing new.
func Publish(ctx context.Context, dst Store, src *store.Store, c Capability) (digest.Digest, error) {
	if c.Name == "" || c.Version == "" || c.Target == "" {
		return "", errors.New("publish: name, version and target are required")
	}
	for k := range c.Annotations {
		if reserved[k] {
			return "", fmt.Errorf("publish %s: annotation %q is set by Foundry and cannot be overridden", c.Name, k)
		}
	}
	config, err := digest.Canonicalize(c.Contract)
	if err != nil {
		return "", fmt.Errorf("publish %s: contract: %w", c.Name, err)
	}
	ann := map[string]string{}
	for k, v := range c.Annotations {
		ann[k] = v
	}
	ann[AnnotationTitle] = c.Name
	ann[AnnotationVersion] = c.Version
	ann[AnnotationTarget] = c.Target
	ann[AnnotationTree] = string(c.Tree)
	ann[AnnotationContract] = string(digest.FromBytes(config))
	md, err := putArtifact(ctx, dst, src, ArtifactTypeCapability, MediaTypeContract, config, c.Tree, ann, c.Tag)
	if err != nil {
		return "", fmt.Errorf("publish %s: %w", c.Name, err)
	}
	return md, nil
}

// The release artifact: a product's delivered release in an OCI destination
// (spec/artifact.md).
const (
	// ArtifactTypeRelease is the artifactType of a release manifest.
	ArtifactTypeRelease = "application/vnd.foundry.release.v1"
	// MediaTypeRelease is its config's media type: the release manifest (release.json), as
	// its exact bytes.
	MediaTypeRelease = "application/vnd.foundry.release.v1+json"
)

// PublishRelease stores a release in dst: the release manifest's exact bytes as config,
// the delivered files as one layer (the same deterministic tar as a capability's), the
// tree digest and title as annotations, untagged. The same release gives the same manifest
// digest, and storing it again stores nothing new.
func PublishRelease(ctx context.Context, dst Store, src *store.Store, name string, release []byte, tree digest.Digest) (digest.Digest, error) {
	ann := map[string]string{AnnotationTitle: name, AnnotationTree: string(tree)}
	md, err := putArtifact(ctx, dst, src, ArtifactTypeRelease, MediaTypeRelease, release, tree, ann, "")
	if err != nil {
		return "", fmt.Errorf("publish release of %s: %w", name, err)
	}
	return md, nil
}

// putArtifact stores an artifact manifest of artifactType with config (of configType) and
// the tree as its layer, then points tag at it when tag is set.
func putArtifact(ctx context.Context, dst Store, src *store.Store, artifactType, configType string, config []byte, tree digest.Digest, ann map[string]string, tag string) (digest.Digest, error) {
	files, err := src.ReadManifest(tree)
	if err != nil {
		return "", err
	}
	layer, err := putLayer(ctx, dst, src, files)
	if err != nil {
		return "", fmt.Errorf("layer: %w", err)
	}
	cfg := descriptorOf(configType, config)
	if err := putBytes(ctx, dst, cfg.Digest, config); err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	m := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, ArtifactType: artifactType,
		Config: cfg, Layers: []Descriptor{layer}, Annotations: ann}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("manifest: %w", err)
	}
	md, err := dst.PutManifest(ctx, raw, MediaTypeManifest)
	if err != nil {
		return "", err
	}
	if tag != "" {
		if err := dst.Tag(ctx, tag, md); err != nil {
			return "", err
		}
	}
	return md, nil
}

// putLayer stores the tree's tar as a blob. Where the store can take a blob whose digest
// is computed as it is written, the tar is generated once and streamed (a republish then
// uploads the bytes again; the digest is the same). Otherwise, or if streaming fails, it
// makes two passes instead of a temporary copy: one to hash the tar, one to stream it,
// which the store checks against the first pass's digest (the tar is a pure function of the
// tree, so a layer already there is not uploaded again).
//
// File bytes are not re-hashed against the tree here: content-store blobs are immutable
// and were verified when stored, and every pull recomputes the tree digest from the layer
// and refuses a mismatch, so corruption cannot go unseen.
func putLayer(ctx context.Context, dst Store, src *store.Store, tree *digest.Manifest) (Descriptor, error) {
	stream := func() io.ReadCloser {
		pr, pw := io.Pipe()
		go func() {
			_, err := writeTreeTar(ctx, pw, src, tree)
			pw.CloseWithError(err)
		}()
		return pr
	}
	if bs, ok := dst.(blobStreamer); ok {
		rc := stream()
		d, n, err := bs.putBlobStream(ctx, rc)
		rc.Close() // stops the writer if the upload gave up early
		if err == nil {
			return Descriptor{MediaType: MediaTypeLayerTar, Digest: d, Size: n}, nil
		}
		if ctx.Err() != nil {
			return Descriptor{}, err
		}
	}
	h := sha256.New()
	n, err := writeTreeTar(ctx, h, src, tree)
	if err != nil {
		return Descriptor{}, err
	}
	layer := Descriptor{MediaType: MediaTypeLayerTar, Digest: digest.Digest("sha256:" + hex.EncodeToString(h.Sum(nil))), Size: n}
	err = dst.PutBlob(ctx, layer.Digest, layer.Size, func() (io.ReadCloser, error) { return stream(), nil })
	return layer, err
}

func putBytes(ctx context.Context, s Store, d digest.Digest, b []byte) error {
	return s.PutBlob(ctx, d, int64(len(b)), func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(string(b))), nil
	})
}

// epoch is every entry's mtime: a layer's bytes depend only on the tree.
var epoch = time.Unix(0, 0)

// writeTreeTar writes the tree as a tar stream: entries in manifest order (sorted by path,
// so a directory precedes its contents), directories with a trailing slash, files 0644 or
// 0755, symlinks by target; owner 0:0, no names, mtime 0. A file whose size differs from
// the manifest's fails the tar writer.
func writeTreeTar(ctx context.Context, w io.Writer, src *store.Store, tree *digest.Manifest) (int64, error) {
	cw := &countWriter{w: w}
	tw := tar.NewWriter(cw)
	for _, e := range tree.Entries {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode), ModTime: epoch, Format: tar.FormatPAX}
		switch e.Type {
		case digest.TypeDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
		case digest.TypeSymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
		case digest.TypeFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		default:
			return 0, fmt.Errorf("%s: unknown entry type %q", e.Path, e.Type)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return 0, fmt.Errorf("%s: %w", e.Path, err)
		}
		if e.Type != digest.TypeFile {
			continue
		}
		f, err := src.Open(e.Digest)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", e.Path, err)
		}
		// The tar writer refuses more or fewer bytes than the header's size.
		_, err = io.Copy(tw, io.LimitReader(f, e.Size+1))
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", e.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

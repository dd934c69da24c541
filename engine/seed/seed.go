// Package seed turns a seed — a provisioned input that is hashed, never built, and is the base
// of every sandbox — into an OCI image, and unpacks that image into a root filesystem.
//
// A seed is either host files packed into layers (Spec.Layers) or an existing image imported
// from an OCI image layout, an image tarball, or a registry reference pinned by digest
// (Spec.Import). A Builder keeps every image it builds or imports in one OCI image layout and
// unpacks each image once, so that the containerd executor can import it from the layout
// (executors.Image.LayoutPath, .Digest) and the runc executor can use the unpacked tree
// (executors.Image.Rootfs).
//
// Determinism: the manifest digest of a built seed depends only on the image paths, file
// contents, normalized modes (0755 directories, 0755 or 0644 files), symlink targets, the
// layer order, Env, User, Workdir and Platform. It never depends on host mtimes, owners,
// umask, directory walk order, the machine or the time of the build. Layers are written
// uncompressed (application/vnd.oci.image.layer.v1.tar) so that the digest does not depend on
// a compressor's output, which has changed between Go and library versions; the config and
// manifest JSON are encoded from fixed structs in this package (see wire.go).
//
// This package must never: follow a symlink inside a host directory it packs; write outside
// Builder.Root (an imported image's tar entries are confined to the rootfs being unpacked);
// accept a registry tag instead of a digest; let a half-written blob, image or rootfs look
// complete; or decide what a seed's host inputs hash to — that is the caller's job (Spec.Key).
package seed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/foundry-build/foundry/executors"
)

// Spec describes one seed. Exactly one of Layers and Import is set.
//
// The manifest digest covers Layers (content, paths, modes, order), Env, User, Workdir and
// Platform. It deliberately excludes Name and Key, which only label and find the result.
type Spec struct {
	// Name labels the image in the layout's index.json (annotation AnnotationSeedName) and
	// in errors. It is not part of the digest; when seeds of several names have one digest,
	// index.json keeps the name of the first build.
	Name string
	// Layers, in order, for a seed built from host files. The Builder appends one final
	// layer holding the empty mount-point directories (see MountPoints).
	Layers []Layer
	// Env, User and Workdir become the image configuration. Env is written sorted by key as
	// KEY=VALUE. They must be empty for imported images, whose configuration is kept.
	Env     map[string]string
	User    string
	Workdir string
	// Platform is "os/arch[/variant]", e.g. "linux/amd64". Required for built seeds; for
	// imports it selects a manifest from a multi-platform index.
	Platform string
	// Import makes the seed an existing image instead of built layers.
	Import *Import
	// Key, when set, is a digest the caller computed over everything that feeds this seed
	// (host file contents and metadata, Env, ...). Build records Key → manifest digest, and a
	// later Build with the same Key returns the recorded image without reading host files.
	// The Builder trusts Key: a Key that does not cover a changed input returns a stale image.
	Key string
}

// Layer is one entry of Spec.Layers. Exactly one of From, Files and Dir is set.
type Layer struct {
	// From contributes all layers of another seed image, already built by a Builder (so
	// seeds stack). Only its layers are taken, not its configuration; its trailing
	// mount-point layer is dropped because the new image appends its own.
	From *executors.Image
	// Files maps an absolute image path to a host file path. The host path may be a
	// symlink (it is followed); the file is copied with mode 0755 if any execute bit is set,
	// else 0644.
	Files map[string]string
	// Symlinks maps an absolute image path to a link target, written verbatim, in the same
	// layer as Files (busybox applet links, for example). Only with Files.
	Symlinks map[string]string
	// Dir is a host directory whose tree is copied under image path At ("/" if empty).
	// Symlinks inside it are kept as symlinks and never followed; sockets, devices and
	// FIFOs are refused. Dir itself may be a symlink to a directory. Hard links are
	// copied as independent files. Names starting with ".wh." are refused (OCI whiteouts).
	Dir string
	At  string
}

// Import names an existing image. Exactly one of OCILayout, Tarball and Ref is set.
type Import struct {
	// OCILayout is an OCI image layout directory. Digest selects a manifest (or an index,
	// resolved with Spec.Platform) from its index.json; it is required when index.json lists
	// more than one.
	OCILayout string
	// Tarball is an image tarball: docker-save format (manifest.json; it must hold exactly
	// one image) or an OCI layout archived with tar (index.json + oci-layout). A docker-save
	// tarball has no manifest of its own: Build writes an OCI manifest over its config and
	// uncompressed layers, so the digest is reproducible from the tarball's content.
	Tarball string
	// Ref is a registry reference pinned by digest: "host/repo@sha256:<hex>". Tags are
	// refused, also next to a digest. An index digest is resolved with Spec.Platform, which
	// is then required. Fetched bytes are verified against their digests.
	Ref string
	// Digest, when set, is the expected manifest (or index) digest; a mismatch is an error.
	Digest string
}

// AnnotationSeedName is the index.json annotation that records Spec.Name.
const AnnotationSeedName = "dev.foundry.seed.name"

// DefaultMaxUnpackBytes bounds the uncompressed bytes of all layers of one image unpacked
// into a rootfs when Builder.MaxUnpackBytes is zero.
const DefaultMaxUnpackBytes int64 = 32 << 30

// Builder builds and imports seed images under Root:
//
//	Root/layout/          one OCI image layout holding every image (index.json, blobs/sha256/)
//	Root/rootfs/<hex>/    the image with manifest digest sha256:<hex>, unpacked
//	Root/keys/<hex>       Spec.Key records (hex is sha256 of the key) → manifest digest
//	Root/tmp/             work in progress; anything here is incomplete and may be deleted
//	Root/lock             flock'd while index.json is updated
//
// A Builder is safe for concurrent use, and several processes may share one Root.
type Builder struct {
	Root string
	// MaxUnpackBytes bounds the uncompressed size of one image unpacked into a rootfs
	// (and of an OCI archive tarball extracted for import). Zero means DefaultMaxUnpackBytes.
	MaxUnpackBytes int64
	// RemoteOptions are passed to go-containerregistry's remote package for Import.Ref
	// (authentication, transport). Build adds the context and platform itself.
	RemoteOptions []remote.Option
}

// Build writes the seed's image into the layout, unpacks it once into Root/rootfs/<hex>, and
// returns the executors.Image that points at both.
//
// Build is idempotent. An image is complete once index.json lists it (all its blobs are
// written first); a rootfs is complete once it has been renamed into Root/rootfs. An
// interrupted Build leaves at most files under Root/tmp and orphan blobs.
func (b *Builder) Build(ctx context.Context, s *Spec) (executors.Image, error) {
	if s == nil {
		return executors.Image{}, errors.New("seed: nil spec")
	}
	label := s.Name
	if label == "" {
		label = "(unnamed)"
	}
	img, err := b.build(ctx, s)
	if err != nil {
		return executors.Image{}, fmt.Errorf("seed %s: %w", label, err)
	}
	return img, nil
}

// Built reports whether a Build of a Spec with this Key would find its image recorded,
// complete and unpacked, and so build, import and unpack nothing. It creates nothing under
// Root: a plan asks it of every seed, and planning writes nothing.
func (b *Builder) Built(key string) bool {
	if key == "" {
		return false
	}
	st, err := storeAt(b.Root)
	if err != nil {
		return false
	}
	h, ok := st.lookupKey(key)
	if !ok {
		return false
	}
	fi, err := os.Lstat(st.rootfsPath(h))
	return err == nil && fi.IsDir()
}

// Image returns the image whose manifest digest is d ("sha256:<hex>"), one the layout holds
// (built or imported before), unpacked, as Build returns it. An image the layout does not
// hold is an error wrapping fs.ErrNotExist: Image builds nothing.
func (b *Builder) Image(ctx context.Context, d string) (executors.Image, error) {
	h, err := v1.NewHash(d)
	if err != nil {
		return executors.Image{}, fmt.Errorf("image %q: %w", d, err)
	}
	st, err := openStore(b.Root)
	if err != nil {
		return executors.Image{}, err
	}
	if ok, err := st.inIndex(h); err != nil {
		return executors.Image{}, err
	} else if !ok {
		return executors.Image{}, fmt.Errorf("image %s: %w", d, fs.ErrNotExist)
	}
	return b.materialize(ctx, st, h)
}

func (b *Builder) build(ctx context.Context, s *Spec) (executors.Image, error) {
	if err := validateSpec(s); err != nil {
		return executors.Image{}, err
	}
	st, err := openStore(b.Root)
	if err != nil {
		return executors.Image{}, err
	}
	if s.Key != "" {
		if h, ok := st.lookupKey(s.Key); ok {
			return b.materialize(ctx, st, h)
		}
	}
	var h v1.Hash
	if s.Import != nil {
		h, err = b.importImage(ctx, st, s)
	} else {
		h, err = b.buildLayers(ctx, st, s)
	}
	if err != nil {
		return executors.Image{}, err
	}
	if err := st.addToIndex(h, s.Name); err != nil {
		return executors.Image{}, err
	}
	img, err := b.materialize(ctx, st, h)
	if err != nil {
		return executors.Image{}, err
	}
	if s.Key != "" {
		if err := st.recordKey(s.Key, h); err != nil {
			return executors.Image{}, err
		}
	}
	return img, nil
}

func validateSpec(s *Spec) error {
	if s.Import != nil && len(s.Layers) > 0 {
		return errors.New("spec has both import and layers; a seed is one or the other")
	}
	if s.Import == nil && len(s.Layers) == 0 {
		return errors.New("spec has neither import nor layers")
	}
	if s.Import == nil {
		if _, err := parsePlatform(s.Platform); err != nil {
			return err
		}
		if _, err := envList(s.Env); err != nil {
			return err
		}
	} else {
		if len(s.Env) > 0 || s.User != "" || s.Workdir != "" {
			return errors.New("env, user and workdir apply to built seeds; an imported image keeps its own configuration")
		}
		if s.Platform != "" {
			if _, err := parsePlatform(s.Platform); err != nil {
				return err
			}
		}
	}
	return nil
}

// materialize unpacks the image if needed and describes it for executors.
func (b *Builder) materialize(ctx context.Context, st *store, h v1.Hash) (executors.Image, error) {
	m, err := st.readManifest(h)
	if err != nil {
		return executors.Image{}, err
	}
	cfg, err := st.readConfig(m)
	if err != nil {
		return executors.Image{}, err
	}
	rootfs, err := b.ensureRootfs(ctx, st, h, m, cfg)
	if err != nil {
		return executors.Image{}, err
	}
	return executors.Image{
		Digest:     h.String(),
		LayoutPath: st.layout,
		Rootfs:     rootfs,
		Env:        append([]string(nil), cfg.Config.Env...),
		User:       cfg.Config.User,
		Workdir:    cfg.Config.WorkingDir,
	}, nil
}

// envList renders Env as KEY=VALUE sorted by key.
func envList(env map[string]string) ([]string, error) {
	keys := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("env key %q: must be non-empty without '=' or NUL", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("env %s: value contains NUL", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out, nil
}

// EnvMap reads an image's KEY=VALUE environment (executors.Image.Env) into the map a Spec
// takes; a later pair wins.
func EnvMap(kvs []string) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

type platform struct{ OS, Arch, Variant string }

func parsePlatform(p string) (platform, error) {
	parts := strings.Split(p, "/")
	if p == "" || len(parts) < 2 || len(parts) > 3 {
		return platform{}, fmt.Errorf("platform %q: want os/arch[/variant], e.g. linux/amd64", p)
	}
	for _, x := range parts {
		if x == "" || strings.ContainsAny(x, " \t\x00") {
			return platform{}, fmt.Errorf("platform %q: empty or invalid component", p)
		}
	}
	pl := platform{OS: parts[0], Arch: parts[1]}
	if len(parts) == 3 {
		pl.Variant = parts[2]
	}
	return pl, nil
}

// removeTemp removes a temporary path, ignoring errors: it lives under Root/tmp, where
// leftovers are harmless by construction.
func removeTemp(p string) { _ = os.RemoveAll(p) }

// rootfsPath is where the image with manifest digest h is unpacked.
func (st *store) rootfsPath(h v1.Hash) string { return filepath.Join(st.rootfs, h.Hex) }

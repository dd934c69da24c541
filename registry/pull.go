package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/sys/unix"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/store"
)

// Default limits for Pull; PullOptions.Limits overrides them.
const (
	DefaultMaxLayerBytes = 8 << 30 // one layer blob as stored
	DefaultMaxTreeBytes  = 8 << 30 // all files together, uncompressed
	DefaultMaxEntries    = 1 << 20 // entries in all layers together
	maxContractBytes     = 4 << 20
)

// Limits bound what Pull accepts from a registry; zero fields take the defaults.
type Limits struct {
	MaxLayerBytes int64
	MaxTreeBytes  int64
	MaxEntries    int
}

func (l Limits) withDefaults() Limits {
	if l.MaxLayerBytes <= 0 {
		l.MaxLayerBytes = DefaultMaxLayerBytes
	}
	if l.MaxTreeBytes <= 0 {
		l.MaxTreeBytes = DefaultMaxTreeBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// Quarantine is the part of engine/state Pull needs (*state.DB implements it).
type Quarantine interface {
	QuarantinedAmong(ctx context.Context, ds []digest.Digest) (map[digest.Digest]string, error)
}

// PullOptions say what Pull trusts and how much it accepts.
type PullOptions struct {
	// Keys are the trusted public keys; Pull refuses to run without one unless NoVerify.
	Keys []*provenance.Verifier
	// Policy is what verification requires beyond a signature (provenance.Policy; the
	// zero value requires SLSA provenance from Foundry's sandboxed builders).
	Policy provenance.Policy
	// NoVerify skips attestation checks. It must be asked for explicitly; digests, sizes,
	// the tree digest and safe extraction are still checked.
	NoVerify bool
	// Quarantine, if set, is consulted before anything is fetched: a quarantined manifest,
	// contract, tree or layer digest is refused.
	Quarantine Quarantine
	// AllowEscapingSymlinks accepts symlinks whose target is absolute or leaves the tree
	// (meaningful inside a container rootfs, dangerous on a host); off by default.
	AllowEscapingSymlinks bool
	Limits                Limits
	// Contract, if set, is the contract digest the capability is wanted for: a manifest whose
	// contract config has another digest is refused with ErrNotAdmitted before any layer is
	// fetched. Without it, the manifest's own contract is the one the evidence must bind.
	Contract digest.Digest
	// Release asks for a delivered release (PublishRelease) instead of a capability: the
	// manifest must be one (ParseRelease), and Pulled.Contract is then the release
	// manifest's digest (the release digest), Pulled.ContractJSON its exact bytes
	// (release.json). Verification is the caller's (with NoVerify): a release is vouched
	// for by its delivery receipt, not by an admission.
	Release bool
}

// ErrNotAdmitted is wrapped by Pull's errors when the artifact is not admitted for the
// contract: it is another contract's, or no verification summary binds its contract,
// manifest and the tree its layers form.
var ErrNotAdmitted = errors.New("not admitted for this contract")

// Pulled describes what Pull wrote.
type Pulled struct {
	Ref      string        `json:"ref"`
	Digest   digest.Digest `json:"digest"` // the capability manifest
	Tree     digest.Digest `json:"tree"`
	Contract digest.Digest `json:"contract"`
	// ContractJSON is the contract itself (canonical JSON, hashing to Contract).
	ContractJSON []byte `json:"-"`
	Name         string `json:"name"`
	Version      string `json:"version"`
	Target       string `json:"target"`
	Dest         string `json:"dest"`
	// Verified is false only with NoVerify.
	Verified bool `json:"verified"`
	// VerifiedSubject is the digest the accepted attestations name: the manifest digest or
	// the tree digest.
	VerifiedSubject digest.Digest `json:"verifiedSubject,omitempty"`
	// Report is provenance's report for the subject that verified (or for the manifest
	// digest, when none did).
	Report *provenance.Report `json:"report,omitempty"`
	// Skipped are the referrers that could not be read (Referrers).
	Skipped []Skipped `json:"skipped,omitempty"`
}

// VerificationError is returned when the attestations do not verify; Report says why.
type VerificationError struct {
	Digest digest.Digest
	Report *provenance.Report
}

func (e *VerificationError) Error() string {
	var reasons []string
	for _, a := range e.Report.Artifacts {
		for _, c := range a.Checks {
			if !c.OK {
				reasons = append(reasons, c.Detail)
			}
		}
	}
	return fmt.Sprintf("%s: attestations do not verify: %s", e.Digest, strings.Join(reasons, "; "))
}

// Unwrap makes a failed verification an ErrNotAdmitted.
func (e *VerificationError) Unwrap() error { return ErrNotAdmitted }

// QuarantinedError is returned for a quarantined digest.
type QuarantinedError struct {
	Digest digest.Digest
	Reason string
}

func (e *QuarantinedError) Error() string {
	return fmt.Sprintf("%s is quarantined: %s", e.Digest, e.Reason)
}

// Pull fetches the capability ref from s and writes its files to dest, which must not exist.
// ref is a tag or a digest ("sha256:<hex>"; a full "REPO@sha256:…" or "REPO:TAG" is
// accepted, the repository part being s). The order is what makes it safe:
//
//  1. a tag is resolved to a digest once; only the digest is used afterwards;
//  2. a quarantined digest is refused;
//  3. the manifest is fetched by digest, checked against it, and must be a Foundry
//     capability (OCI image manifest, Foundry artifactType) whose contract config is
//     opt.Contract when that is set;
//  4. the contract and layers are fetched, each checked against its descriptor, and the
//     tar entries checked strictly (no absolute paths, no "..", no hard links, no devices,
//     no entry under a symlink, no escaping symlink, size and entry limits) before each is
//     written into a temporary sibling of dest through an os.Root, which cannot reach
//     outside it; the tree they form must be the one the manifest declares;
//  5. unless NoVerify, the attached attestations must verify with Keys under Policy about
//     that recomputed tree — a verification summary only if it binds the manifest digest,
//     the contract digest and the tree together (provenance.Subject) — and only then is the
//     sibling renamed to dest. On any failure it is removed: dest is absent or whole.
func Pull(ctx context.Context, s Store, ref, dest string, opt PullOptions) (*Pulled, error) {
	if !opt.NoVerify && len(opt.Keys) == 0 {
		return nil, errors.New("pull: no public key to verify with (give a key, or skip verification explicitly)")
	}
	if opt.Release && !opt.NoVerify {
		return nil, errors.New("pull: a release is verified by its delivery receipt, by the caller (pull it with NoVerify)")
	}
	if _, err := os.Lstat(dest); err == nil {
		return nil, fmt.Errorf("pull: %s already exists (pull writes a new directory)", dest)
	}
	lim := opt.Limits.withDefaults()
	md, err := resolveRef(ctx, s, ref)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	out := &Pulled{Ref: ref, Digest: md, Dest: dest}
	if err := checkQuarantine(ctx, opt.Quarantine, md); err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	raw, _, err := fetchManifest(ctx, s, md)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	parse := ParseCapability
	if opt.Release {
		parse = ParseRelease
	}
	m, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("pull %s (%s): %w", ref, md, err)
	}
	out.Tree, out.Contract = digest.Digest(m.Annotations[AnnotationTree]), m.Config.Digest
	out.Name, out.Version, out.Target = m.Annotations[AnnotationTitle], m.Annotations[AnnotationVersion], m.Annotations[AnnotationTarget]
	if opt.Contract != "" && out.Contract != opt.Contract {
		return nil, fmt.Errorf("pull %s (%s): its contract is %s, not %s: %w", ref, md, out.Contract, opt.Contract, ErrNotAdmitted)
	}
	ds := []digest.Digest{out.Tree, out.Contract}
	for _, l := range m.Layers {
		ds = append(ds, l.Digest)
	}
	if err := checkQuarantine(ctx, opt.Quarantine, ds...); err != nil {
		return nil, fmt.Errorf("pull %s (%s): %w", ref, md, err)
	}
	contract, err := fetchBlobBytes(ctx, s, m.Config, maxContractBytes)
	if err != nil {
		return nil, fmt.Errorf("pull %s: contract: %w", ref, err)
	}
	// The contract's identity is the digest of its canonical form; anything else was not
	// published by Foundry.
	if canon, err := digest.Canonicalize(contract); err != nil || !bytes.Equal(canon, contract) {
		return nil, fmt.Errorf("pull %s: contract %s is not canonical JSON (RFC 8785)", ref, m.Config.Digest)
	}
	out.ContractJSON = contract
	for _, l := range m.Layers {
		if l.Size > lim.MaxLayerBytes {
			return nil, fmt.Errorf("pull %s: layer %s of %d bytes: %w (limit %d)", ref, l.Digest, l.Size, ErrTooLarge, lim.MaxLayerBytes)
		}
	}
	// Files are written into a temporary sibling of dest through an os.Root (the kernel
	// refuses any path that resolves outside it, symlinks included) and dest appears only by
	// rename once the whole tree has checked out and verified; on any failure the sibling is
	// removed.
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".foundry-pull-")
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	defer root.Close()
	x := newExtractor(root, lim, opt.AllowEscapingSymlinks)
	for _, l := range m.Layers {
		if err := x.layer(ctx, s, l); err != nil {
			return nil, fmt.Errorf("pull %s: layer %s: %w", ref, l.Digest, err)
		}
	}
	_, got, err := x.tree()
	if err != nil {
		return nil, fmt.Errorf("pull %s: the layers do not form a safe tree: %w", ref, err)
	}
	if got != out.Tree {
		return nil, fmt.Errorf("pull %s: the layers form tree %s, the manifest declares %s: %w", ref, got, out.Tree, ErrDigestMismatch)
	}
	if !opt.NoVerify {
		if err := verifyAttached(ctx, s, out, opt); err != nil {
			return out, fmt.Errorf("pull %s: %w", ref, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	// RENAME_NOREPLACE: a dest created since the check above is never replaced (a plain
	// rename would replace an empty directory).
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dest, unix.RENAME_NOREPLACE); err != nil {
		return nil, fmt.Errorf("pull %s: %s: %w", ref, dest, err)
	}
	done = true
	return out, nil
}

// resolveRef turns ref into a manifest digest, resolving a tag exactly once.
func resolveRef(ctx context.Context, s Store, ref string) (digest.Digest, error) {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return digest.Parse(ref[i+1:])
	}
	if strings.HasPrefix(ref, digest.Algorithm+":") {
		return digest.Parse(ref)
	}
	tag := ref
	if i := strings.LastIndex(ref, ":"); i >= 0 && !strings.Contains(ref[i:], "/") {
		tag = ref[i+1:]
	}
	if tag == "" {
		return "", errors.New("empty tag")
	}
	return s.Resolve(ctx, tag)
}

func checkQuarantine(ctx context.Context, q Quarantine, ds ...digest.Digest) error {
	if q == nil {
		return nil
	}
	found, err := q.QuarantinedAmong(ctx, ds)
	if err != nil {
		return fmt.Errorf("checking quarantine: %w", err)
	}
	for _, d := range ds {
		if r, ok := found[d]; ok {
			return &QuarantinedError{Digest: d, Reason: r}
		}
	}
	return nil
}

// ParseCapability parses raw as a Foundry capability manifest and checks what Pull relies
// on: the artifactType, the contract config, tar layers and the tree annotation.
func ParseCapability(raw []byte) (*Manifest, error) {
	m, err := ParseManifest(raw)
	if err != nil {
		return nil, err
	}
	if m.ArtifactType != ArtifactTypeCapability {
		return nil, fmt.Errorf("not a Foundry capability: artifactType %q, want %q", m.ArtifactType, ArtifactTypeCapability)
	}
	if m.Config.MediaType != MediaTypeContract {
		return nil, fmt.Errorf("config mediaType %q, want %q", m.Config.MediaType, MediaTypeContract)
	}
	return checkTreeArtifact(m)
}

// checkTreeArtifact checks what Pull relies on in a manifest whose layers form a tree: tar
// layers and the tree annotation.
func checkTreeArtifact(m *Manifest) (*Manifest, error) {
	for _, l := range m.Layers {
		if l.MediaType != MediaTypeLayerTar && l.MediaType != MediaTypeLayerGz {
			return nil, fmt.Errorf("layer %s: mediaType %q, want %s or %s", l.Digest, l.MediaType, MediaTypeLayerTar, MediaTypeLayerGz)
		}
	}
	if err := digest.Digest(m.Annotations[AnnotationTree]).Validate(); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationTree, err)
	}
	return m, nil
}

// ParseRelease parses raw as a release manifest that PublishRelease stored: the release
// artifactType, the release manifest as config, tar layers and the tree annotation.
func ParseRelease(raw []byte) (*Manifest, error) {
	m, err := ParseManifest(raw)
	if err != nil {
		return nil, err
	}
	if m.ArtifactType != ArtifactTypeRelease {
		return nil, fmt.Errorf("not a Foundry release: artifactType %q, want %q", m.ArtifactType, ArtifactTypeRelease)
	}
	if m.Config.MediaType != MediaTypeRelease {
		return nil, fmt.Errorf("config mediaType %q, want %q", m.Config.MediaType, MediaTypeRelease)
	}
	return checkTreeArtifact(m)
}

// verifyAttached checks the attestations attached to out.Digest, whose tree (recomputed from
// the layers) is out.Tree. A verification summary must bind the manifest, its contract and
// that tree; other required types may name the manifest or the tree. Every attached envelope
// is given to provenance.Verify as a candidate, so a chain of step provenance attached
// together verifies its dependencies among itself.
func verifyAttached(ctx context.Context, s Store, out *Pulled, opt PullOptions) error {
	atts, skipped, err := Referrers(ctx, s, out.Digest)
	if err != nil {
		return err
	}
	out.Skipped = skipped
	var cands []provenance.Attestation
	for _, a := range atts {
		cands = append(cands, provenance.Attestation{Source: refString(s, out.Digest) + " referrer " + string(a.Digest), Envelope: a.Envelope})
	}
	vopt := provenance.Options{Keys: opt.Keys, Policy: opt.Policy, Attestations: cands}
	subjects := []provenance.Subject{
		{Name: out.Ref, Digest: string(out.Tree), Contract: string(out.Contract), Manifest: string(out.Digest)},
	}
	if !slices.Contains(opt.Policy.PredicateTypes, provenance.PredicateVSA) {
		// Provenance or test results alone name the manifest or the tree; neither binds a
		// contract, so they are asked about both.
		subjects = []provenance.Subject{{Name: out.Ref, Digest: string(out.Digest)}, {Name: out.Ref, Digest: string(out.Tree)}}
	}
	var first *provenance.Report
	for _, subj := range subjects {
		rep, err := provenance.Verify(ctx, vopt, subj)
		if err != nil {
			return err
		}
		if rep.OK {
			out.Verified, out.VerifiedSubject, out.Report = true, digest.Digest(subj.Digest), rep
			return nil
		}
		if first == nil {
			first = rep
		}
	}
	out.Report = first
	return &VerificationError{Digest: out.Digest, Report: first}
}

// extractor writes layers into an os.Root and records the tree they form. Entries are
// checked before anything is created: the path (clean, relative, no ".."), its parent (a
// directory entry seen earlier, so nothing is ever created under a symlink), its type
// (files, directories, symlinks that stay inside the tree; hard links and devices refused)
// and the size and entry budgets. Files are created with O_EXCL, hashed as written.
type extractor struct {
	root        *os.Root
	lim         Limits
	allowEscape bool
	entries     []digest.Entry
	kinds       map[string]string // path → entry type
	treeBytes   int64             // file bytes still allowed
}

func newExtractor(root *os.Root, lim Limits, allowEscape bool) *extractor {
	return &extractor{root: root, lim: lim, allowEscape: allowEscape, kinds: map[string]string{}, treeBytes: lim.MaxTreeBytes}
}

func (x *extractor) layer(ctx context.Context, s Store, desc Descriptor) error {
	rc, err := openVerified(ctx, s, desc)
	if err != nil {
		return err
	}
	defer rc.Close()
	var r io.Reader = store.ContextReader(ctx, rc)
	if desc.MediaType == MediaTypeLayerGz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		if len(x.kinds) >= x.lim.MaxEntries {
			return fmt.Errorf("more than %d entries: %w", x.lim.MaxEntries, ErrTooLarge)
		}
		if err := x.entry(hdr, tr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	// Read the rest (padding, a gzip trailer) so that the digest check at EOF runs: nothing
	// read from this layer counts until it has passed.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return err
	}
	return nil
}

// entryPath checks a tar entry name and returns it as a tree path.
func entryPath(name string) (string, error) {
	p := strings.TrimSuffix(name, "/")
	switch {
	case p == "" || p == ".":
		return "", nil // the root itself
	case strings.ContainsRune(p, 0) || !utf8.ValidString(p):
		return "", errors.New("name is not valid UTF-8 or contains NUL")
	case strings.HasPrefix(p, "/"):
		return "", errors.New("absolute path refused")
	case p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		return "", errors.New("path with .. refused")
	case path.Clean(p) != p:
		return "", errors.New("path is not clean")
	}
	return p, nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	p, err := entryPath(hdr.Name)
	if err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if p == "" {
		if hdr.Typeflag != tar.TypeDir {
			return errors.New("root entry that is not a directory")
		}
		return nil
	}
	if _, dup := x.kinds[p]; dup {
		return errors.New("path appears twice")
	}
	if parent := path.Dir(p); parent != "." && x.kinds[parent] != digest.TypeDir {
		return fmt.Errorf("its parent %q is not a directory of the tree (listed earlier)", parent)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := x.root.Mkdir(p, 0o755); err != nil {
			return err
		}
		x.add(digest.Entry{Path: p, Type: digest.TypeDir, Mode: digest.ModeDir})
	case tar.TypeReg: // the tar reader reports the legacy TypeRegA as TypeReg
		if hdr.Size > x.treeBytes {
			return fmt.Errorf("file of %d bytes exceeds the tree limit of %d bytes: %w", hdr.Size, x.lim.MaxTreeBytes, ErrTooLarge)
		}
		x.treeBytes -= hdr.Size
		mode, perm := digest.ModeFile, os.FileMode(0o644)
		if hdr.Mode&0o100 != 0 {
			mode, perm = digest.ModeExecutable, 0o755
		}
		f, err := x.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return err
		}
		d, n, err := digest.FromReader(io.TeeReader(io.LimitReader(r, hdr.Size), f))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if n != hdr.Size {
			return fmt.Errorf("file truncated: %d of %d bytes", n, hdr.Size)
		}
		x.add(digest.Entry{Path: p, Type: digest.TypeFile, Mode: mode, Size: n, Digest: d})
	case tar.TypeSymlink:
		t := hdr.Linkname
		if t == "" || strings.ContainsRune(t, 0) || !utf8.ValidString(t) {
			return errors.New("symlink with an empty, NUL or non-UTF-8 target")
		}
		if !x.allowEscape {
			if path.IsAbs(t) {
				return fmt.Errorf("symlink to absolute path %q refused", t)
			}
			if j := path.Join(path.Dir(p), t); j == ".." || strings.HasPrefix(j, "../") {
				return fmt.Errorf("symlink to %q leaves the tree", t)
			}
		}
		if err := x.root.Symlink(t, p); err != nil {
			return err
		}
		x.add(digest.Entry{Path: p, Type: digest.TypeSymlink, Mode: digest.ModeSymlink, Target: t})
	case tar.TypeLink:
		return fmt.Errorf("hard link to %q refused (capability layers never contain hard links)", hdr.Linkname)
	default:
		return fmt.Errorf("entry type %q refused (only files, directories and symlinks)", hdr.Typeflag)
	}
	return nil
}

func (x *extractor) add(e digest.Entry) {
	x.entries = append(x.entries, e)
	x.kinds[e.Path] = e.Type
}

// tree returns the canonical manifest of what the layers held and its digest, after the
// checks that make it safe to materialize (store.ParseManifest: clean relative paths, no
// duplicates, every parent a directory of the tree, so nothing sits under a symlink).
func (x *extractor) tree() ([]byte, digest.Digest, error) {
	entries := append([]digest.Entry{}, x.entries...) // an empty tree is {"entries":[]}, never null
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	canon, err := digest.Canonical(&digest.Manifest{Entries: entries})
	if err != nil {
		return nil, "", err
	}
	if _, err := store.ParseManifest(canon); err != nil {
		return nil, "", err
	}
	return canon, digest.FromBytes(canon), nil
}

package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/foundry-build/foundry/digest"
)

// Layout is a Store over an OCI image layout directory (image-spec v1.1 "oci-layout"):
// blobs/sha256/<hex> for every blob and manifest, index.json listing the manifests, tags as
// org.opencontainers.image.ref.name annotations. Any OCI tool that reads layouts (crane,
// oras, skopeo) can read it.
//
// Every manifest Foundry stores gets an index.json entry (so nothing it wrote is garbage to
// a layout GC); a manifest with a subject also gets the annotation AnnotationLayoutSubject,
// which is how Referrers finds referrers without reading every manifest. Writers are
// serialized by a lock file, across goroutines and processes, and index.json is replaced
// atomically (temporary file, fsync, rename), so a reader never sees half of it.
type Layout struct {
	dir string
	mu  sync.Mutex // serializes this process's index.json updates before the file lock
}

// Annotations Foundry sets in a layout's index.json.
const (
	// AnnotationRefName is the image spec's tag annotation in index.json.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationLayoutSubject records, on an index.json entry, the subject digest of the
	// manifest it lists, so that Referrers is a scan of index.json.
	AnnotationLayoutSubject = "dev.foundry.layout.subject"
)

const (
	layoutIndexLock  = ".foundry-index.lock"
	layoutAttachLock = ".foundry-attach.lock"
	// maxLayoutIndex bounds index.json, which grows with the store (not a remote document).
	maxLayoutIndex = 256 << 20
)

// OpenLayout opens the OCI layout at dir, creating an empty one if dir does not exist or is
// empty. A non-empty directory that is not a layout is refused rather than written into.
func OpenLayout(dir string) (*Layout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("oci layout %s: %w", dir, err)
	}
	l := &Layout{dir: abs}
	if _, err := os.Stat(filepath.Join(abs, "oci-layout")); err == nil {
		if err := os.MkdirAll(filepath.Join(abs, "blobs", "sha256"), 0o755); err != nil {
			return nil, fmt.Errorf("oci layout %s: %w", dir, err)
		}
		if _, err := l.readIndex(); err != nil {
			return nil, err
		}
		return l, nil
	}
	if ents, err := os.ReadDir(abs); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("oci layout %s: directory exists, is not empty, and has no oci-layout file", dir)
	}
	if err := os.MkdirAll(filepath.Join(abs, "blobs", "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("oci layout %s: %w", dir, err)
	}
	err = l.update(func(ix *Index) bool { return true })
	if err == nil {
		err = writeFileAtomic(filepath.Join(abs, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`))
	}
	if err != nil {
		return nil, fmt.Errorf("oci layout %s: %w", dir, err)
	}
	return l, nil
}

// Dir returns the layout's directory.
func (l *Layout) Dir() string { return l.dir }

func (l *Layout) String() string { return LayoutScheme + l.dir }

func (l *Layout) blobPath(d digest.Digest) string {
	return filepath.Join(l.dir, "blobs", "sha256", d.Hex())
}

// readIndex reads index.json; a missing file is an empty index.
func (l *Layout) readIndex() (*Index, error) {
	f, err := os.Open(filepath.Join(l.dir, "index.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return &Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oci layout %s: %w", l.dir, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLayoutIndex+1))
	if err != nil {
		return nil, fmt.Errorf("oci layout %s: index.json: %w", l.dir, err)
	}
	if len(b) > maxLayoutIndex {
		return nil, fmt.Errorf("oci layout %s: index.json larger than %d bytes", l.dir, maxLayoutIndex)
	}
	var ix Index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("oci layout %s: index.json: %w", l.dir, err)
	}
	if ix.SchemaVersion != 2 {
		return nil, fmt.Errorf("oci layout %s: index.json: schemaVersion %d, want 2", l.dir, ix.SchemaVersion)
	}
	if ix.Manifests == nil {
		ix.Manifests = []Descriptor{}
	}
	return &ix, nil
}

// flock takes an exclusive lock on the named lock file in the layout directory.
func (l *Layout) flock(ctx context.Context, name string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(l.dir, name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("oci layout %s: lock: %w", l.dir, err)
	}
	// Blocking flock cannot be cancelled, so poll: a writer holds it for milliseconds.
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("oci layout %s: lock: %w", l.dir, err)
		}
		if err := sleepCtx(ctx); err != nil {
			f.Close()
			return nil, fmt.Errorf("oci layout %s: waiting for lock %s: %w", l.dir, name, err)
		}
	}
}

// update runs fn on index.json under the lock and writes the result if fn reports a change.
func (l *Layout) update(fn func(ix *Index) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	unlock, err := l.flock(context.Background(), layoutIndexLock)
	if err != nil {
		return err
	}
	defer unlock()
	ix, err := l.readIndex()
	if err != nil {
		return err
	}
	if !fn(ix) {
		return nil
	}
	b, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return fmt.Errorf("oci layout %s: index.json: %w", l.dir, err)
	}
	if err := writeFileAtomic(filepath.Join(l.dir, "index.json"), append(b, '\n')); err != nil {
		return fmt.Errorf("oci layout %s: index.json: %w", l.dir, err)
	}
	return nil
}

func (l *Layout) lockSubject(ctx context.Context, _ digest.Digest) (func(), error) {
	// One lock for all subjects: attaching is rare and short; per-subject files would
	// litter the layout.
	return l.flock(ctx, layoutAttachLock)
}

func (l *Layout) Resolve(_ context.Context, tag string) (digest.Digest, error) {
	ix, err := l.readIndex()
	if err != nil {
		return "", err
	}
	for _, d := range ix.Manifests {
		if d.Annotations[AnnotationRefName] == tag {
			return d.Digest, nil
		}
	}
	return "", fmt.Errorf("%s: tag %q: %w", l, tag, ErrNotFound)
}

func (l *Layout) Manifest(_ context.Context, d digest.Digest) ([]byte, string, error) {
	if err := d.Validate(); err != nil {
		return nil, "", err
	}
	f, err := os.Open(l.blobPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%s: manifest %s: %w", l, d, ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: manifest %s: %w", l, d, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("%s: manifest %s: %w", l, d, err)
	}
	var head struct {
		MediaType string `json:"mediaType"`
	}
	_ = json.Unmarshal(raw, &head) // a bad document is the caller's to refuse
	return raw, head.MediaType, nil
}

func (l *Layout) PutManifest(_ context.Context, raw []byte, mediaType string) (digest.Digest, error) {
	desc := descriptorOf(mediaType, raw)
	head, err := parseManifestHead(raw)
	if err != nil {
		return "", fmt.Errorf("%s: put manifest: %w", l, err)
	}
	desc.ArtifactType = head.ArtifactType
	if head.Subject != nil {
		desc.Annotations = map[string]string{AnnotationLayoutSubject: string(head.Subject.Digest)}
		if desc.ArtifactType == "" {
			desc.ArtifactType = head.Config.MediaType // as the referrers API reports it
		}
	}
	if err := l.putBytes(desc.Digest, raw); err != nil {
		return "", err
	}
	err = l.update(func(ix *Index) bool {
		for _, e := range ix.Manifests {
			if e.Digest == desc.Digest && e.Annotations[AnnotationRefName] == "" {
				return false
			}
		}
		ix.Manifests = append(ix.Manifests, desc)
		return true
	})
	if err != nil {
		return "", err
	}
	return desc.Digest, nil
}

func (l *Layout) putTagged(ctx context.Context, raw []byte, mediaType, tag string) (digest.Digest, error) {
	d, err := l.PutManifest(ctx, raw, mediaType)
	if err != nil {
		return "", err
	}
	return d, l.Tag(ctx, tag, d)
}

func (l *Layout) PushReferrer(ctx context.Context, raw []byte, mediaType string) (digest.Digest, error) {
	return l.PutManifest(ctx, raw, mediaType)
}

func (l *Layout) Tag(_ context.Context, tag string, d digest.Digest) error {
	if tag == "" {
		return errors.New("tag: empty tag")
	}
	var entry *Descriptor
	ix, err := l.readIndex()
	if err != nil {
		return err
	}
	for _, e := range ix.Manifests {
		if e.Digest == d {
			e := e
			entry = &e
			break
		}
	}
	if entry == nil {
		return fmt.Errorf("%s: tag %s: manifest %s: %w", l, tag, d, ErrNotFound)
	}
	tagged := Descriptor{MediaType: entry.MediaType, Digest: d, Size: entry.Size, ArtifactType: entry.ArtifactType,
		Annotations: map[string]string{AnnotationRefName: tag}}
	return l.update(func(ix *Index) bool {
		out := ix.Manifests[:0]
		for _, e := range ix.Manifests {
			if e.Annotations[AnnotationRefName] != tag {
				out = append(out, e)
			}
		}
		ix.Manifests = append(out, tagged)
		return true
	})
}

func (l *Layout) Blob(_ context.Context, d digest.Digest) (io.ReadCloser, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	f, err := os.Open(l.blobPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: blob %s: %w", l, d, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: blob %s: %w", l, d, err)
	}
	return f, nil
}

// hasBlob reports whether blob d is present with the given size. Blobs are written only by
// a verified, atomic rename, so presence with the right size is enough.
func (l *Layout) hasBlob(d digest.Digest, size int64) bool {
	fi, err := os.Stat(l.blobPath(d))
	return err == nil && fi.Mode().IsRegular() && (size < 0 || fi.Size() == size)
}

func (l *Layout) PutBlob(_ context.Context, d digest.Digest, size int64, open func() (io.ReadCloser, error)) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if l.hasBlob(d, size) {
		return nil
	}
	rc, err := open()
	if err != nil {
		return fmt.Errorf("%s: put blob %s: %w", l, d, err)
	}
	defer rc.Close()
	return l.putReader(d, size, rc)
}

func (l *Layout) putBytes(d digest.Digest, b []byte) error {
	if l.hasBlob(d, int64(len(b))) {
		return nil
	}
	return l.putReader(d, int64(len(b)), bytes.NewReader(b))
}

// putReader stores a blob of known digest and size from r; anything else is refused.
func (l *Layout) putReader(d digest.Digest, size int64, r io.Reader) error {
	_, _, err := l.writeBlob(io.LimitReader(r, size+1), func(got digest.Digest, n int64) error {
		if n != size || got != d {
			return fmt.Errorf("content is %d bytes with digest %s, want %d bytes with %s", n, got, size, d)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: put blob %s: %w", l, d, err)
	}
	return nil
}

// Referrers lists index.json entries whose recorded subject is d, plus the entries of the
// referrers tag schema's index ("sha256-<hex>") if a tool that writes it copied one in.
func (l *Layout) Referrers(ctx context.Context, d digest.Digest) ([]v1.Descriptor, error) {
	ix, err := l.readIndex()
	if err != nil {
		return nil, err
	}
	seen := map[digest.Digest]bool{}
	var out []v1.Descriptor
	for _, e := range ix.Manifests {
		if e.Annotations[AnnotationLayoutSubject] == string(d) && !seen[e.Digest] {
			seen[e.Digest] = true
			e.Annotations = nil
			out = append(out, e.toV1())
		}
	}
	if fd, err := l.Resolve(ctx, fallbackTag(d)); err == nil {
		raw, _, err := l.Manifest(ctx, fd)
		if err != nil {
			return nil, err
		}
		fix, err := ParseIndex(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: referrers tag %s: %w", l, fallbackTag(d), err)
		}
		for _, e := range fix.Manifests {
			if !seen[e.Digest] {
				seen[e.Digest] = true
				out = append(out, e.toV1())
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest.String() < out[j].Digest.String() })
	return out, nil
}

// Descriptors returns index.json's entries (for serving the layout and for tests).
func (l *Layout) Descriptors() ([]Descriptor, error) {
	ix, err := l.readIndex()
	if err != nil {
		return nil, err
	}
	return ix.Manifests, nil
}

func writeFileAtomic(p string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// putBlobStream stores what r yields as a blob in one pass, named by the digest computed
// as it is written (Publish's single-pass layer upload).
func (l *Layout) putBlobStream(_ context.Context, r io.Reader) (digest.Digest, int64, error) {
	d, n, err := l.writeBlob(r, nil)
	if err != nil {
		return "", 0, fmt.Errorf("%s: put blob: %w", l, err)
	}
	return d, n, nil
}

// putStream stores a blob of unknown size from r (a server upload), checking the digest.
func (l *Layout) putStream(d digest.Digest, r io.Reader) error {
	_, _, err := l.writeBlob(r, func(got digest.Digest, _ int64) error {
		if got != d {
			return fmt.Errorf("content has digest %s: %w", got, ErrDigestMismatch)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: put blob %s: %w", l, d, err)
	}
	return nil
}

// writeBlob copies r to a temporary file beside the blobs while hashing it, lets check
// refuse what it got, then fsyncs and renames it to its digest: a blob file that exists is
// complete and correct. A blob already present is kept and the copy dropped.
func (l *Layout) writeBlob(r io.Reader, check func(got digest.Digest, n int64) error) (digest.Digest, int64, error) {
	f, err := os.CreateTemp(filepath.Join(l.dir, "blobs", "sha256"), ".tmp-")
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	d := digest.Digest("sha256:" + hex.EncodeToString(h.Sum(nil)))
	if err == nil && check != nil {
		err = check(d, n)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && l.hasBlob(d, n) {
		os.Remove(f.Name())
		return d, n, nil
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), l.blobPath(d))
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return d, n, nil
}

// manifestHead is what the layout indexes of a manifest: its artifact type and subject.
type manifestHead struct {
	ArtifactType string      `json:"artifactType"`
	Subject      *Descriptor `json:"subject"`
	Config       struct {
		MediaType string `json:"mediaType"`
	} `json:"config"`
}

// parseManifestHead reads a manifest's head; anything but a JSON object with a valid
// subject digest (if any) is refused.
func parseManifestHead(raw []byte) (manifestHead, error) {
	var head manifestHead
	if err := json.Unmarshal(raw, &head); err != nil {
		return head, err
	}
	if head.Subject != nil {
		if err := head.Subject.Digest.Validate(); err != nil {
			return head, fmt.Errorf("subject: %w", err)
		}
	}
	return head, nil
}

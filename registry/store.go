package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/foundry-build/foundry/digest"
)

// Store is where OCI content lives: an OCI image layout on disk or a remote registry. It is
// deliberately small so that a new backend is cheap; Publish, Attach, Referrers and Pull are
// written once on top of it. Implementations must be safe for concurrent use.
//
// A Store returns what it holds without vouching for it: callers check manifests against
// the digest they asked for and blobs against their descriptors (see fetchManifest and
// fetchBlob), because a remote registry is not trusted.
type Store interface {
	// Resolve returns the digest of the manifest that tag names now. Callers resolve a tag
	// once and use only the digest afterwards (a tag can move between two requests).
	Resolve(ctx context.Context, tag string) (digest.Digest, error)
	// Manifest returns the stored bytes and media type of the manifest d.
	Manifest(ctx context.Context, d digest.Digest) (raw []byte, mediaType string, err error)
	// PutManifest stores raw, of the given media type, under its digest and returns that
	// digest. A manifest with a subject is recorded as a referrer of it (PushReferrer is
	// the same call, named for readers).
	PutManifest(ctx context.Context, raw []byte, mediaType string) (digest.Digest, error)
	// Tag points tag at the stored manifest d.
	Tag(ctx context.Context, tag string, d digest.Digest) error
	// Blob opens the blob d. The bytes are not verified.
	Blob(ctx context.Context, d digest.Digest) (io.ReadCloser, error)
	// PutBlob stores the size bytes that open returns as blob d, unless d is already
	// there. open may be called more than once (a retried upload); the bytes are checked
	// against d before the blob becomes visible.
	PutBlob(ctx context.Context, d digest.Digest, size int64, open func() (io.ReadCloser, error)) error
	// Referrers lists the manifests that name d as their subject, as the registry reports
	// them (the referrers API, or the "sha256-<hex>" tag index where there is none). The
	// list is a hint: read each manifest before trusting what it says about its subject.
	Referrers(ctx context.Context, d digest.Digest) ([]v1.Descriptor, error)
	// PushReferrer stores raw, a manifest with a subject, and records it as a referrer of
	// that subject: the registry does it where it has the referrers API, the store updates
	// the "sha256-<hex>" tag index where it does not.
	PushReferrer(ctx context.Context, raw []byte, mediaType string) (digest.Digest, error)
	// String is the store's address, as Open accepts it.
	String() string
}

// subjectLocker is implemented by stores that can serialize writers across processes (the
// layout, with a lock file). Attach takes the lock for the whole read-modify-write of one
// subject's attachments.
type subjectLocker interface {
	lockSubject(ctx context.Context, d digest.Digest) (unlock func(), err error)
}

// blobStreamer is implemented by stores that can take a blob whose digest is computed
// while it is written (Publish uses it to read a layer once instead of twice).
type blobStreamer interface {
	putBlobStream(ctx context.Context, r io.Reader) (digest.Digest, int64, error)
}

// tagPutter is implemented by stores that can store a manifest and tag it in one step.
type tagPutter interface {
	putTagged(ctx context.Context, raw []byte, mediaType, tag string) (digest.Digest, error)
}

// putTagged stores raw and points tag at it, in one request where the store allows.
func putTagged(ctx context.Context, s Store, raw []byte, mediaType, tag string) (digest.Digest, error) {
	if tp, ok := s.(tagPutter); ok {
		return tp.putTagged(ctx, raw, mediaType, tag)
	}
	d, err := s.PutManifest(ctx, raw, mediaType)
	if err != nil {
		return "", err
	}
	return d, s.Tag(ctx, tag, d)
}

// ErrNotFound is wrapped by Store errors for a tag, manifest or blob that is not there.
var ErrNotFound = errors.New("not found")

// LayoutScheme prefixes the address of an OCI layout store: "oci-layout:PATH".
const LayoutScheme = "oci-layout:"

// Open opens the store at addr: "oci-layout:PATH" for an OCI image layout directory
// (created if missing), otherwise "host[:port]/repo" for a registry. Plain HTTP is used only
// for 127.0.0.1, ::1 and localhost (like crane --insecure for local registries); every other
// host is HTTPS. Credentials come from the Docker config (~/.docker/config.json), as for
// crane and cosign.
func Open(addr string) (Store, error) {
	if p, ok := strings.CutPrefix(addr, LayoutScheme); ok {
		if p == "" {
			return nil, fmt.Errorf("registry address %q: empty layout path (want oci-layout:PATH)", addr)
		}
		return OpenLayout(p)
	}
	if strings.Contains(addr, "://") {
		return nil, fmt.Errorf("registry address %q: give host[:port]/repo without a scheme, or oci-layout:PATH", addr)
	}
	return OpenRemote(addr)
}

// hashOf converts a Foundry digest to go-containerregistry's form.
func hashOf(d digest.Digest) (v1.Hash, error) {
	if err := d.Validate(); err != nil {
		return v1.Hash{}, err
	}
	return v1.NewHash(string(d))
}

// fallbackTag is the referrers tag schema's tag for subject d: "sha256-<hex>".
func fallbackTag(d digest.Digest) string { return "sha256-" + d.Hex() }

// cosignAttTag is where cosign (legacy, non-bundle format) looks for attestations of d.
func cosignAttTag(d digest.Digest) string { return "sha256-" + d.Hex() + ".att" }

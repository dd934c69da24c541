package fetch

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/lang"
)

// titleAnnotation names the file a layer of an OCI artifact holds (as ORAS writes them).
const titleAnnotation = "org.opencontainers.image.title"

// fetchOCI fetches the manifest pinned by ref (HOST[:PORT]/REPO@sha256:…) and every layer it
// names, each checked against its digest as it is stored, and makes the tree: an image's
// layers applied in order (whiteouts honoured), or an artifact's layers each a file named
// by its title annotation. An index is refused: its digest does not say which manifest.
func (f *Fetcher) fetchOCI(ctx context.Context, c *client, s *lang.Source, ref string) ([]cache.Output, error) {
	d, err := name.NewDigest(ref, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(loopbackOnlyHTTP(c.http().Transport)),
		remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithUserAgent("foundry")}
	desc, err := remote.Get(d, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if got := digest.FromBytes(desc.Manifest); string(got) != s.Pin {
		return nil, &MismatchError{URL: ref, Expected: s.Pin, Actual: string(got)}
	}
	if desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("%s is an index of manifests; pin the manifest of one platform instead (crane digest --platform …)", ref)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	var total int64
	for _, l := range m.Layers {
		if l.Digest.Algorithm != "sha256" {
			return nil, fmt.Errorf("%s: layer %s is not addressed by sha256", ref, l.Digest)
		}
		total += l.Size
	}
	if total > s.Limits.Download {
		return nil, fmt.Errorf("%s: its layers hold %d bytes, more than the %d the source may download (limits.download): %w", ref, total, s.Limits.Download, ErrTooLarge)
	}
	t := newTree(ctx, f.Store, s.Limits, true)
	for i, l := range m.Layers {
		ld := digest.Digest(l.Digest.String())
		if ok, _ := f.Store.Has(ld); !ok {
			layer, err := remote.Layer(d.Context().Digest(l.Digest.String()), opts...)
			if err != nil {
				return nil, fmt.Errorf("%s: layer %s: %w", ref, ld.Short(), err)
			}
			rc, err := layer.Compressed()
			if err != nil {
				return nil, fmt.Errorf("%s: layer %s: %w", ref, ld.Short(), err)
			}
			_, err = f.Store.PutExpected(rc, ld)
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: layer %s: %w", ref, ld.Short(), err)
			}
		}
		t.layer = i + 1
		if err := f.ociLayer(t, ld, l); err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", ref, ld.Short(), err)
		}
	}
	tree, err := t.store()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	ts, _ := f.Store.Stat(tree)
	return []cache.Output{{Path: TreeOutput, Kind: cache.Tree, Digest: tree, Size: ts}}, nil
}

// ociLayer adds a stored layer to t: a filesystem changeset unpacked, or an artifact's file.
func (f *Fetcher) ociLayer(t *tree, ld digest.Digest, l v1.Descriptor) error {
	file, err := f.Store.Open(ld)
	if err != nil {
		return err
	}
	defer file.Close()
	r, isTar, err := layerReader(file, string(l.MediaType))
	if err != nil {
		return err
	}
	if isTar {
		defer r.Close()
		return unpackTar(t, r, 0, true)
	}
	title := l.Annotations[titleAnnotation]
	if title == "" {
		return refuse("a layer of media type %s that is not a filesystem layer names no file (annotation %s)", l.MediaType, titleAnnotation)
	}
	p, err := cleanName(title)
	if err != nil || p == "" {
		return refuse("layer title %q is not a file name inside the tree", title)
	}
	return t.file(p, 0o644, file)
}

// loopbackOnlyHTTP refuses plain HTTP to a registry that is not on the loopback interface
// (go-containerregistry would speak it to private addresses too): the registry's
// credentials would cross the network in the clear.
func loopbackOnlyHTTP(next http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Scheme == "http" {
			hp, err := lang.URLHostPort(req.URL)
			a, isIP := hp.Addr()
			if err != nil || !(isIP && a.IsLoopback() || strings.EqualFold(hp.Host, "localhost")) {
				return nil, fmt.Errorf("refusing plain HTTP to the registry %s: only a loopback registry may be reached without TLS", req.URL.Host)
			}
		}
		return next.RoundTrip(req)
	})
}

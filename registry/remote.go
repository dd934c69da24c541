package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/foundry-build/foundry/digest"
)

// Remote is a Store over one repository of an OCI distribution registry, through
// go-containerregistry's remote package. Where the registry has no referrers API,
// go-containerregistry maintains the referrers tag schema's "sha256-<hex>" index on push and
// reads it on list; Attach serializes pushes per subject in this process so that index never
// loses an entry (the registry offers no conditional update, so two processes attaching to
// one subject at once can still race: see spec/artifact.md).
type Remote struct {
	repo name.Repository
	addr string
	opts []remote.Option

	mu      sync.Mutex
	clients map[string]*http.Client // authenticated clients by scope action; see client
}

// OpenRemote opens the repository at addr ("host[:port]/repo"). It does not contact the
// registry.
func OpenRemote(addr string) (*Remote, error) {
	repo, err := name.NewRepository(addr, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("registry address %q: %w (want host[:port]/repo)", addr, err)
	}
	base := []remote.Option{
		remote.WithTransport(loopbackOnlyHTTP{remote.DefaultTransport}),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("foundry"),
	}
	// A puller and a pusher keep one authenticated transport per repository, so that each
	// call does not ping /v2/ and fetch a token again (half the round trips of an attach).
	puller, err := remote.NewPuller(base...)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", addr, err)
	}
	pusher, err := remote.NewPusher(base...)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", addr, err)
	}
	return &Remote{repo: repo, addr: addr, opts: append(base, remote.Reuse(puller), remote.Reuse(pusher))}, nil
}

func (r *Remote) String() string { return r.addr }

// Repository returns the registry repository (for references shown to users).
func (r *Remote) Repository() name.Repository { return r.repo }

func (r *Remote) with(ctx context.Context) []remote.Option {
	return append(r.opts[:len(r.opts):len(r.opts)], remote.WithContext(ctx))
}

// loopbackOnlyHTTP refuses plain HTTP to anything but the loopback interface.
// go-containerregistry would also use HTTP for RFC 1918 and *.local hosts; a registry on
// another machine must use TLS, since pulled content is only as safe as the channel that
// delivered the manifest digest being resolved.
type loopbackOnlyHTTP struct{ next http.RoundTripper }

func (t loopbackOnlyHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !isLoopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("refusing plain HTTP to %s: only 127.0.0.1, ::1 and localhost may be reached without TLS", req.URL.Host)
	}
	return t.next.RoundTrip(req)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// remoteErr adds context and maps a registry 404 to ErrNotFound.
func (r *Remote) remoteErr(what string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s: %s: %w (%v)", r.addr, what, ErrNotFound, err)
	}
	return fmt.Errorf("%s: %s: %w", r.addr, what, err)
}

func (r *Remote) Resolve(ctx context.Context, tag string) (digest.Digest, error) {
	ref := r.repo.Tag(tag)
	desc, err := remote.Head(ref, r.with(ctx)...)
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return "", r.remoteErr("resolve tag "+tag, err)
	}
	if err != nil {
		// Some registries answer HEAD without Docker-Content-Digest; GET always names it.
		d, gerr := remote.Get(ref, r.with(ctx)...)
		if gerr != nil {
			return "", r.remoteErr("resolve tag "+tag, gerr)
		}
		desc = &d.Descriptor
	}
	return digest.Parse(desc.Digest.String())
}

func (r *Remote) Manifest(ctx context.Context, d digest.Digest) ([]byte, string, error) {
	if err := d.Validate(); err != nil {
		return nil, "", err
	}
	desc, err := remote.Get(r.repo.Digest(string(d)), r.with(ctx)...)
	if err != nil {
		return nil, "", r.remoteErr("manifest "+string(d), err)
	}
	return desc.Manifest, string(desc.MediaType), nil
}

type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

func (r *Remote) PutManifest(ctx context.Context, raw []byte, mediaType string) (digest.Digest, error) {
	d := digest.FromBytes(raw)
	if err := remote.Put(r.repo.Digest(string(d)), rawManifest{raw, types.MediaType(mediaType)}, r.with(ctx)...); err != nil {
		return "", r.remoteErr("put manifest "+string(d), err)
	}
	return d, nil
}

func (r *Remote) PushReferrer(ctx context.Context, raw []byte, mediaType string) (digest.Digest, error) {
	return r.PutManifest(ctx, raw, mediaType)
}

// putTagged stores raw under tag in one request (Tag would fetch it back first).
func (r *Remote) putTagged(ctx context.Context, raw []byte, mediaType, tag string) (digest.Digest, error) {
	if err := remote.Put(r.repo.Tag(tag), rawManifest{raw, types.MediaType(mediaType)}, r.with(ctx)...); err != nil {
		return "", r.remoteErr("put manifest as "+tag, err)
	}
	return digest.FromBytes(raw), nil
}

func (r *Remote) Tag(ctx context.Context, tag string, d digest.Digest) error {
	raw, mt, err := r.Manifest(ctx, d)
	if err != nil {
		return err
	}
	if err := remote.Put(r.repo.Tag(tag), rawManifest{raw, types.MediaType(mt)}, r.with(ctx)...); err != nil {
		return r.remoteErr("tag "+tag, err)
	}
	return nil
}

// Blob GETs the blob directly with an authenticated client instead of through
// go-containerregistry's layer, which would hash it a second time: callers check every blob
// against its descriptor anyway (openVerified), and 100 MiB layers make that count.
func (r *Remote) Blob(ctx context.Context, d digest.Digest) (io.ReadCloser, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	c, err := r.client(ctx, transport.PullScope)
	if err != nil {
		return nil, r.remoteErr("blob "+string(d), err)
	}
	u := fmt.Sprintf("%s://%s/v2/%s/blobs/%s", r.repo.Registry.Scheme(), r.repo.RegistryStr(), r.repo.RepositoryStr(), d)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, r.remoteErr("blob "+string(d), err)
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, r.remoteErr("blob "+string(d), err)
	}
	return resp.Body, nil
}

// client returns an HTTP client authenticated for action ("pull" or "push") on the
// repository, made once (the token handshake is a round trip or two).
func (r *Remote) client(ctx context.Context, action string) (*http.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[action]; c != nil {
		return c, nil
	}
	auth, err := authn.DefaultKeychain.Resolve(r.repo)
	if err != nil {
		return nil, err
	}
	scopes := []string{r.repo.Scope(action)}
	if action == transport.PushScope {
		scopes = []string{r.repo.Scope(transport.PushScope)} // push scope is "pull,push"
	}
	t, err := transport.NewWithContext(context.WithoutCancel(ctx), r.repo.Registry, auth,
		transport.NewUserAgent(loopbackOnlyHTTP{remote.DefaultTransport}, "foundry"), scopes)
	if err != nil {
		return nil, err
	}
	if r.clients == nil {
		r.clients = map[string]*http.Client{}
	}
	r.clients[action] = &http.Client{Transport: t}
	return r.clients[action], nil
}

// putBlobStream uploads body as one blob in a single pass, hashing it on the way: POST
// opens an upload, one PATCH sends the bytes, PUT commits them under the digest computed at
// the end (the registry checks it). It is how Publish avoids reading a layer twice. An
// upload location on another host is refused (Publish then falls back to PutBlob).
func (r *Remote) putBlobStream(ctx context.Context, body io.Reader) (digest.Digest, int64, error) {
	c, err := r.client(ctx, transport.PushScope)
	if err != nil {
		return "", 0, r.remoteErr("upload", err)
	}
	do := func(method, u string, body io.Reader, want ...int) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, u, body)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		if err := transport.CheckError(resp, want...); err != nil {
			resp.Body.Close()
			return nil, err
		}
		resp.Body.Close()
		return resp, nil
	}
	next := func(resp *http.Response) (string, error) {
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.Header.Get("Location") == "" {
			return "", fmt.Errorf("upload: bad or missing Location header %q", resp.Header.Get("Location"))
		}
		u := resp.Request.URL.ResolveReference(loc)
		if u.Host != resp.Request.URL.Host || u.Scheme != resp.Request.URL.Scheme {
			return "", fmt.Errorf("upload: Location %s is on another host", u.Redacted())
		}
		return u.String(), nil
	}
	start := fmt.Sprintf("%s://%s/v2/%s/blobs/uploads/", r.repo.Registry.Scheme(), r.repo.RegistryStr(), r.repo.RepositoryStr())
	resp, err := do(http.MethodPost, start, nil, http.StatusAccepted)
	if err != nil {
		return "", 0, r.remoteErr("upload", err)
	}
	loc, err := next(resp)
	if err != nil {
		return "", 0, r.remoteErr("upload", err)
	}
	h := sha256.New()
	cw := &countWriter{w: h}
	resp, err = do(http.MethodPatch, loc, io.TeeReader(body, cw), http.StatusAccepted, http.StatusNoContent, http.StatusCreated)
	if err != nil {
		return "", 0, r.remoteErr("upload", err)
	}
	if loc, err = next(resp); err != nil {
		return "", 0, r.remoteErr("upload", err)
	}
	d := digest.Digest("sha256:" + hex.EncodeToString(h.Sum(nil)))
	u, _ := url.Parse(loc)
	q := u.Query()
	q.Set("digest", string(d))
	u.RawQuery = q.Encode()
	if _, err := do(http.MethodPut, u.String(), nil, http.StatusCreated); err != nil {
		return "", 0, r.remoteErr("upload commit "+string(d), err)
	}
	return d, cw.n, nil
}

// uploadLayer adapts an opener to go-containerregistry's v1.Layer for upload. The bytes are
// uploaded as they are (never recompressed), so DiffID is the digest too.
type uploadLayer struct {
	h    v1.Hash
	size int64
	open func() (io.ReadCloser, error)
}

func (l uploadLayer) Digest() (v1.Hash, error)             { return l.h, nil }
func (l uploadLayer) DiffID() (v1.Hash, error)             { return l.h, nil }
func (l uploadLayer) Compressed() (io.ReadCloser, error)   { return l.open() }
func (l uploadLayer) Uncompressed() (io.ReadCloser, error) { return l.open() }
func (l uploadLayer) Size() (int64, error)                 { return l.size, nil }
func (l uploadLayer) MediaType() (types.MediaType, error)  { return types.OCILayer, nil }

func (r *Remote) PutBlob(ctx context.Context, d digest.Digest, size int64, open func() (io.ReadCloser, error)) error {
	h, err := hashOf(d)
	if err != nil {
		return err
	}
	// The registry checks the digest on commit; go-containerregistry checks the size.
	if err := remote.WriteLayer(r.repo, uploadLayer{h, size, open}, r.with(ctx)...); err != nil {
		return r.remoteErr("put blob "+string(d), err)
	}
	return nil
}

func (r *Remote) Referrers(ctx context.Context, d digest.Digest) ([]v1.Descriptor, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	ix, err := remote.Referrers(r.repo.Digest(string(d)), r.with(ctx)...)
	if err != nil {
		return nil, r.remoteErr("referrers of "+string(d), err)
	}
	im, err := ix.IndexManifest()
	if err != nil {
		return nil, r.remoteErr("referrers of "+string(d), err)
	}
	return im.Manifests, nil
}

// sleepCtx waits a little, or until ctx is done.
func sleepCtx(ctx context.Context) error {
	t := time.NewTimer(5 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// refString names d in s for messages: "host/repo@sha256:…" or "oci-layout:PATH@sha256:…".
func refString(s Store, d digest.Digest) string { return s.String() + "@" + string(d) }

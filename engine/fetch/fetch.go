// Package fetch brings a project's sources (spec/language.md §6a) into the content store:
// an HTTP(S) file or archive by its sha256, a git repository at a commit, an OCI artifact
// or image by its digest. Foundry's own process fetches them, never a step, and only from
// hosts the operator's network grant allows (spec/grants.md §1a).
//
// Guarantees:
//   - Nothing is kept that does not match its pin. An http source's bytes are stored only
//     if they hash to its sha256 (store.PutExpected); an OCI manifest and each blob it names
//     likewise; a git commit is read by its id from objects whose ids go-git computed from
//     their content. A mismatch fails with the expected and the actual digest, and leaves
//     no record.
//   - A source's tree is recorded (Fetcher.Record, in the action cache under the source's
//     node digest) only once all of it is stored and checked: no step can mount a source
//     that is not whole and verified.
//   - What an archive says is hostile input (tree.go): no name, link, device or size in it
//     can write outside the store, and a refused archive leaves no tree and no record (the
//     file blobs it had stored by then are unreferenced, for foundry gc).
//   - Every byte comes through one client (net.go) bounded by the source's limits: bytes
//     downloaded, wall time, bytes and entries unpacked.
//
// It never runs anything, never writes outside the store, and never decides what a plan
// may fetch: engine/plan marks what the grants allow; the grant is checked again here, on
// every request and every connection.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/store"
)

// Fetcher fetches sources into a workspace's store and records them in its action cache.
type Fetcher struct {
	Store  *store.Store
	Cache  *cache.Cache
	Grants *lang.Grants
	// Scratch is a directory the fetcher may use (a git fetch's objects); each fetch
	// removes what it made there.
	Scratch string
}

// Stored is the record of the source whose node digest is key, when it is whole in the
// store.
func (f *Fetcher) Stored(ctx context.Context, key digest.Digest) (*cache.Result, bool, error) {
	res, hit, err := f.Cache.Lookup(ctx, key)
	if err != nil || !hit {
		return nil, false, err
	}
	if _, ok := TreeOf(res); !ok {
		return nil, false, nil
	}
	return res, true, nil
}

// MismatchError is a source whose content is not what it is pinned to.
type MismatchError struct {
	URL      string
	Expected string // the pin
	Actual   string // what was fetched
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s served %s, but the source is pinned to %s; nothing was kept", e.URL, e.Actual, e.Expected)
}

// Fetch fetches source s, whose node digest is key and canonical definition def, tries
// each of its URLs that the grants allow in order, stores its tree and records it. A URL
// that fails (unreachable, refused, not the pinned content) moves on to the next; the error
// names every one tried.
func (f *Fetcher) Fetch(ctx context.Context, s *lang.Source, key digest.Digest, def []byte) (*cache.Result, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.Limits.Time, fmt.Errorf("the fetch took longer than %s (limits.time)", s.Limits.Time))
	defer cancel()
	start := time.Now()
	var errs []error
	tried := 0
	for _, u := range s.URLs {
		hp, err := lang.SourceEndpoint(s.Type, u)
		if err != nil || !f.Grants.AllowsNetwork(hp) {
			continue
		}
		tried++
		c := newClient(f.Grants, s.Limits.Download)
		var outs []cache.Output
		switch s.Type {
		case lang.SourceHTTP:
			outs, err = f.fetchHTTP(ctx, c, s, u)
		case lang.SourceGit:
			outs, err = f.fetchGit(ctx, c, s, u)
		case lang.SourceOCI:
			outs, err = f.fetchOCI(ctx, c, s, u)
		default:
			err = fmt.Errorf("unknown kind of source %q", s.Type)
		}
		if err == nil {
			return f.record(ctx, key, def, u, outs, start)
		}
		if cause := context.Cause(ctx); ctx.Err() != nil {
			err = fmt.Errorf("%s: %w", u, cause)
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if tried == 0 {
		return nil, fmt.Errorf("no grant allows fetching from any of %s: %w", strings.Join(s.URLs, ", "), ErrNotGranted)
	}
	return nil, errors.Join(errs...)
}

// record stores the definition and the record of a fetched source.
func (f *Fetcher) record(ctx context.Context, key digest.Digest, def []byte, origin string, outs []cache.Output, start time.Time) (*cache.Result, error) {
	dd, err := f.Store.PutBytes(def)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	res := &cache.Result{Action: key, Definition: dd, Outputs: outs, Executor: Executor, Isolation: "none",
		Origin: origin, Started: start, Finished: now, Duration: now.Sub(start)}
	if err := f.Cache.Put(context.WithoutCancel(ctx), res); err != nil {
		return nil, err
	}
	return res, nil
}

// fetchHTTP downloads an http source's bytes from u into the store, checked against the
// pin as they are written, then makes its tree.
func (f *Fetcher) fetchHTTP(ctx context.Context, c *client, s *lang.Source, u string) ([]cache.Output, error) {
	pin := digest.Digest(s.Pin)
	if ok, _ := f.Store.Has(pin); !ok {
		if err := f.download(ctx, c, u, pin); err != nil {
			return nil, err
		}
	}
	size, err := f.Store.Stat(pin)
	if err != nil {
		return nil, err
	}
	tree, err := f.httpTree(ctx, s, pin, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	ts, _ := f.Store.Stat(tree)
	return []cache.Output{
		{Path: ArchiveOutput, Kind: cache.File, Digest: pin, Size: size, Mode: 0o644},
		{Path: TreeOutput, Kind: cache.Tree, Digest: tree, Size: ts},
	}, nil
}

// download GETs u into the store as the blob pin, or fails with what it got instead.
func (f *Fetcher) download(ctx context.Context, c *client, u string, pin digest.Digest) error {
	req, err := newGet(ctx, u)
	if err != nil {
		return err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	h := sha256.New()
	tee := &hashingReader{r: store.ContextReader(ctx, resp.Body), h: h}
	if _, err := f.Store.PutExpected(tee, pin); err != nil {
		if errors.Is(err, store.ErrDigestMismatch) {
			return &MismatchError{URL: u, Expected: string(pin), Actual: "sha256:" + hex.EncodeToString(h.Sum(nil))}
		}
		if cerr := context.Cause(ctx); ctx.Err() != nil {
			return fmt.Errorf("%s: %w", u, cerr)
		}
		return fmt.Errorf("%s: %w", u, err)
	}
	return nil
}

// httpTree makes the tree of an http source whose bytes are the stored blob pin.
func (f *Fetcher) httpTree(ctx context.Context, s *lang.Source, pin digest.Digest, size int64) (digest.Digest, error) {
	t := newTree(ctx, f.Store, s.Limits, false)
	file, err := f.Store.Open(pin)
	if err != nil {
		return "", err
	}
	defer file.Close()
	if s.Archive == lang.ArchiveFile {
		if err := t.file(s.File, 0o644, file); err != nil {
			return "", err
		}
	} else if err := unpack(t, file, size, s.Archive, s.Strip); err != nil {
		return "", fmt.Errorf("unpacking the %s archive: %w", s.Archive, err)
	}
	if len(t.entries) == 0 && s.Strip > 0 {
		return "", refuse("strip = %d leaves nothing of the archive", s.Strip)
	}
	return t.store()
}

// hashingReader hashes what is read through it, so that a mismatch can say what was got.
type hashingReader struct {
	r io.Reader
	h hash.Hash
}

func (r *hashingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.h.Write(p[:n])
	return n, err
}

// newGet is a GET of u that says who asks.
func newGet(ctx context.Context, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "foundry")
	return req, nil
}

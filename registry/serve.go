package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"os"
	"strings"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/foundry-build/foundry/digest"
)

// Handler serves the layout l over the OCI distribution API as repository repo, for
// `foundry registry serve`. It is go-containerregistry's registry implementation
// (pkg/registry, with the referrers API) made persistent:
//
//   - blobs are read from the layout's blobs/ directory, and uploads stream into it (a file
//     per upload with a running SHA-256, renamed into place once the digest checks out;
//     go-containerregistry's own uploads would buffer each layer in memory), so they
//     survive a restart and a large layer costs no memory;
//   - manifests live in that implementation's memory, so Handler loads every manifest of
//     the layout at start (tags included) and writes every manifest a client pushes back
//     into the layout (blob and index.json entry, tag if pushed by tag) before answering;
//   - deletes are refused (405): an embedded store is garbage-collected by Foundry, not by
//     its clients.
//
// Only repo is served; other names answer NAME_UNKNOWN, so a mistyped reference fails
// loudly instead of landing in a repository nobody reads. A pushed manifest must hash to the
// digest it is pushed under and be at most MaxManifestSize bytes.
func Handler(l *Layout, repo string, logger *log.Logger) (http.Handler, error) {
	if repo == "" || strings.Trim(repo, "/") != repo {
		return nil, fmt.Errorf("serve: repository name %q", repo)
	}
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	inner := ggcrregistry.New(ggcrregistry.WithReferrersSupport(true),
		ggcrregistry.WithBlobHandler(layoutBlobs{l}), ggcrregistry.Logger(logger))
	h := &serveHandler{l: l, repo: repo, inner: inner, log: logger, uploads: newUploads(l)}
	if err := h.load(); err != nil {
		return nil, err
	}
	return h, nil
}

type serveHandler struct {
	l       *Layout
	repo    string
	inner   http.Handler
	log     *log.Logger
	uploads *uploads
}

// load replays the layout's manifests into the in-memory manifest table: image manifests
// first, then indexes (which the implementation requires to come after their children).
func (h *serveHandler) load() error {
	descs, err := h.l.Descriptors()
	if err != nil {
		return err
	}
	pending := descs
	for len(pending) > 0 {
		var next []Descriptor
		var firstErr error
		for _, d := range pending {
			raw, _, err := h.l.Manifest(context.Background(), d.Digest)
			if err != nil {
				return fmt.Errorf("serve: loading %s: %w", d.Digest, err)
			}
			target := string(d.Digest)
			if t := d.Annotations[AnnotationRefName]; t != "" {
				target = t
			}
			code, body := h.put(target, d.MediaType, raw)
			if code == http.StatusCreated {
				continue
			}
			next = append(next, d)
			if firstErr == nil {
				firstErr = fmt.Errorf("serve: loading %s (%s): %d %s", target, d.Digest, code, body)
			}
		}
		if len(next) == len(pending) {
			// What cannot be loaded (an index whose children are missing) is reported and
			// left out; the rest of the store is still served.
			h.log.Printf("%v (and %d more not loaded)", firstErr, len(next)-1)
			return nil
		}
		pending = next
	}
	return nil
}

// put stores a manifest through the inner handler, as a client's PUT would.
func (h *serveHandler) put(target, mediaType string, raw []byte) (int, string) {
	req, _ := http.NewRequest(http.MethodPut, "/v2/"+h.repo+"/manifests/"+target, bytes.NewReader(raw))
	req.Header.Set("Content-Type", mediaType)
	rec := &recorder{header: http.Header{}}
	h.inner.ServeHTTP(rec, req)
	return rec.code, rec.body.String()
}

// splitPath returns the repository and the rest of a /v2/<repo>/<kind>/... path.
func splitPath(p string) (repo, kind, target string, ok bool) {
	rest, found := strings.CutPrefix(p, "/v2/")
	if !found {
		return "", "", "", false
	}
	for _, k := range []string{"/manifests/", "/blobs/", "/tags/", "/referrers/"} {
		if i := strings.LastIndex(rest, k); i > 0 {
			return rest[:i], strings.Trim(k, "/"), rest[i+len(k):], true
		}
	}
	return "", "", "", false
}

func regError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`, code, msg)
}

func (h *serveHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" || r.URL.Path == "/v2/_catalog" {
		h.inner.ServeHTTP(w, r)
		return
	}
	repo, kind, target, ok := splitPath(r.URL.Path)
	if !ok {
		h.inner.ServeHTTP(w, r)
		return
	}
	if repo != h.repo {
		regError(w, http.StatusNotFound, "NAME_UNKNOWN", fmt.Sprintf("repository %q is not served here (this is %q)", repo, h.repo))
		return
	}
	if r.Method == http.MethodDelete {
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "deletes are not supported by foundry registry serve")
		return
	}
	if kind == "manifests" && r.Method == http.MethodPut {
		h.putManifest(w, r, target)
		return
	}
	if kind == "blobs" && (target == "uploads" || strings.HasPrefix(target, "uploads/")) {
		h.uploads.serve(w, r, repo, strings.Trim(strings.TrimPrefix(target, "uploads"), "/"))
		return
	}
	h.inner.ServeHTTP(w, r)
}

// putManifest checks a pushed manifest, stores it in the layout, then in memory.
func (h *serveHandler) putManifest(w http.ResponseWriter, r *http.Request, target string) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxManifestSize+1))
	if err != nil {
		regError(w, http.StatusBadRequest, "MANIFEST_INVALID", err.Error())
		return
	}
	if len(raw) > MaxManifestSize {
		regError(w, http.StatusRequestEntityTooLarge, "SIZE_INVALID", fmt.Sprintf("manifest larger than %d bytes", MaxManifestSize))
		return
	}
	d := digest.FromBytes(raw)
	isDigest := strings.Contains(target, ":")
	if isDigest && digest.Digest(target) != d {
		regError(w, http.StatusBadRequest, "DIGEST_INVALID", fmt.Sprintf("manifest hashes to %s, not %s", d, target))
		return
	}
	mt := r.Header.Get("Content-Type")
	code, body := h.put(target, mt, raw)
	if code != http.StatusCreated {
		w.WriteHeader(code)
		io.WriteString(w, body)
		return
	}
	// Persist before answering: a client that saw 201 must find the manifest after a restart.
	_, err = h.l.PutManifest(r.Context(), raw, mt)
	if err == nil && !isDigest {
		err = h.l.Tag(r.Context(), target, d)
	}
	if err != nil {
		h.log.Printf("persisting manifest %s: %v", d, err)
		regError(w, http.StatusInternalServerError, "UNKNOWN", "persisting manifest: "+err.Error())
		return
	}
	w.Header().Set("Docker-Content-Digest", string(d))
	w.Header().Set("Location", "/v2/"+h.repo+"/manifests/"+string(d))
	if sub := subjectOf(raw); sub != "" {
		w.Header().Set("OCI-Subject", sub)
	}
	w.WriteHeader(http.StatusCreated)
}

func subjectOf(raw []byte) string {
	m, err := ParseManifest(raw)
	if err != nil || m.Subject == nil {
		if ix, err := ParseIndex(raw); err == nil && ix.Subject != nil {
			return string(ix.Subject.Digest)
		}
		return ""
	}
	return string(m.Subject.Digest)
}

type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) { r.code = code }

// layoutBlobs is a go-containerregistry blob handler over a layout's blobs directory.
type layoutBlobs struct{ l *Layout }

func (b layoutBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	f, err := os.Open(b.l.blobPath(digest.Digest(h.String())))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ggcrregistry.ErrNotFound
	}
	return f, err
}

// Stat trusts the file's size: layout blobs are only created by a verified rename.
func (b layoutBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	if h.Algorithm != "sha256" {
		return 0, ggcrregistry.ErrNotFound
	}
	fi, err := os.Stat(b.l.blobPath(digest.Digest(h.String())))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ggcrregistry.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Put is called with a reader that fails at EOF on a digest mismatch; putReader checks too.
func (b layoutBlobs) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	d, err := digest.Parse(h.String())
	if err != nil {
		return err
	}
	if b.l.hasBlob(d, -1) {
		_, err := io.Copy(io.Discard, rc)
		return err
	}
	// The size is not known up front: read into a temporary file via putReader's checks,
	// with the largest size we accept.
	return b.l.putStream(d, rc)
}

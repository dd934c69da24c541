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
	"regexp"
	"strings"
	"sync"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/foundry-build/foundry/digest"
)

// Handler serves the layout l over the OCI distribution API, for `foundry registry serve`.
// It is go-containerregistry's registry implementation (pkg/registry, with the referrers
// API) made persistent:
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
// Any number of repositories are served, all over the one layout, which is one content
// store: every repository sees every blob and every manifest by digest (so a blob mount
// from any repository succeeds when the blob is there), and tags are per repository.
// Repository repo (the default) keeps the layout's plain tags, as Foundry writes them;
// a tag T of another repository R is the index.json reference name "R:T" (the image
// spec's grammar for it allows ':' and '/'). A repository exists once it has a tag in the
// layout or something was pushed to it; others answer NAME_UNKNOWN. Names, tags and
// digests that the distribution spec does not allow are refused with 400. A pushed
// manifest must hash to the digest it is pushed under and be at most MaxManifestSize bytes.
func Handler(l *Layout, repo string, logger *log.Logger) (http.Handler, error) {
	if !repoName().MatchString(repo) {
		return nil, fmt.Errorf("serve: repository name %q is not a distribution-spec name", repo)
	}
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	inner := ggcrregistry.New(ggcrregistry.WithReferrersSupport(true),
		ggcrregistry.WithBlobHandler(layoutBlobs{l}), ggcrregistry.Logger(logger))
	h := &serveHandler{l: l, repo: repo, inner: inner, log: logger, uploads: newUploads(l),
		loaded: map[string]bool{}, exists: map[string]bool{repo: true}}
	if err := h.load(); err != nil {
		return nil, err
	}
	return h, nil
}

// The distribution spec's grammar of repository names and tags.
var (
	repoName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	})
	tagName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`) })
)

type serveHandler struct {
	l       *Layout
	repo    string // the default repository, whose tags are the layout's plain tags
	inner   http.Handler
	log     *log.Logger
	uploads *uploads

	mu sync.Mutex
	// manifests are the layout's manifests by digest, in an order the inner handler takes
	// them in (an index after its children); each is put in every repository loaded.
	manifests []Descriptor
	loaded    map[string]bool // repositories put into the inner handler
	exists    map[string]bool // repositories with a tag in the layout, or pushed to
}

// layoutTag is the index.json reference name of tag in repository repo.
func (h *serveHandler) layoutTag(repo, tag string) string {
	if repo == h.repo {
		return tag
	}
	return repo + ":" + tag
}

// repoTag splits an index.json reference name into repository and tag ("" when it is
// no tag of a repository served: a name outside the grammar).
func (h *serveHandler) repoTag(ref string) (repo, tag string) {
	repo, tag = h.repo, ref
	if i := strings.LastIndex(ref, ":"); i >= 0 {
		repo, tag = ref[:i], ref[i+1:]
	}
	if !repoName().MatchString(repo) || !tagName().MatchString(tag) {
		return "", ""
	}
	return repo, tag
}

// load records the layout's manifests and repositories, and loads the default repository.
func (h *serveHandler) load() error {
	descs, err := h.l.Descriptors()
	if err != nil {
		return err
	}
	seen := map[digest.Digest]bool{}
	for _, d := range descs {
		if repo, _ := h.repoTag(d.Annotations[AnnotationRefName]); repo != "" {
			h.exists[repo] = true
		}
		if !seen[d.Digest] {
			seen[d.Digest] = true
			h.manifests = append(h.manifests, d)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.loadRepo(h.repo)
}

// loadRepo puts every manifest of the layout and the repository's tags into the inner
// handler, once; h.mu is held.
func (h *serveHandler) loadRepo(repo string) error {
	if h.loaded[repo] {
		return nil
	}
	h.loaded[repo] = true
	descs, err := h.l.Descriptors()
	if err != nil {
		return err
	}
	var pending []Descriptor
	for _, d := range h.manifests {
		pending = append(pending, Descriptor{MediaType: d.MediaType, Digest: d.Digest})
	}
	for _, d := range descs {
		if r, tag := h.repoTag(d.Annotations[AnnotationRefName]); r == repo {
			pending = append(pending, Descriptor{MediaType: d.MediaType, Digest: d.Digest,
				Annotations: map[string]string{AnnotationRefName: tag}})
		}
	}
	// Image manifests first, then indexes (which the implementation requires to come
	// after their children): each round puts what it can, until a round puts nothing.
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
			code, body := h.put(repo, target, d.MediaType, raw)
			if code == http.StatusCreated {
				continue
			}
			next = append(next, d)
			if firstErr == nil {
				firstErr = fmt.Errorf("serve: loading %s (%s) into %s: %d %s", target, d.Digest, repo, code, body)
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
func (h *serveHandler) put(repo, target, mediaType string, raw []byte) (int, string) {
	req, err := http.NewRequest(http.MethodPut, "/v2/"+repo+"/manifests/"+target, bytes.NewReader(raw))
	if err != nil { // not reached: repository and target are checked before
		return http.StatusBadRequest, err.Error()
	}
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
	if !strings.HasPrefix(r.URL.Path, "/") {
		// The inner handler indexes path elements and panics on a path without a leading
		// slash (an absolute-form or empty request target).
		regError(w, http.StatusBadRequest, "UNSUPPORTED", fmt.Sprintf("%.200q is not an absolute path", r.URL.Path))
		return
	}
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" || r.URL.Path == "/v2/_catalog" {
		h.inner.ServeHTTP(w, r)
		return
	}
	repo, kind, target, ok := splitPath(r.URL.Path)
	if !ok {
		h.inner.ServeHTTP(w, r)
		return
	}
	if !repoName().MatchString(repo) {
		regError(w, http.StatusBadRequest, "NAME_INVALID", fmt.Sprintf("%.200q is not a repository name", repo))
		return
	}
	if r.Method == http.MethodDelete {
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "deletes are not supported by foundry registry serve")
		return
	}
	if kind == "blobs" && (target == "uploads" || strings.HasPrefix(target, "uploads/")) {
		h.uploads.serve(w, r, repo, strings.Trim(strings.TrimPrefix(target, "uploads"), "/"))
		return
	}
	if kind == "blobs" {
		h.inner.ServeHTTP(w, r) // every repository sees every blob
		return
	}
	if kind == "manifests" && !tagName().MatchString(target) {
		if _, err := digest.Parse(target); err != nil {
			// Nothing can be stored under it (400), so nothing is found under it (404).
			if r.Method == http.MethodPut {
				regError(w, http.StatusBadRequest, "MANIFEST_INVALID", fmt.Sprintf("%.200q is neither a tag nor a digest", target))
			} else {
				regError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", fmt.Sprintf("%.200q is neither a tag nor a digest", target))
			}
			return
		}
	}
	if kind == "manifests" && r.Method == http.MethodPut {
		h.putManifest(w, r, repo, target)
		return
	}
	// Reads of a repository that exists load it first; others answer NAME_UNKNOWN.
	h.mu.Lock()
	var err error
	if h.exists[repo] {
		err = h.loadRepo(repo)
	}
	h.mu.Unlock()
	if err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	h.inner.ServeHTTP(w, r)
}

// putManifest checks a pushed manifest, stores it in the layout, then in memory: in its
// repository by target and in every repository loaded by digest.
func (h *serveHandler) putManifest(w http.ResponseWriter, r *http.Request, repo, target string) {
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
	if _, err := parseManifestHead(raw); err != nil {
		// Refused before the inner handler holds it, so memory and the layout agree.
		regError(w, http.StatusBadRequest, "MANIFEST_INVALID", err.Error())
		return
	}
	mt := r.Header.Get("Content-Type")
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loadRepo(repo); err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	code, body := h.put(repo, target, mt, raw)
	if code != http.StatusCreated {
		w.WriteHeader(code)
		io.WriteString(w, body)
		return
	}
	// Persist before answering: a client that saw 201 must find the manifest after a restart.
	_, err = h.l.PutManifest(r.Context(), raw, mt)
	if err == nil && !isDigest {
		err = h.l.Tag(r.Context(), h.layoutTag(repo, target), d)
	}
	if err != nil {
		h.log.Printf("persisting manifest %s: %v", d, err)
		regError(w, http.StatusInternalServerError, "UNKNOWN", "persisting manifest: "+err.Error())
		return
	}
	h.exists[repo] = true
	known := false
	for _, m := range h.manifests {
		known = known || m.Digest == d
	}
	if !known {
		h.manifests = append(h.manifests, Descriptor{MediaType: mt, Digest: d})
		for other := range h.loaded {
			if other != repo {
				h.put(other, string(d), mt, raw)
			}
		}
	}
	w.Header().Set("Docker-Content-Digest", string(d))
	w.Header().Set("Location", "/v2/"+repo+"/manifests/"+string(d))
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

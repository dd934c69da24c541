package registry

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/foundry-build/foundry/digest"
)

// uploads implements the distribution API's blob uploads for Handler, streaming to a file
// in the layout instead of go-containerregistry's in-memory buffers (which would hold a
// whole layer in memory per upload, without bound). The running SHA-256 is kept beside the
// file, so committing does not read the blob again; the blob appears by rename only after
// its digest checked out.
type uploads struct {
	l  *Layout
	mu sync.Mutex
	m  map[string]*upload
}

type upload struct {
	mu sync.Mutex
	f  *os.File
	h  hash.Hash
	n  int64
}

const uploadPrefix = ".upload-"

func newUploads(l *Layout) *uploads {
	// Uploads do not survive a restart; remove what an earlier server left.
	dir := filepath.Join(l.dir, "blobs", "sha256")
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), uploadPrefix) {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	return &uploads{l: l, m: map[string]*upload{}}
}

// serve handles /v2/<repo>/blobs/uploads/[id]; id is "" for a new upload.
func (u *uploads) serve(w http.ResponseWriter, r *http.Request, repo, id string) {
	base := "/v2/" + repo + "/blobs/uploads/"
	switch {
	case r.Method == http.MethodPost && id == "" && r.URL.Query().Get("mount") != "" && r.URL.Query().Get("from") != "" && u.mount(w, repo, r.URL.Query().Get("mount")):
		// mounted: every repository of the layout sees its blobs
	case r.Method == http.MethodPost && id == "":
		up, newID, err := u.start()
		if err != nil {
			regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
			return
		}
		if d := r.URL.Query().Get("digest"); d != "" { // monolithic upload: POST with the bytes
			u.finish(w, r, repo, newID, up, d)
			return
		}
		w.Header().Set("Location", base+newID)
		w.Header().Set("Docker-Upload-UUID", newID)
		w.Header().Set("Range", "0-0")
		w.WriteHeader(http.StatusAccepted)
	case id == "":
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", r.Method+" without an upload id")
	default:
		u.mu.Lock()
		up := u.m[id]
		u.mu.Unlock()
		if up == nil {
			regError(w, http.StatusNotFound, "BLOB_UPLOAD_UNKNOWN", "unknown upload "+id)
			return
		}
		switch r.Method {
		case http.MethodPatch:
			up.mu.Lock()
			defer up.mu.Unlock()
			if cr := r.Header.Get("Content-Range"); cr != "" {
				if start, _, ok := strings.Cut(cr, "-"); ok && start != strconv.FormatInt(up.n, 10) {
					w.Header().Set("Range", fmt.Sprintf("0-%d", up.n-1))
					regError(w, http.StatusRequestedRangeNotSatisfiable, "BLOB_UPLOAD_INVALID", "chunk does not start at "+strconv.FormatInt(up.n, 10))
					return
				}
			}
			if err := up.write(r.Body); err != nil {
				u.abort(id)
				regError(w, http.StatusInternalServerError, "BLOB_UPLOAD_INVALID", err.Error())
				return
			}
			w.Header().Set("Location", base+id)
			w.Header().Set("Docker-Upload-UUID", id)
			w.Header().Set("Range", fmt.Sprintf("0-%d", up.n-1))
			w.WriteHeader(http.StatusAccepted)
		case http.MethodPut:
			up.mu.Lock()
			defer up.mu.Unlock()
			u.finish(w, r, repo, id, up, r.URL.Query().Get("digest"))
		case http.MethodGet:
			up.mu.Lock()
			defer up.mu.Unlock()
			w.Header().Set("Location", base+id)
			w.Header().Set("Range", fmt.Sprintf("0-%d", up.n-1))
			w.WriteHeader(http.StatusNoContent)
		case http.MethodDelete:
			u.abort(id)
			w.WriteHeader(http.StatusNoContent)
		default:
			regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", r.Method+" on an upload")
		}
	}
}

// mount answers a cross-repository mount of blob d with 201 when the layout holds it, and
// returns false (a new upload is started instead, as the spec says) when it does not.
func (u *uploads) mount(w http.ResponseWriter, repo, d string) bool {
	dg, err := digest.Parse(d)
	if err != nil || !u.l.hasBlob(dg, -1) {
		return false
	}
	w.Header().Set("Location", "/v2/"+repo+"/blobs/"+string(dg))
	w.Header().Set("Docker-Content-Digest", string(dg))
	w.WriteHeader(http.StatusCreated)
	return true
}

func (u *uploads) start() (*upload, string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, "", err
	}
	id := hex.EncodeToString(b[:])
	f, err := os.Create(filepath.Join(u.l.dir, "blobs", "sha256", uploadPrefix+id))
	if err != nil {
		return nil, "", fmt.Errorf("upload: %w", err)
	}
	up := &upload{f: f, h: sha256.New()}
	u.mu.Lock()
	u.m[id] = up
	u.mu.Unlock()
	return up, id, nil
}

func (up *upload) write(r io.Reader) error {
	n, err := io.Copy(io.MultiWriter(up.f, up.h), r)
	up.n += n
	return err
}

func (u *uploads) abort(id string) {
	u.mu.Lock()
	up := u.m[id]
	delete(u.m, id)
	u.mu.Unlock()
	if up != nil {
		up.f.Close()
		os.Remove(up.f.Name())
	}
}

// finish appends the request body, checks the digest and moves the file into place.
func (u *uploads) finish(w http.ResponseWriter, r *http.Request, repo, id string, up *upload, want string) {
	defer u.abort(id) // the upload is over, whatever happens; abort removes nothing once renamed
	d, err := digest.Parse(want)
	if err != nil {
		regError(w, http.StatusBadRequest, "DIGEST_INVALID", "digest: "+err.Error())
		return
	}
	if err := up.write(r.Body); err != nil {
		regError(w, http.StatusInternalServerError, "BLOB_UPLOAD_INVALID", err.Error())
		return
	}
	if got := "sha256:" + hex.EncodeToString(up.h.Sum(nil)); got != string(d) {
		regError(w, http.StatusBadRequest, "DIGEST_INVALID", fmt.Sprintf("uploaded content has digest %s, not %s", got, d))
		return
	}
	if !u.l.hasBlob(d, up.n) {
		err := up.f.Sync()
		if err == nil {
			err = os.Chmod(up.f.Name(), 0o644)
		}
		if err == nil {
			err = os.Rename(up.f.Name(), u.l.blobPath(d))
		}
		if err != nil {
			regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
			return
		}
	}
	w.Header().Set("Location", "/v2/"+repo+"/blobs/"+string(d))
	w.Header().Set("Docker-Content-Digest", string(d))
	w.WriteHeader(http.StatusCreated)
}

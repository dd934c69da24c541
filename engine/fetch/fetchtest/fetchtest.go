// Package fetchtest makes what the tests of sources fetch: archives written entry by entry
// (hostile ones too), git repositories made object by object with go-git, and a git server
// speaking the smart HTTP protocol over go-git's own upload-pack, on loopback. It is
// imported only by tests.
package fetchtest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/ulikunitz/xz"
)

// Entry is one entry of an archive: a file (Type tar.TypeReg, the default), a directory,
// a symlink or hard link (Link), or anything else tar can say.
type Entry struct {
	Name string
	Type byte
	Body string
	Link string
	Mode int64
}

// Tar writes entries as a tar archive, as they are, whatever they say.
func Tar(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.Name, Typeflag: typ, Linkname: e.Link, Mode: mode, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			io.WriteString(tw, e.Body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Gzip compresses b.
func Gzip(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// Xz compresses b.
func Xz(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, err := xz.NewWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// Zip writes entries as a zip archive: files, directories (a name ending in "/") and
// symlinks (Type tar.TypeSymlink, the target as the body, as zip keeps them).
func Zip(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.Name, Method: zip.Deflate}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
		}
		switch e.Type {
		case tar.TypeSymlink:
			h.SetMode(0o777 | os.ModeSymlink)
			e.Body = e.Link
		case tar.TypeDir:
			h.SetMode(0o755 | os.ModeDir)
		default:
			h.SetMode(os.FileMode(mode))
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, e.Body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// File is a file of a git tree: its content and its mode (filemode.Regular when zero;
// filemode.Executable, filemode.Symlink with the target as content).
type File struct {
	Body string
	Mode filemode.FileMode
}

// Repo is a git repository in memory.
type Repo struct {
	Storage *memory.Storage
}

// NewRepo makes an empty repository.
func NewRepo() *Repo { return &Repo{Storage: memory.NewStorage()} }

// Commit writes files as the tree of a commit (with parent, if not zero) and points
// refs/heads/main at it; it returns the commit's id.
func (r *Repo) Commit(t testing.TB, files map[string]File, parent plumbing.Hash) plumbing.Hash {
	t.Helper()
	root := r.tree(t, files, "")
	c := &object.Commit{
		Author:    object.Signature{Name: "test", Email: "test@test.invalid", When: time.Unix(1, 0).UTC()},
		Committer: object.Signature{Name: "test", Email: "test@test.invalid", When: time.Unix(1, 0).UTC()},
		Message:   "test\n", TreeHash: root,
	}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	h := r.put(t, c)
	if err := r.Storage.SetReference(plumbing.NewHashReference("refs/heads/main", h)); err != nil {
		t.Fatal(err)
	}
	if err := r.Storage.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main")); err != nil {
		t.Fatal(err)
	}
	return h
}

type encoder interface {
	Encode(plumbing.EncodedObject) error
}

func (r *Repo) put(t testing.TB, o encoder) plumbing.Hash {
	t.Helper()
	obj := r.Storage.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := r.Storage.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// tree writes the tree of the files under dir ("" for the root) and returns its id.
func (r *Repo) tree(t testing.TB, files map[string]File, dir string) plumbing.Hash {
	t.Helper()
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	entries := map[string]object.TreeEntry{}
	for p, f := range files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		name, _, sub := strings.Cut(rest, "/")
		if sub {
			if _, done := entries[name]; !done {
				entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: r.tree(t, files, prefix+name)}
			}
			continue
		}
		obj := r.Storage.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, _ := obj.Writer()
		io.WriteString(w, f.Body)
		w.Close()
		h, err := r.Storage.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		mode := f.Mode
		if mode == 0 {
			mode = filemode.Regular
		}
		entries[name] = object.TreeEntry{Name: name, Mode: mode, Hash: h}
	}
	tr := &object.Tree{}
	for _, e := range entries {
		tr.Entries = append(tr.Entries, e)
	}
	sort.Sort(object.TreeEntrySorter(tr.Entries))
	return r.put(t, tr)
}

// ServeGit serves the repository over git's smart HTTP protocol on loopback, with
// go-git's upload-pack, until the test ends; it returns the repository's URL. With
// anyCommit the server lets a client ask for any commit it holds
// (allow-reachable-sha1-in-want), as large hosts do; without it a client can ask only for
// what its branches and tags point at. requests counts the requests it answered.
func ServeGit(t testing.TB, r *Repo, anyCommit bool, requests *int) string {
	t.Helper()
	srv := server.NewServer(server.MapLoader{"http://repo.invalid/repo.git": r.Storage})
	ep, err := transport.NewEndpoint("http://repo.invalid/repo.git")
	if err != nil {
		t.Fatal(err)
	}
	h := http.NewServeMux()
	count := func() {
		if requests != nil {
			*requests++
		}
	}
	h.HandleFunc("GET /repo.git/info/refs", func(w http.ResponseWriter, req *http.Request) {
		count()
		if req.URL.Query().Get("service") != "git-upload-pack" {
			http.Error(w, "smart HTTP only", http.StatusForbidden)
			return
		}
		sess, err := srv.NewUploadPackSession(ep, nil)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		ar, err := sess.AdvertisedReferencesContext(req.Context())
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if anyCommit {
			ar.Capabilities.Set(capability.AllowReachableSHA1InWant)
		}
		ar.Prefix = [][]byte{[]byte("# service=git-upload-pack"), pktline.Flush}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		ar.Encode(w)
	})
	h.HandleFunc("POST /repo.git/git-upload-pack", func(w http.ResponseWriter, req *http.Request) {
		count()
		up := packp.NewUploadPackRequest()
		if err := up.Decode(req.Body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		sess, err := srv.NewUploadPackSession(ep, nil)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		resp, err := sess.UploadPack(req.Context(), up)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer resp.Close()
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		resp.Encode(w)
	})
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL + "/repo.git"
}

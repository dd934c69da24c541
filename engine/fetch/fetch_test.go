package fetch

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/fetch/fetchtest"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/store"
)

// fixture is a fetcher over a fresh store and action cache.
type fixture struct {
	f   *Fetcher
	dir string
}

func newFixture(t *testing.T, hosts ...string) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.OpenState(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	g := &lang.Grants{}
	for _, h := range hosts {
		hp, err := lang.ParseHostPort(h)
		if err != nil {
			t.Fatal(err)
		}
		g.Network = append(g.Network, hp)
	}
	scratch := filepath.Join(dir, "scratch")
	os.MkdirAll(scratch, 0o755)
	return &fixture{f: &Fetcher{Store: st, Cache: cache.New(db, st), Grants: g, Scratch: scratch}, dir: dir}
}

// fetch fetches s under the digest of its definition.
func (x *fixture) fetch(t *testing.T, s *lang.Source) (*cache.Result, error) {
	t.Helper()
	def, err := digest.Canonical(graph.SourceDefinition(s))
	if err != nil {
		t.Fatal(err)
	}
	return x.f.Fetch(context.Background(), s, digest.FromBytes(def), def)
}

// manifest is the tree a record holds, as path → what (file body, "dir", "-> target").
func (x *fixture) manifest(t *testing.T, res *cache.Result) map[string]string {
	t.Helper()
	tree, ok := TreeOf(res)
	if !ok {
		t.Fatalf("no tree in %+v", res)
	}
	m, err := x.f.Store.ReadManifest(tree)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range m.Entries {
		switch e.Type {
		case digest.TypeDir:
			out[e.Path] = "dir"
		case digest.TypeSymlink:
			out[e.Path] = "-> " + e.Target
		default:
			b, err := x.f.Store.Get(e.Digest)
			if err != nil {
				t.Fatal(err)
			}
			out[e.Path] = string(b)
			if e.Mode == digest.ModeExecutable {
				out[e.Path] += " (x)"
			}
		}
	}
	return out
}

// records counts the action cache's records.
func (x *fixture) records(t *testing.T) int {
	t.Helper()
	live, err := x.f.Cache.LiveBlobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(live)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// serve serves path → body on loopback, counting requests; it returns the server's base
// URL and its HOST:PORT.
func serve(t *testing.T, files map[string][]byte, hits *atomic.Int64) (string, string) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits != nil {
			hits.Add(1)
		}
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	return s.URL, u.Host
}

func httpSource(urls []string, pin string, archive string, stripN int) *lang.Source {
	return &lang.Source{Name: "s", Type: lang.SourceHTTP, URLs: urls, Pin: pin, Archive: archive, Strip: stripN, File: "blob.bin", Limits: lang.DefaultSourceLimits}
}

// An archive is stored, checked against its pin, unpacked with strip, and recorded; the
// same tree comes of tar.gz, tar.xz and zip.
func TestFetchArchives(t *testing.T) {
	entries := []fetchtest.Entry{
		{Name: "pkg-1.0/", Type: tar.TypeDir},
		{Name: "pkg-1.0/README", Body: "hello\n"},
		{Name: "pkg-1.0/bin/tool", Body: "#!/bin/sh\n", Mode: 0o755},
		{Name: "pkg-1.0/bin/alias", Type: tar.TypeSymlink, Link: "tool"},
		{Name: "pkg-1.0/docs/../README.link", Type: tar.TypeSymlink, Link: "README"}, // refused: ".."
	}
	tarb := fetchtest.Tar(t, entries[:4]...)
	archives := map[string][]byte{
		"/a.tar.gz": fetchtest.Gzip(t, tarb),
		"/a.tar.xz": fetchtest.Xz(t, tarb),
		"/a.zip":    fetchtest.Zip(t, entries[:4]...),
		"/a.tar":    tarb,
	}
	base, host := serve(t, archives, nil)
	x := newFixture(t, host)
	want := map[string]string{"README": "hello\n", "bin": "dir", "bin/tool": "#!/bin/sh\n (x)", "bin/alias": "-> tool"}
	var trees []digest.Digest
	for p, kind := range map[string]string{"/a.tar.gz": lang.ArchiveTarGz, "/a.tar.xz": lang.ArchiveTarXz, "/a.zip": lang.ArchiveZip, "/a.tar": lang.ArchiveTar} {
		res, err := x.fetch(t, httpSource([]string{base + p}, sum(archives[p]), kind, 1))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		got := x.manifest(t, res)
		if len(got) != len(want) {
			t.Errorf("%s: tree %v, want %v", p, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", p, k, got[k], v)
			}
		}
		if res.Origin != base+p {
			t.Errorf("%s: origin %q", p, res.Origin)
		}
		if o := res.Output(ArchiveOutput); o == nil || string(o.Digest) != sum(archives[p]) {
			t.Errorf("%s: the archive is not recorded by its pin: %+v", p, res.Outputs)
		}
		tree, _ := TreeOf(res)
		trees = append(trees, tree)
	}
	for _, tr := range trees[1:] {
		if tr != trees[0] {
			t.Errorf("the same entries made different trees: %v", trees)
		}
	}
	// A file source is kept as it is, under its name.
	blob := []byte("\x00\x01 not an archive")
	base2, host2 := serve(t, map[string][]byte{"/dl/blob.bin": blob}, nil)
	x2 := newFixture(t, host2)
	res, err := x2.fetch(t, httpSource([]string{base2 + "/dl/blob.bin"}, sum(blob), lang.ArchiveFile, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := x2.manifest(t, res); len(got) != 1 || got["blob.bin"] != string(blob) {
		t.Errorf("file source: %v", got)
	}
}

// Bytes that are not the pinned ones (a tarball rebuilt upstream) fail the fetch with the
// expected and the actual digest, and nothing is kept: no blob of theirs, no record.
func TestFetchMismatchKeepsNothing(t *testing.T) {
	good := fetchtest.Gzip(t, fetchtest.Tar(t, fetchtest.Entry{Name: "a", Body: "1"}))
	changed := fetchtest.Gzip(t, fetchtest.Tar(t, fetchtest.Entry{Name: "a", Body: "2"}))
	base, host := serve(t, map[string][]byte{"/a.tar.gz": changed}, nil)
	x := newFixture(t, host)
	_, err := x.fetch(t, httpSource([]string{base + "/a.tar.gz"}, sum(good), lang.ArchiveTarGz, 0))
	var mm *MismatchError
	if !errors.As(err, &mm) || mm.Expected != sum(good) || mm.Actual != sum(changed) {
		t.Fatalf("fetch of changed bytes: %v", err)
	}
	for _, s := range []string{sum(good), sum(changed)} {
		if ok, _ := x.f.Store.Has(digest.Digest(s)); ok {
			t.Errorf("%s is in the store after a mismatch", s)
		}
	}
	if n := x.records(t); n != 0 {
		t.Errorf("%d blobs are named by records after a mismatch", n)
	}
}

// Only granted hosts are asked; mirrors are tried in order, an ungranted one skipped and a
// failing one passed over; no grant at all fails before any request.
func TestFetchGrantsAndMirrors(t *testing.T) {
	body := fetchtest.Gzip(t, fetchtest.Tar(t, fetchtest.Entry{Name: "a", Body: "1"}))
	var hitsA, hitsB atomic.Int64
	baseA, hostA := serve(t, map[string][]byte{}, &hitsA) // 404 for everything
	baseB, hostB := serve(t, map[string][]byte{"/a.tar.gz": body}, &hitsB)
	src := httpSource([]string{baseA + "/a.tar.gz", baseB + "/a.tar.gz"}, sum(body), lang.ArchiveTarGz, 0)

	if _, err := newFixture(t).fetch(t, src); !errors.Is(err, ErrNotGranted) || hitsA.Load()+hitsB.Load() != 0 {
		t.Fatalf("no grants: %v, %d requests", err, hitsA.Load()+hitsB.Load())
	}
	// Only the mirror is granted: the first URL is not even asked.
	res, err := newFixture(t, hostB).fetch(t, src)
	if err != nil || hitsA.Load() != 0 || hitsB.Load() != 1 || res.Origin != baseB+"/a.tar.gz" {
		t.Fatalf("mirror granted: %v, requests %d %d", err, hitsA.Load(), hitsB.Load())
	}
	// Both granted: the first answers 404, the mirror serves it.
	res, err = newFixture(t, hostA, hostB).fetch(t, src)
	if err != nil || hitsA.Load() != 1 || res.Origin != baseB+"/a.tar.gz" {
		t.Fatalf("both granted: %v, requests %d %d", err, hitsA.Load(), hitsB.Load())
	}
	// A grant of the host on another port is no grant.
	h, _, _ := net.SplitHostPort(hostB)
	if _, err := newFixture(t, h+":1").fetch(t, httpSource([]string{baseB + "/a.tar.gz"}, sum(body), lang.ArchiveTarGz, 0)); !errors.Is(err, ErrNotGranted) {
		t.Errorf("another port granted: %v", err)
	}
}

// A redirect to a host no grant allows is not followed; a granted name that resolves to
// loopback is not dialed (DNS rebinding): loopback is reached only by its address.
func TestFetchRefusesRedirectsAndRebinding(t *testing.T) {
	body := []byte("x")
	var hits atomic.Int64
	target, _ := serve(t, map[string][]byte{"/x": body}, &hits)
	redirect := httptest.NewServer(http.RedirectHandler(target+"/x", http.StatusFound))
	defer redirect.Close()
	ru, _ := url.Parse(redirect.URL)
	_, err := newFixture(t, ru.Host).fetch(t, httpSource([]string{redirect.URL + "/x"}, sum(body), lang.ArchiveFile, 0))
	if !errors.Is(err, ErrNotGranted) || hits.Load() != 0 {
		t.Errorf("redirect to an ungranted host: %v, %d requests there", err, hits.Load())
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(target, "http://"))
	_, err = newFixture(t, "localhost:"+port).fetch(t, httpSource([]string{"http://localhost:" + port + "/x"}, sum(body), lang.ArchiveFile, 0))
	if !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "an address of this machine") || hits.Load() != 0 {
		t.Errorf("a granted name resolving to loopback: %v, %d requests", err, hits.Load())
	}
}

// A download past its size limit, or slower than its time limit, fails and keeps nothing.
func TestFetchLimits(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	base, host := serve(t, map[string][]byte{"/big": big}, nil)
	src := httpSource([]string{base + "/big"}, sum(big), lang.ArchiveFile, 0)
	src.Limits.Download = 64 << 10
	x := newFixture(t, host)
	if _, err := x.fetch(t, src); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a download past its limit: %v", err)
	}
	if ok, _ := x.f.Store.Has(digest.Digest(sum(big))); ok {
		t.Error("a download past its limit was stored")
	}
	// A server that sends a byte a second, without a length.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 60; i++ {
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	}))
	defer slow.Close()
	su, _ := url.Parse(slow.URL)
	src = httpSource([]string{slow.URL + "/slow"}, sum([]byte("x")), lang.ArchiveFile, 0)
	src.Limits.Time = 1500 * time.Millisecond
	start := time.Now()
	if _, err := newFixture(t, su.Host).fetch(t, src); err == nil || !strings.Contains(err.Error(), "limits.time") {
		t.Errorf("a slow download: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a slow download was stopped only after %s", d)
	}
}

// A git source is fetched at its commit from a server made with go-git, whether the server
// lets a client ask for any commit or only for its branches' tips; its tree keeps
// executables and links; a commit the server does not have is a mismatch.
func TestFetchGit(t *testing.T) {
	repo := fetchtest.NewRepo()
	first := repo.Commit(t, map[string]fetchtest.File{
		"README":      {Body: "v1\n"},
		"bin/run":     {Body: "#!/bin/sh\n", Mode: filemode.Executable},
		"bin/run-old": {Body: "run", Mode: filemode.Symlink},
	}, plumbing.ZeroHash)
	second := repo.Commit(t, map[string]fetchtest.File{"README": {Body: "v2\n"}}, first)
	for _, anyCommit := range []bool{true, false} {
		var requests int
		u := fetchtest.ServeGit(t, repo, anyCommit, &requests)
		pu, _ := url.Parse(u)
		x := newFixture(t, pu.Host)
		src := &lang.Source{Name: "g", Type: lang.SourceGit, URLs: []string{u}, Pin: first.String(), Limits: lang.DefaultSourceLimits}
		res, err := x.fetch(t, src)
		if err != nil {
			t.Fatalf("anyCommit=%v: %v", anyCommit, err)
		}
		got := x.manifest(t, res)
		if got["README"] != "v1\n" || got["bin/run"] != "#!/bin/sh\n (x)" || got["bin/run-old"] != "-> run" || len(got) != 4 {
			t.Errorf("anyCommit=%v: the tree of the first commit: %v", anyCommit, got)
		}
		src.Pin = second.String()
		if res, err := x.fetch(t, src); err != nil || x.manifest(t, res)["README"] != "v2\n" {
			t.Errorf("anyCommit=%v: the second commit: %v", anyCommit, err)
		}
		src.Pin = strings.Repeat("ab", 20)
		var mm *MismatchError
		if _, err := x.fetch(t, src); err == nil || !errors.As(err, &mm) && !strings.Contains(err.Error(), "asking for commit "+src.Pin) {
			t.Errorf("anyCommit=%v: a commit the server lacks: %v", anyCommit, err)
		}
		if requests == 0 {
			t.Errorf("anyCommit=%v: the server was never asked", anyCommit)
		}
	}
}

// The environment's proxy is used as any Go client uses it: the grant is checked on the
// URL requested (the proxy itself need not be granted), and a URL no grant allows never
// reaches the proxy.
func TestFetchThroughTheEnvironmentProxy(t *testing.T) {
	body := []byte("through the proxy")
	var asked atomic.Int64
	var hosts []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		hosts = append(hosts, r.URL.Host)
		if r.URL.Host == "files.test" && r.URL.Path == "/x" {
			w.Write(body)
			return
		}
		http.NotFound(w, r)
	}))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	x := newFixture(t, "files.test:80") // the proxy's own address is not granted
	res, err := x.fetch(t, httpSource([]string{"http://files.test/x"}, sum(body), lang.ArchiveFile, 0))
	if err != nil || x.manifest(t, res)["blob.bin"] != string(body) || len(hosts) != 1 || hosts[0] != "files.test" {
		t.Fatalf("through the proxy: %v, the proxy was asked for %v", err, hosts)
	}
	if _, err := x.fetch(t, httpSource([]string{"http://other.test/x"}, sum(body), lang.ArchiveFile, 0)); !errors.Is(err, ErrNotGranted) || asked.Load() != 1 {
		t.Errorf("an ungranted host through the proxy: %v, the proxy was asked %d times", err, asked.Load())
	}
}

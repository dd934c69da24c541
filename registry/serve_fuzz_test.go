package registry

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
)

// FuzzServeHandler: whatever a client sends (method, path, query, body), foundry registry
// serve answers without panicking and without a 5xx (which would mean it failed, not the
// client), and the layout stays one that opens.
func FuzzServeHandler(f *testing.F) {
	manifest := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`
	for _, s := range []struct{ method, path, query, body string }{
		{"PUT", "/v2/foundry/manifests/a\x00b", "", manifest},
		{"PUT", "/v2/foundry/manifests/latest", "", manifest},
		{"PUT", "/v2/team/x/manifests/v1", "", manifest},
		{"GET", "/v2/team/x/tags/list", "n=1&last=a", ""},
		{"GET", "/v2/foundry/referrers/sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "artifactType=x", ""},
		{"POST", "/v2/foundry/blobs/uploads/", "digest=sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "{}"},
		{"POST", "/v2/b/blobs/uploads/", "mount=sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a&from=foundry", ""},
		{"PATCH", "/v2/foundry/blobs/uploads/x", "", "abc"},
		{"HEAD", "/v2/foundry/manifests/sha256:zz", "", ""},
		{"DELETE", "/v2/foundry/manifests/latest", "", ""},
		{"GET", "/v2/_catalog", "", ""},
	} {
		f.Add(s.method, s.path, s.query, []byte(s.body))
	}
	l, err := OpenLayout(filepath.Join(f.TempDir(), "layout"))
	if err != nil {
		f.Fatal(err)
	}
	h, err := Handler(l, "foundry", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte) {
		switch method {
		case "GET", "HEAD", "PUT", "POST", "PATCH", "DELETE":
		default:
			method = "GET"
		}
		req := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{},
			Body: http.NoBody, Host: "fuzz", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		if len(body) > 0 {
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q?%q: %d %s", method, path, query, rec.Code, rec.Body.String())
		}
		if _, err := OpenLayout(l.Dir()); err != nil {
			t.Fatalf("after %s %q: the layout does not open: %v", method, path, err)
		}
	})
}

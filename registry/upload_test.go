package registry

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foundry-build/foundry/digest"
)

// TestServeUploads drives the upload protocol by hand: chunked, monolithic, a wrong digest
// and an out-of-order chunk. Uploads land in the layout, nothing is left behind.
func TestServeUploads(t *testing.T) {
	addr, l := startServe(t)
	base := "http://" + addr + "/v2/foundry/blobs/uploads/"
	do := func(method, u string, body []byte, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, u, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	abs := func(loc string) string { return "http://" + addr + loc }
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	d := digest.FromBytes(data)

	// Chunked: POST, two PATCHes, PUT with the digest.
	resp := do(http.MethodPost, base, nil, nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	loc := resp.Header.Get("Location")
	half := len(data) / 2
	resp = do(http.MethodPatch, abs(loc), data[:half], map[string]string{"Content-Range": fmt.Sprintf("0-%d", half-1)})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("PATCH = %d", resp.StatusCode)
	}
	// A chunk that does not continue where the upload is refused.
	if resp := do(http.MethodPatch, abs(loc), data[half:], map[string]string{"Content-Range": "5-9"}); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("out-of-order PATCH = %d", resp.StatusCode)
	}
	resp = do(http.MethodPatch, abs(resp.Header.Get("Location")), data[half:], nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("second PATCH = %d", resp.StatusCode)
	}
	resp = do(http.MethodPut, abs(resp.Header.Get("Location"))+"?digest="+string(d), nil, nil)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Docker-Content-Digest") != string(d) {
		t.Fatalf("PUT = %d %v", resp.StatusCode, resp.Header)
	}
	if b, err := os.ReadFile(l.blobPath(d)); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("blob in the layout: %v", err)
	}

	// Monolithic: POST with the digest and the bytes.
	small := []byte("monolithic")
	if resp := do(http.MethodPost, base+"?digest="+string(digest.FromBytes(small)), small, nil); resp.StatusCode != http.StatusCreated {
		t.Fatalf("monolithic POST = %d", resp.StatusCode)
	}

	// A digest that does not match is refused and leaves nothing.
	resp = do(http.MethodPost, base, nil, nil)
	wrong := digest.FromBytes([]byte("something else"))
	if resp := do(http.MethodPut, abs(resp.Header.Get("Location"))+"?digest="+string(wrong), []byte("content"), nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT with a wrong digest = %d", resp.StatusCode)
	}
	if _, err := os.Stat(l.blobPath(wrong)); err == nil {
		t.Fatal("a blob was stored under a digest it does not have")
	}
	ents, _ := os.ReadDir(filepath.Join(l.Dir(), "blobs", "sha256"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("left behind: %s", e.Name())
		}
	}
	// Unknown upload ids are refused.
	if resp := do(http.MethodPatch, base+"nope", []byte("x"), nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("PATCH of an unknown upload = %d", resp.StatusCode)
	}
}

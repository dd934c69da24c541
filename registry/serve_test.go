package registry

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Any number of repositories over one layout: tags are per repository and survive a
// restart (another repository's as "REPO:TAG" in index.json, the default's as written),
// every repository sees every manifest by digest, and a blob is mounted from one
// repository into another with 201.
func TestServeManyRepositories(t *testing.T) {
	addr, l := startServe(t)
	f := newFixture(t)
	def, _ := Open(addr + "/foundry")
	other, _ := Open(addr + "/team/tools")
	md, err := Publish(bg, def, f.src, f.capability("stable"))
	if err != nil {
		t.Fatal(err)
	}
	if md2, err := Publish(bg, other, f.src, f.capability("v2")); err != nil || md2 != md {
		t.Fatalf("publish to team/tools: %s %v (want %s)", md2, err, md)
	}
	check := func(addr string) {
		t.Helper()
		def, _ := Open(addr + "/foundry")
		other, _ := Open(addr + "/team/tools")
		if d, err := def.Resolve(bg, "stable"); err != nil || d != md {
			t.Errorf("foundry:stable = %s, %v", d, err)
		}
		if d, err := other.Resolve(bg, "v2"); err != nil || d != md {
			t.Errorf("team/tools:v2 = %s, %v", d, err)
		}
		if _, err := def.Resolve(bg, "v2"); err == nil {
			t.Error("team/tools's tag v2 resolved in foundry")
		}
		if _, err := other.Resolve(bg, "stable"); err == nil {
			t.Error("foundry's tag stable resolved in team/tools")
		}
		if _, _, err := other.Manifest(bg, md); err != nil {
			t.Errorf("team/tools's manifest by digest: %v", err)
		}
	}
	check(addr)

	// The layout records the other repository's tag under its name.
	descs, _ := l.Descriptors()
	var refs []string
	for _, d := range descs {
		if r := d.Annotations[AnnotationRefName]; r != "" {
			refs = append(refs, r)
		}
	}
	if !strings.Contains(strings.Join(refs, " "), "team/tools:v2") || !strings.Contains(" "+strings.Join(refs, " ")+" ", " stable ") {
		t.Errorf("index.json reference names %v, want stable and team/tools:v2", refs)
	}

	// A restart: a new server over the same layout.
	l2, _ := OpenLayout(l.Dir())
	h, err := Handler(l2, "foundry", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr2 := startHandler(t, h)
	check(addr2)

	// A manifest by digest in a repository it was never pushed to, and a blob mount.
	raw, _, err := l.Manifest(bg, md)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ParseManifest(raw)
	third, _ := Open(addr2 + "/third")
	if _, err := Publish(bg, third, f.src, f.capability("x")); err != nil {
		t.Fatal(err)
	}
	if got, _, err := third.Manifest(bg, md); err != nil || !bytes.Equal(got, raw) {
		t.Errorf("the manifest by digest in third: %v", err)
	}
	resp, err := http.Post("http://"+addr2+"/v2/fourth/blobs/uploads/?mount="+string(m.Layers[0].Digest)+"&from=foundry", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/v2/fourth/blobs/"+string(m.Layers[0].Digest) {
		t.Errorf("mount: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// What the distribution spec does not allow in a name or a reference is a 400 with an OCI
// error, never a panic (a tag with a NUL once dereferenced a nil request); an unknown
// repository is NAME_UNKNOWN.
func TestServeRefusesBadNamesAndReferences(t *testing.T) {
	addr, _ := startServe(t)
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"PUT", "/v2/foundry/manifests/a%00b", 400, "MANIFEST_INVALID"},
		{"PUT", "/v2/foundry/manifests/" + strings.Repeat("t", 129), 400, "MANIFEST_INVALID"},
		{"PUT", "/v2/foundry/manifests/sha256:zz", 400, "MANIFEST_INVALID"},
		{"GET", "/v2/foundry/manifests/.hidden", 404, "MANIFEST_UNKNOWN"},
		{"PUT", "/v2/Foundry/manifests/latest", 400, "NAME_INVALID"},
		{"POST", "/v2/a%00b/blobs/uploads/", 400, "NAME_INVALID"},
		{"GET", "/v2/nobody/tags/list", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/nobody/manifests/latest", 404, "NAME_UNKNOWN"},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, strings.NewReader(`{"schemaVersion":2}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Errors []struct{ Code string } }
		json.Unmarshal(b, &e)
		if resp.StatusCode != c.status || len(e.Errors) != 1 || e.Errors[0].Code != c.code {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, resp.StatusCode, b, c.status, c.code)
		}
	}
}

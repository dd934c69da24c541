package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/engine/deliver"
)

// examples/scores end to end, as `make example` runs it but delivering to a temporary
// directory a temporary grants file allows: int-sort is admitted, the service that calls it
// is accepted through its HTTP interface across a restart, and the release is delivered and
// verifies. A fresh user starts the release from its files, uploads, restarts it and gets
// the list back. Then the example is changed to keep its data in /tmp: acceptance fails
// after the restart and nothing more is delivered. Last, stage 6 (exampleScoresRollback):
// a release with a known defect, observed and rolled back.
func TestExampleScores(t *testing.T) {
	needSandbox(t)
	needGoToolchain(t)
	dir := copyExample(t, "scores")
	dest := filepath.Join(t.TempDir(), "releases")
	grants := filepath.Join(t.TempDir(), "grants.hcl")
	if err := os.WriteFile(grants, []byte(`grant "deliver" { to = ["dir:`+dest+`"] }`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-grants", grants, "-var", "release_dir=" + dest}

	r := apply(t, dir, nil, args...)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	acc := acceptEvents(t, r.stderr)["product.scores"]
	if acc.Type != "product_accepted" || acc.Cases != 2 || acc.CasesPassed != 2 {
		t.Fatalf("acceptance: %+v\n%s", acc, r.stderr)
	}
	rels := releases(t, dest)
	if len(rels) != 1 || !strings.Contains(r.stdout, "Delivered product.scores to dir:"+filepath.Join(dest, rels[0])) {
		t.Fatalf("releases %v\n%s", rels, r.stdout)
	}
	rel := filepath.Join(dest, rels[0])
	b, err := os.ReadFile(filepath.Join(rel, deliver.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m deliver.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	accepted := false
	for _, a := range m.Acceptance {
		accepted = accepted || a.Check == "product.scores.accept"
	}
	if m.Product != "product.scores" || !accepted || strings.Join(m.Start, " ") != "/srv/start ../data" ||
		!strings.Contains(m.Restart, "./srv/start ../data") {
		t.Errorf("release manifest: %s", b)
	}
	// The files are what was accepted laid over seed.bb's root: the release names that image.
	if rt := m.Runtime; rt == nil || rt.Seed != "seed.bb" || !strings.HasPrefix(rt.Image, "sha256:") ||
		!strings.Contains(m.Restart, "accepted running on the image "+rt.Image+" (seed.bb)") {
		t.Errorf("the release does not say what runtime it needs: %s", b)
	}
	key := filepath.Join(dir, ".foundry", "keys", "signing.pub")
	if code, out, errs := foundry(t, dir, "verify", "-key", key, rel); code != 0 || !strings.Contains(out, "VERIFIED") {
		t.Fatalf("verify %s: exit %d\n%s\n%s", rel, code, out, errs)
	}

	// A fresh user: start it from the channel's files, as the restart instructions say,
	// upload, restart, retrieve. The data is the release's data/.
	files := filepath.Join(dest, "current", "files")
	base, stop := startRelease(t, files, "../data")
	if got := httpDo(t, "POST", base+"/cgi-bin/scores", "[5, 3, 5, -1]"); got != "201 {\"id\":1}" {
		t.Errorf("upload: %s", got)
	}
	if got := httpDo(t, "POST", base+"/cgi-bin/scores", "[1, 1.5]"); got != "400 {\"error\":\"invalid_input\"}" {
		t.Errorf("malformed upload: %s", got)
	}
	stop()
	if _, err := os.Stat(filepath.Join(rel, "data", "scores", "1")); err != nil {
		t.Errorf("the upload is not in the release's data: %v", err)
	}
	base, stop = startRelease(t, files, "../data")
	defer stop()
	if got := httpDo(t, "GET", base+"/cgi-bin/scores?id=1", ""); got != "200 [-1,3,5,5]" {
		t.Errorf("after the restart, list 1: %s", got)
	}
	if got := httpDo(t, "GET", base+"/cgi-bin/scores?id=2", ""); got != "404 {\"error\":\"not_found\"}" {
		t.Errorf("after the restart, list 2: %s", got)
	}

	// Keeping the scores in /tmp, which a restart loses, fails acceptance: nothing more is
	// delivered.
	start := filepath.Join(dir, "src", "start")
	src, err := os.ReadFile(start)
	if err != nil {
		t.Fatal(err)
	}
	mutated := strings.Replace(string(src), `mkdir -p "$1/scores"`, `set -- /tmp; mkdir -p "$1/scores"`, 1)
	if mutated == string(src) {
		t.Fatal("src/start no longer has the line this test mutates")
	}
	os.WriteFile(start, []byte(mutated), 0o755)
	r = apply(t, dir, nil, args...)
	acc = acceptEvents(t, r.stderr)["product.scores"]
	if r.code != 1 || acc.Type != "acceptance_failed" || !strings.Contains(r.stderr, `want 2xx (success)`) ||
		!strings.Contains(r.stderr, "GET /cgi-bin/scores?id=1") {
		t.Fatalf("apply of the scores kept in /tmp: exit %d, acceptance %+v\n%s", r.code, acc, r.stderr)
	}
	if got := releases(t, dest); len(got) != 1 {
		t.Fatalf("a product that failed acceptance was delivered: %v", got)
	}

	// Blueprint stage 6: a release with a known defect, and the rollback.
	exampleScoresRollback(t, dir, dest, args, string(src))
}

// startRelease runs a release's start command from its files directory with the data
// directory data, on a free port, and waits until it answers; stop ends it.
func startRelease(t *testing.T, files, data string) (base string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("./srv/start", data)
	cmd.Dir = files
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return base, stop
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	t.Fatalf("the release did not start on %s", base)
	return "", nil
}

// httpDo sends a request and returns "STATUS BODY", the body trimmed.
func httpDo(t *testing.T, method, url, body string) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newTraceFixture copies testdata/tracecounter: a counter service reconstructed against a
// reference counter, whose sealed suite expects the reference's trace of effects.
func newTraceFixture(t *testing.T, edits ...string) string {
	t.Helper()
	needSandbox(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "tracecounter"), dir)
	tmpl, err := os.ReadFile(filepath.Join(dir, "main.hcl.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	hcl := strings.NewReplacer(append([]string{"CANDIDATES", "3"}, edits...)...).Replace(string(tmpl))
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A sealed service suite that expects a reference's trace of effects: each case's requests
// go to the reference and to the candidate, each in a fresh sandbox of its own. Round 1's
// counter answers its reset like the reference but keeps 1, so its trace diverges at
// request 4 of 6 (the responses after it agree again) and it is rejected with that step
// named; round 2's counter agrees on every step and is admitted, the admission saying what
// was proven.
func TestServiceTraceDifferential(t *testing.T) {
	dir := newTraceFixture(t)
	r := apply(t, dir, nil, "-progress", "plain")
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	saysAll(t, "apply", r.stderr,
		"reconstruct round 1: failed the sealed suite: the trace diverges from the reference's at request 4 of 6: output differs at $.count",
		"input:    request 4 of 6: GET /cgi-bin/counter?op=get",
		// Shrunk: requests dropped (and reset's method, whose default is GET, which the
		// counter accepts) while the trace still diverges: a reset then a read is the least
		// that shows the fault.
		`shrunk:   [{"path":"/cgi-bin/counter?op=reset"},{"method":"GET","path":"/cgi-bin/counter?op=get"}] (its trace diverges from the reference refcounter's; from case sha256:`,
		"ADM capability.counter: reconstruct round 2 admitted as",
		"agreed with reference refcounter's trace of effects on 1 sealed case(s), 0 disagreements")
}

// A reference that cannot answer a trace case's requests disagrees with the contract: the
// job stops with the reason and the case, and nothing is admitted.
func TestServiceTraceReferenceDisagrees(t *testing.T) {
	dir := newTraceFixture(t, "\"/bin/counter\"]\n      licence", "\"sh\", \"-c\", \"echo no port for me >&2; exit 7\"]\n      licence")
	r := failedApply(t, dir)
	saysAll(t, "apply", r.stderr,
		"reference and contract disagree: reference refcounter on case sealed/",
		`the reference exited before it was ready (exit 7); output "no port for me"`)
	if strings.Contains(r.stderr, "admitted as") {
		t.Errorf("a candidate was admitted against a reference that never answered:\n%s", r.stderr)
	}
}

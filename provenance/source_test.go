package provenance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirSource(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	a, b := sha("a"), sha("b")
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "nested"), 0o755)
	os.WriteFile(filepath.Join(dir, "a.json"), mint(t, kp, testExecution(a)), 0o644)
	os.WriteFile(filepath.Join(dir, "nested", "b.intoto.json"), mint(t, kp, testExecution(b)), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("attestations live here"), 0o644)
	os.WriteFile(filepath.Join(dir, "empty.json"), nil, 0o644)
	outside := filepath.Join(t.TempDir(), "outside.json")
	os.WriteFile(outside, mint(t, kp, testExecution(sha("outside"))), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link.json"))

	src, err := NewDirSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for d, want := range map[string]string{a: "a.json", b: filepath.Join("nested", "b.intoto.json")} {
		got, err := src.Lookup(ctx, d)
		if err != nil || len(got) != 1 || got[0].Source != filepath.Join(dir, want) {
			t.Errorf("Lookup(%s) = %+v, %v; want %s", d, got, err, want)
		}
	}
	if got, _ := src.Lookup(ctx, sha("outside")); len(got) != 0 {
		t.Error("followed a symlink out of the directory")
	}
	if got, _ := src.Lookup(ctx, sha("nothing")); len(got) != 0 {
		t.Error("found attestations for an unknown digest")
	}
	skipped := map[string]string{}
	for _, s := range src.Skipped {
		skipped[filepath.Base(s.Path)] = s.Reason
	}
	for _, name := range []string{"README", "empty.json", "link.json"} {
		if skipped[name] == "" {
			t.Errorf("%s not reported as skipped (skipped: %v)", name, skipped)
		}
	}
	if !strings.Contains(skipped["empty.json"], "envelope-empty") {
		t.Errorf("empty.json skipped for %q", skipped["empty.json"])
	}

	// The directory may itself be a symlink; files are named under the given path.
	link := filepath.Join(t.TempDir(), "att")
	os.Symlink(dir, link)
	src, err = NewDirSource(link)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := src.Lookup(ctx, a); len(got) != 1 || got[0].Source != filepath.Join(link, "a.json") {
		t.Errorf("through a linked directory: %+v", got)
	}

	if _, err := NewDirSource(filepath.Join(dir, "a.json")); err == nil {
		t.Error("a file accepted as an attestation directory")
	}
	if _, err := NewDirSource(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory accepted")
	}
}

type failingSource struct{}

func (failingSource) Lookup(context.Context, string) ([]Attestation, error) {
	return nil, errors.New("registry unreachable")
}

func TestSourceErrorIsReported(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	rep, err := Verify(context.Background(), Options{Keys: kp.keys, Source: failingSource{}}, Subject{Name: "a", Digest: sha("a")})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || firstRefusal(rep) != CodeSourceError || !strings.Contains(rep.Artifacts[0].Checks[0].Detail, "registry unreachable") {
		t.Fatalf("source failure not reported: %+v", rep.Artifacts[0].Checks)
	}
	if rep, _ := Verify(context.Background(), Options{Keys: kp.keys}, Subject{Name: "a", Digest: sha("a")}); rep.OK || firstRefusal(rep) != CodeNoAttestation {
		t.Fatalf("no candidates: ok=%v code=%s", rep.OK, firstRefusal(rep))
	}
	for name, opts := range map[string]Options{"no keys": {}, "nil key": {Keys: []*Verifier{nil}}} {
		if _, err := Verify(context.Background(), opts, Subject{Name: "a", Digest: sha("a")}); err == nil {
			t.Errorf("%s: Verify did not refuse its options", name)
		}
	}
	if _, err := Verify(context.Background(), Options{Keys: kp.keys}, Subject{Name: "a", Digest: "sha256:XYZ"}); err == nil {
		t.Error("malformed artifact digest accepted")
	}
}

func TestMultiSource(t *testing.T) {
	kp := newKeyPair(t, KeyECDSAP256)
	d := sha("a")
	env := mint(t, kp, testExecution(d))
	dir1, dir2 := t.TempDir(), t.TempDir()
	WriteEnvelope(dir1, env)
	WriteEnvelope(dir2, env)
	s1, _ := NewDirSource(dir1)
	s2, _ := NewDirSource(dir2)
	got, err := MultiSource{s1, s2}.Lookup(context.Background(), d)
	if err != nil || len(got) != 2 {
		t.Fatalf("MultiSource found %d, %v; want 2", len(got), err)
	}
	// The same bytes from two sources are one candidate in the report.
	rep, _ := Verify(context.Background(), Options{Keys: kp.keys, Source: MultiSource{s1, s2}}, Subject{Name: "a", Digest: d})
	if !rep.OK || len(rep.Artifacts[0].Attestations) != 1 {
		t.Fatalf("ok=%v candidates=%d", rep.OK, len(rep.Artifacts[0].Attestations))
	}
	if _, err := (MultiSource{s1, failingSource{}}).Lookup(context.Background(), d); err == nil {
		t.Fatal("a failing source was ignored")
	}
}

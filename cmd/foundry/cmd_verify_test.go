package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
)

// verifyFixture is a key pair made by `foundry keygen` and helpers to attest artifacts.
type verifyFixture struct {
	dir    string
	pub    string
	signer *provenance.Signer
}

func newVerifyFixture(t *testing.T) *verifyFixture {
	t.Helper()
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "keygen", "-out", filepath.Join(dir, "foundry")); code != exitOK {
		t.Fatalf("keygen: %s", errOut)
	}
	s, err := provenance.LoadSigner(filepath.Join(dir, "foundry.key"))
	if err != nil {
		t.Fatal(err)
	}
	return &verifyFixture{dir: dir, pub: filepath.Join(dir, "foundry.pub"), signer: s}
}

func fakeDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// attest mints and signs provenance for a step whose single output has digest d, as the
// executor named would, and returns the envelope bytes.
func (f *verifyFixture) attest(t *testing.T, name, d, executor, isolation string, inputs ...provenance.Dependency) []byte {
	t.Helper()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st, err := provenance.NewProvenance(&provenance.Execution{
		InvocationID: "test/" + name,
		Executor:     executor,
		Isolation:    isolation,
		Step:         json.RawMessage(`{"run":["sh","-c","build"],"outputs":["/out/` + name + `"]}`),
		ActionDigest: fakeDigest("action " + name),
		Network:      provenance.Network{Mode: "none"},
		Image:        provenance.Dependency{Name: "image", Digest: fakeDigest("image")},
		Inputs:       inputs,
		Outputs:      []provenance.Artifact{{Name: "/out/" + name, Digest: d}},
		StartedOn:    start,
		FinishedOn:   start.Add(time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := provenance.Sign(f.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func (f *verifyFixture) write(t *testing.T, rel string, data []byte) string {
	t.Helper()
	p := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifyFile(t *testing.T) {
	f := newVerifyFixture(t)
	bin := f.write(t, "out/tool", []byte("#!/bin/sh\necho tool\n"))
	d, _, err := digest.File(bin)
	if err != nil {
		t.Fatal(err)
	}
	env := f.write(t, "att/tool.intoto.json", f.attest(t, "tool", string(d), "containerd", provenance.IsolationContainer))

	code, out, errOut := runCLI(t, "verify", "-key", f.pub, "-attestation", env, bin)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.HasPrefix(out, "VERIFIED: 1 of 1") || !strings.Contains(out, "PASS subject") {
		t.Errorf("report:\n%s", out)
	}

	// The same through a directory source, with -json and the literal digest.
	code, out, errOut = runCLI(t, "verify", "-key", f.pub, "-attestations", filepath.Join(f.dir, "att"), "-json", string(d))
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var rep provenance.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.OK || rep.Artifacts[0].Digest != string(d) {
		t.Fatalf("JSON report: %v\n%s", err, out)
	}

	// A changed artifact is refused, and the report says why.
	f.write(t, "out/tool", []byte("#!/bin/sh\necho evil\n"))
	code, out, _ = runCLI(t, "verify", "-key", f.pub, "-attestation", env, bin)
	if code != exitError || !strings.Contains(out, "FAIL subject [subject-mismatch]") {
		t.Fatalf("modified artifact: exit %d\n%s", code, out)
	}
}

func TestVerifyDirectoryArtifact(t *testing.T) {
	f := newVerifyFixture(t)
	out := filepath.Join(f.dir, "out", "site")
	f.write(t, "out/site/index.html", []byte("<h1>hi</h1>"))
	f.write(t, "out/site/css/a.css", []byte("h1{}"))
	_, d, err := digest.Dir(out)
	if err != nil {
		t.Fatal(err)
	}
	env := f.write(t, "att/site.json", f.attest(t, "site", string(d), "runc", provenance.IsolationContainer))
	if code, stdout, errOut := runCLI(t, "verify", "-key", f.pub, "-attestation", env, out); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, errOut)
	}
	f.write(t, "out/site/extra.js", []byte("x"))
	if code, stdout, _ := runCLI(t, "verify", "-key", f.pub, "-attestation", env, out); code != exitError {
		t.Fatalf("a file added to the tree still verified: exit %d\n%s", code, stdout)
	}
}

func TestVerifyRefusals(t *testing.T) {
	f := newVerifyFixture(t)
	other := newVerifyFixture(t)
	bin := f.write(t, "tool", []byte("tool"))
	d, _, _ := digest.File(bin)
	good := f.attest(t, "tool", string(d), "containerd", provenance.IsolationContainer)
	goodPath := f.write(t, "good.json", good)

	flipped := func(field string) []byte {
		m := map[string]any{}
		json.Unmarshal(good, &m)
		switch field {
		case "payload":
			p, _ := base64.StdEncoding.DecodeString(m["payload"].(string))
			p[10] ^= 1
			m["payload"] = base64.StdEncoding.EncodeToString(p)
		case "sig":
			sigs := m["signatures"].([]any)
			s0 := sigs[0].(map[string]any)
			s, _ := base64.StdEncoding.DecodeString(s0["sig"].(string))
			s[len(s)-1] ^= 1
			s0["sig"] = base64.StdEncoding.EncodeToString(s)
		case "payloadType":
			m["payloadType"] = "text/plain"
		}
		b, _ := json.Marshal(m)
		return b
	}

	cases := []struct {
		name string
		env  []byte
		args []string
		want string
	}{
		{"flipped payload", flipped("payload"), nil, "[signature-invalid]"},
		{"flipped signature", flipped("sig"), nil, "[signature-invalid]"},
		{"changed payloadType", flipped("payloadType"), nil, "[payload-type]"},
		{"other key", other.attest(t, "tool", string(d), "containerd", provenance.IsolationContainer), nil, "[signature-invalid]"},
		{"garbage", []byte("garbage"), nil, "[envelope-not-json]"},
		{"empty", nil, nil, "[envelope-empty]"},
		{"truncated", good[:len(good)-10], nil, "[envelope-truncated]"},
		{"unsandboxed builder", f.attest(t, "tool", string(d), "local", provenance.IsolationNone), nil, "[builder-not-allowed]"},
		{"builder not in -builder", good, []string{"-builder", "https://foundry.dev/builder/runc@v1?isolation=container"}, "[builder-not-allowed]"},
		{"type nobody attested", good, []string{"-type", "https://in-toto.io/attestation/test-result/v0.1"}, "[type-missing]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := f.write(t, "case.json", c.env)
			args := append([]string{"verify", "-key", f.pub, "-attestation", p}, c.args...)
			code, out, errOut := runCLI(t, append(args, bin)...)
			if code != exitError {
				t.Fatalf("exit %d, want %d\n%s%s", code, exitError, out, errOut)
			}
			if !strings.Contains(out, c.want) || !strings.HasPrefix(out, "NOT VERIFIED") {
				t.Fatalf("report lacks %s:\n%s", c.want, out)
			}
		})
	}

	t.Run("A's attestation for B", func(t *testing.T) {
		b := f.write(t, "other-tool", []byte("other"))
		code, out, _ := runCLI(t, "verify", "-key", f.pub, "-attestation", goodPath, b)
		if code != exitError || !strings.Contains(out, "[subject-mismatch]") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("policy allows local", func(t *testing.T) {
		p := f.write(t, "local.json", f.attest(t, "tool", string(d), "local", provenance.IsolationNone))
		pol := f.write(t, "policy.json", []byte(`{"builders":["https://foundry.dev/builder/local@v1?isolation=none"]}`))
		if code, out, errOut := runCLI(t, "verify", "-key", f.pub, "-policy", pol, "-attestation", p, bin); code != exitOK {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		bad := f.write(t, "bad-policy.json", []byte(`{"builder":["x"]}`))
		if code, _, errOut := runCLI(t, "verify", "-key", f.pub, "-policy", bad, "-attestation", p, bin); code != exitError || !strings.Contains(errOut, "unknown field") {
			t.Fatalf("misspelt policy: exit %d: %s", code, errOut)
		}
	})
	t.Run("either key of two", func(t *testing.T) {
		if code, out, _ := runCLI(t, "verify", "-key", other.pub, "-key", f.pub, "-attestation", goodPath, bin); code != exitOK {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"verify", "-attestation", goodPath, bin},           // no key
			{"verify", "-key", f.pub, "-attestation", goodPath}, // no artifact
			{"verify", "-key", f.pub, bin},                      // no attestations
			{"verify", "-key", f.pub, "-attestation", goodPath, "-type", "", bin},
		} {
			if code, _, _ := runCLI(t, args...); code != exitUsage {
				t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
			}
		}
		for _, args := range [][]string{
			{"verify", "-key", filepath.Join(f.dir, "missing.pub"), "-attestation", goodPath, bin},
			{"verify", "-key", filepath.Join(f.dir, "foundry.key"), "-attestation", goodPath, bin},
			{"verify", "-key", f.pub, "-attestation", goodPath, filepath.Join(f.dir, "missing")},
			{"verify", "-key", f.pub, "-attestation", goodPath, "sha256:abc"},
			{"verify", "-key", f.pub, "-attestations", filepath.Join(f.dir, "missing"), bin},
		} {
			if code, _, errOut := runCLI(t, args...); code != exitError || errOut == "" {
				t.Errorf("%v: exit %d (%q), want %d with a message", args, code, errOut, exitError)
			}
		}
	})
}

// TestVerifyFollowsDependencies: an app built from a library that Foundry also built is
// verified only if the library's provenance verifies too.
func TestVerifyFollowsDependencies(t *testing.T) {
	f := newVerifyFixture(t)
	lib := f.write(t, "out/lib.a", []byte("library"))
	app := f.write(t, "out/app", []byte("application"))
	libD, _, _ := digest.File(lib)
	appD, _, _ := digest.File(app)
	dep := provenance.Dependency{Name: "/in/lib.a", Digest: string(libD), Producer: fakeDigest("action lib")}
	attDir := filepath.Join(f.dir, "att")
	f.write(t, "att/app.json", f.attest(t, "app", string(appD), "containerd", provenance.IsolationContainer, dep))

	code, out, _ := runCLI(t, "verify", "-key", f.pub, "-attestations", attDir, app)
	if code != exitError || !strings.Contains(out, "[dependency-unverified]") || !strings.Contains(out, string(libD)) {
		t.Fatalf("missing dependency provenance: exit %d\n%s", code, out)
	}
	f.write(t, "att/lib.json", f.attest(t, "lib.a", string(libD), "runc", provenance.IsolationContainer))
	code, out, errOut := runCLI(t, "verify", "-key", f.pub, "-attestations", attDir, app)
	if code != exitOK || !strings.Contains(out, "dependency:") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestVerifyHelpTeaches(t *testing.T) {
	code, out, _ := runCLI(t, "verify", "-help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Examples:", "Exit codes:", "cosign verify-blob-attestation", "-attestations", "policy"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

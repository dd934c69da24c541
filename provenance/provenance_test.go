package provenance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeKeys generates a key pair of keyType into dir and returns the private and public
// key paths.
func writeKeys(t *testing.T, dir, keyType string) (string, string) {
	t.Helper()
	priv, pub, err := GenerateKey(keyType)
	if err != nil {
		t.Fatal(err)
	}
	name := keyType
	if name == "" {
		name = "default"
	}
	privPath := filepath.Join(dir, name+".key")
	pubPath := filepath.Join(dir, name+".pub")
	if err := os.WriteFile(privPath, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return privPath, pubPath
}

type keyPair struct {
	signer *Signer
	keys   []*Verifier
	pub    string
}

func newKeyPair(t *testing.T, keyType string) keyPair {
	t.Helper()
	privPath, pubPath := writeKeys(t, t.TempDir(), keyType)
	s, err := LoadSigner(privPath)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := LoadVerifiers(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].KeyID != s.KeyID() {
		t.Fatalf("verifier key id %s != signer key id %s", vs[0].KeyID, s.KeyID())
	}
	return keyPair{signer: s, keys: vs, pub: pubPath}
}

// testExecution is what a containerd executor might observe for a step producing out.
func testExecution(outDigest string) *Execution {
	start := time.Date(2026, 11, 29, 18, 0, 0, 123456789, time.UTC)
	return &Execution{
		InvocationID:      "run-1/recipe.int-sort-go/step.build/attempt-1",
		Executor:          "containerd",
		Isolation:         IsolationContainer,
		Versions:          map[string]string{"foundry": "dev"},
		Step:              json.RawMessage(`{"run":["go","build","-o","/out/int-sort","."],"workdir":"/src","outputs":["/out/int-sort"],"limits":{"memory":"1GiB","time":"5m"}}`),
		ActionDigest:      sha("action"),
		Platform:          "linux/amd64",
		Network:           Network{Mode: "none"},
		Limits:            Limits{MemoryBytes: 1 << 30, TimeoutMillis: 300000, Pids: 256},
		User:              "65534:65534",
		RuntimeSpecDigest: sha("runtime spec"),
		Image:             Dependency{Name: "image", URI: "oci:seed.go", Digest: sha("image")},
		Inputs: []Dependency{
			{Name: "/src", URI: "file:src/int-sort", Digest: sha("src")},
		},
		Outputs:    []Artifact{{Name: "/out/int-sort", Digest: outDigest}},
		Logs:       []Artifact{{Name: "stdout", Digest: sha("stdout")}, {Name: "stderr", Digest: sha("stderr")}},
		StartedOn:  start,
		FinishedOn: start.Add(3 * time.Second),
	}
}

func mint(t *testing.T, kp keyPair, e *Execution) []byte {
	t.Helper()
	st, err := NewProvenance(e)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Sign(kp.signer, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func verifyOne(t *testing.T, keys []*Verifier, env []byte, digest string, pol Policy) *Report {
	t.Helper()
	rep, err := Verify(context.Background(), Options{
		Keys:         keys,
		Policy:       pol,
		Attestations: []Attestation{{Source: "test.json", Envelope: env}},
	}, Subject{Name: "artifact", Digest: digest})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// firstRefusal is the code of the first failing check of the first candidate, or of the
// artifact if there was no candidate.
func firstRefusal(rep *Report) string {
	a := rep.Artifacts[0]
	for _, at := range a.Attestations {
		for _, c := range at.Checks {
			if !c.OK {
				return c.Code
			}
		}
	}
	for _, c := range a.Checks {
		if !c.OK {
			return c.Code
		}
	}
	return ""
}

func TestSignVerifyRoundTrip(t *testing.T) {
	for _, kt := range []string{KeyECDSAP256, KeyEd25519} {
		t.Run(kt, func(t *testing.T) {
			kp := newKeyPair(t, kt)
			out := sha("binary")
			env := mint(t, kp, testExecution(out))
			rep := verifyOne(t, kp.keys, env, out, Policy{})
			if !rep.OK {
				var b strings.Builder
				rep.WriteText(&b)
				t.Fatalf("not verified:\n%s", b.String())
			}
			at := rep.Artifacts[0].Attestations[0]
			if at.Digest != EnvelopeDigest(env) {
				t.Errorf("report names envelope %s, want %s", at.Digest, EnvelopeDigest(env))
			}
			if at.BuilderID != "https://foundry.dev/builder/containerd@v1?isolation=container" {
				t.Errorf("builder id %q", at.BuilderID)
			}
		})
	}
}

func TestStatementContents(t *testing.T) {
	e := testExecution(sha("binary"))
	e.Inputs = append(e.Inputs, Dependency{Name: "/lib", Digest: sha("lib"), Producer: sha("lib-action")})
	st, err := NewProvenance(e)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	get := func(path ...string) any {
		var v any = doc
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not an object at %s", path, p)
			}
			v = m[p]
		}
		return v
	}
	checks := map[string][2]any{
		"_type":         {get("_type"), "https://in-toto.io/Statement/v1"},
		"predicateType": {get("predicateType"), PredicateSLSAProvenance},
		"buildType":     {get("predicate", "buildDefinition", "buildType"), BuildTypeStep},
		"workdir":       {get("predicate", "buildDefinition", "externalParameters", "workdir"), "/src"},
		"actionDigest":  {get("predicate", "buildDefinition", "internalParameters", "actionDigest"), e.ActionDigest},
		"network":       {get("predicate", "buildDefinition", "internalParameters", "network", "mode"), "none"},
		"runtimeSpec":   {get("predicate", "buildDefinition", "internalParameters", "runtimeSpecDigest"), sha("runtime spec")},
		"builder":       {get("predicate", "runDetails", "builder", "id"), "https://foundry.dev/builder/containerd@v1?isolation=container"},
		"invocation":    {get("predicate", "runDetails", "metadata", "invocationId"), e.InvocationID},
		"startedOn":     {get("predicate", "runDetails", "metadata", "startedOn"), "2026-11-29T18:00:00.123456789Z"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	deps := get("predicate", "buildDefinition", "resolvedDependencies").([]any)
	if len(deps) != 3 {
		t.Fatalf("%d resolved dependencies, want image + 2 inputs", len(deps))
	}
	img := deps[0].(map[string]any)
	if img["annotations"].(map[string]any)[AnnotationRole] != "image" {
		t.Errorf("first dependency is not the image: %v", img)
	}
	lib := deps[2].(map[string]any)
	if lib["annotations"].(map[string]any)[AnnotationProducer] != sha("lib-action") {
		t.Errorf("producer annotation missing: %v", lib)
	}
	if n := len(get("predicate", "runDetails", "byproducts").([]any)); n != 2 {
		t.Errorf("%d byproducts, want 2 logs", n)
	}
	// The same observation gives the same payload bytes.
	st2, _ := NewProvenance(e)
	b2, _ := st2.MarshalJSON()
	if string(b) != string(b2) {
		t.Error("payload is not reproducible")
	}
}

func TestNewProvenanceRefusesIncompleteExecution(t *testing.T) {
	cases := map[string]func(*Execution){
		"no outputs":          func(e *Execution) { e.Outputs = nil },
		"bad output digest":   func(e *Execution) { e.Outputs[0].Digest = "sha256:ABC" },
		"duplicate output":    func(e *Execution) { e.Outputs = append(e.Outputs, e.Outputs[0]) },
		"no image":            func(e *Execution) { e.Image.Digest = "" },
		"input without name":  func(e *Execution) { e.Inputs[0].Name, e.Inputs[0].URI = "", "" },
		"no invocation":       func(e *Execution) { e.InvocationID = "" },
		"finished before":     func(e *Execution) { e.FinishedOn = e.StartedOn.Add(-time.Second) },
		"no times":            func(e *Execution) { e.StartedOn = time.Time{} },
		"step not object":     func(e *Execution) { e.Step = json.RawMessage(`["go"]`) },
		"step empty":          func(e *Execution) { e.Step = json.RawMessage(`{}`) },
		"step big integer":    func(e *Execution) { e.Step = json.RawMessage(`{"n":9007199254740993}`) },
		"local in container":  func(e *Execution) { e.Executor = "local" },
		"runc unsandboxed":    func(e *Execution) { e.Executor, e.Isolation = "runc", IsolationNone },
		"unknown isolation":   func(e *Execution) { e.Isolation = "vm" },
		"bad action digest":   func(e *Execution) { e.ActionDigest = "abc" },
		"bad network":         func(e *Execution) { e.Network.Mode = "" },
		"hosts with none":     func(e *Execution) { e.Network.Hosts = []string{"example.com"} },
		"bad producer digest": func(e *Execution) { e.Inputs[0].Producer = "step.build" },
		"bad runtime spec":    func(e *Execution) { e.RuntimeSpecDigest = "config.json" },
		"connections with none": func(e *Execution) {
			e.Egress = []Connection{{Method: "CONNECT", Host: "example.com", Port: 443, Outcome: "relayed"}}
		},
		"egress without hosts": func(e *Execution) { e.Network = Network{Mode: "egress", OutputDigest: sha("tree")} },
		"egress without digest": func(e *Execution) {
			e.Network = Network{Mode: "egress", Hosts: []string{"example.com:443"}}
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			e := testExecution(sha("out"))
			mutate(e)
			if _, err := NewProvenance(e); err == nil {
				t.Fatal("NewProvenance accepted it")
			}
		})
	}
	if _, err := NewProvenance(nil); err == nil {
		t.Fatal("NewProvenance(nil) accepted")
	}
}

func TestSignRefusesUnmintedStatement(t *testing.T) {
	kp := newKeyPair(t, "")
	if _, err := Sign(kp.signer, &Statement{}); err == nil {
		t.Fatal("signed a statement that NewProvenance did not mint")
	}
	if _, err := Sign(kp.signer, nil); err == nil {
		t.Fatal("signed nil")
	}
}

func TestKeys(t *testing.T) {
	dir := t.TempDir()
	privPath, pubPath := writeKeys(t, dir, KeyECDSAP256)
	if err := os.Chmod(privPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(privPath); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key: err = %v, want a refusal that says chmod 600", err)
	}
	if _, err := LoadSigner(pubPath); err == nil {
		t.Error("loaded a public key as a signer")
	}
	if _, err := LoadSigner(""); err == nil || !strings.Contains(err.Error(), SigningKeyEnv) {
		t.Errorf("empty path: err = %v, want a hint naming %s", err, SigningKeyEnv)
	}
	if _, err := LoadVerifiers(privPath); err == nil {
		t.Error("loaded a private key as a public key")
	}
	if _, err := LoadVerifiers(); err == nil {
		t.Error("LoadVerifiers() with no paths succeeded")
	}
	// Two keys in one file are two verifiers.
	_, pub2 := writeKeys(t, t.TempDir(), KeyEd25519)
	a, _ := os.ReadFile(pubPath)
	b, _ := os.ReadFile(pub2)
	both := filepath.Join(dir, "both.pub")
	os.WriteFile(both, append(a, b...), 0o644)
	vs, err := LoadVerifiers(both)
	if err != nil || len(vs) != 2 {
		t.Fatalf("LoadVerifiers(both) = %d keys, %v", len(vs), err)
	}
	if _, _, err := GenerateKey("rsa"); err == nil {
		t.Error("generated an unsupported key type")
	}
}

func TestSigningKeyPath(t *testing.T) {
	env := func(k string) string {
		if k == SigningKeyEnv {
			return "/keys/env.key"
		}
		return ""
	}
	if got := SigningKeyPath("/keys/flag.key", env); got != "/keys/flag.key" {
		t.Errorf("flag does not win: %q", got)
	}
	if got := SigningKeyPath("", env); got != "/keys/env.key" {
		t.Errorf("env not used: %q", got)
	}
	if got := SigningKeyPath("", nil); got != "" {
		t.Errorf("nil getenv: %q", got)
	}
}

func TestBuilderID(t *testing.T) {
	id, err := BuilderID("local", IsolationNone)
	if err != nil || id != "https://foundry.dev/builder/local@v1?isolation=none" {
		t.Fatalf("BuilderID(local, none) = %q, %v", id, err)
	}
	for _, bad := range [][2]string{{"Local", "none"}, {"", "none"}, {"containerd", "none"}, {"x", ""}, {"a/b", "container"}} {
		if _, err := BuilderID(bad[0], bad[1]); err == nil {
			t.Errorf("BuilderID(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// A fixed-output step's provenance carries its network (mode, hosts, output digest) and
// every connection of its broker, refused ones too, as byproducts egress/N in order.
func TestEgressConnectionsInProvenance(t *testing.T) {
	e := testExecution(sha("out"))
	e.Network = Network{Mode: "egress", Hosts: []string{"proxy.example:443"}, OutputDigest: sha("tree")}
	e.Egress = []Connection{
		{Method: "CONNECT", Host: "evil.example", Port: 443, Outcome: "refused", Reason: "no grant allows evil.example:443"},
		{Method: "CONNECT", Host: "proxy.example", Port: 443, Address: "192.0.2.7:443", Outcome: "relayed", Sent: 900, Received: 123456},
		{Method: "", Host: "", Outcome: "refused", Reason: "not an HTTP request"},
	}
	st, err := NewProvenance(e)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protojson.Marshal(st.InToto())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Predicate struct {
			BuildDefinition struct {
				InternalParameters struct {
					Network Network `json:"network"`
				} `json:"internalParameters"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Byproducts []struct {
					Name        string `json:"name"`
					URI         string `json:"uri"`
					Annotations struct {
						Role   string     `json:"foundry_role"`
						Egress Connection `json:"foundry_egress"`
					} `json:"annotations"`
				} `json:"byproducts"`
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if nw := got.Predicate.BuildDefinition.InternalParameters.Network; nw.Mode != "egress" || len(nw.Hosts) != 1 || nw.OutputDigest != sha("tree") {
		t.Errorf("network %+v", nw)
	}
	var conns []Connection
	for _, bp := range got.Predicate.RunDetails.Byproducts {
		if bp.Annotations.Role != "egress" {
			continue
		}
		if want := fmt.Sprintf("egress/%d", len(conns)); bp.Name != want {
			t.Errorf("byproduct %q, want %q", bp.Name, want)
		}
		if c := bp.Annotations.Egress; c.Port != 0 && bp.URI != fmt.Sprintf("tcp://%s:%d", c.Host, c.Port) {
			t.Errorf("byproduct %s: uri %q", bp.Name, bp.URI)
		}
		conns = append(conns, bp.Annotations.Egress)
	}
	if !reflect.DeepEqual(conns, e.Egress) {
		t.Errorf("connections\n got %+v\nwant %+v", conns, e.Egress)
	}
}

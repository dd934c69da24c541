package main

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/lang"
)

// zeroDigest is the output_digest a user writes before knowing the real one.
const zeroDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// egressProject fetches mod.txt from an HTTPS upstream through its broker (step.fetch, a
// fixed-output step) and builds from it offline (step.build).
const egressProject = `
project "fetcher" {}

variable "upstream" { type = string }
variable "ca"       { type = string }
variable "client"   { type = string }
variable "digest"   { default = "` + zeroDigest + `" }

seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox"), "/bin/egressclient" = host_file(var.client) }
    symlinks = { "/bin/sh" = "busybox", "/bin/mkdir" = "busybox", "/bin/grep" = "busybox", "/bin/cat" = "busybox" }
  }
  env = { PATH = "/bin" }
}

step "fetch" {
  image         = seed.bb
  network       = "egress"
  egress        = [var.upstream]
  output_digest = var.digest
  mounts        = { "/ca.pem" = var.ca }
  env           = { SSL_CERT_FILE = "/ca.pem" }
  run           = ["sh", "-c", "mkdir -p /out/src && egressclient get https://${var.upstream}/mod.txt /out/src/mod.txt"]
  outputs       = ["/out/src"]
}

step "build" {
  image   = seed.bb
  mounts  = { "/src" = step.fetch.output["/out/src"] }
  run     = ["sh", "-c", "grep -q 'module content' /src/mod.txt && cat /src/mod.txt /src/mod.txt > /out/built.txt"]
  outputs = ["/out/built.txt"]
}
`

// egressClient builds the sandbox's HTTP client (testdata/egressclient), static.
func egressClient(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "egressclient")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/egressclient")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the egress client: %v\n%s", err, out)
	}
	return bin
}

// counting is an upstream on loopback that counts its requests.
type counting struct {
	*httptest.Server
	hits atomic.Int64
}

func newCounting(t *testing.T, tlsOn bool, h http.HandlerFunc) *counting {
	c := &counting{}
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.hits.Add(1); h(w, r) })
	if tlsOn {
		c.Server = httptest.NewTLSServer(wrapped)
	} else {
		c.Server = httptest.NewServer(wrapped)
	}
	t.Cleanup(c.Close)
	return c
}

// addr is the upstream's HOST:PORT.
func (c *counting) addr() string { return c.Listener.Addr().String() }

// caPEM is the upstream's certificate, as the sandbox's client trusts it.
func (c *counting) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate().Raw}))
}

// writeGrants writes a grants file allowing hosts and returns its path.
func writeGrants(t *testing.T, hosts ...string) string {
	t.Helper()
	q := make([]string, len(hosts))
	for i, h := range hosts {
		q[i] = fmt.Sprintf("%q", h)
	}
	gf := filepath.Join(t.TempDir(), "grants.hcl")
	if err := os.WriteFile(gf, []byte(`grant "network" { hosts = [`+strings.Join(q, ", ")+`] }`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return gf
}

var gotDigest = regexp.MustCompile(`pin them: output_digest = "(sha256:[0-9a-f]{64})"`)

// egressStatement is the part of a step's signed provenance the egress tests read.
type egressStatement struct {
	Predicate struct {
		BuildDefinition struct {
			InternalParameters struct {
				Network struct {
					Mode         string   `json:"mode"`
					Hosts        []string `json:"hosts"`
					OutputDigest string   `json:"outputDigest"`
				} `json:"network"`
			} `json:"internalParameters"`
		} `json:"buildDefinition"`
		RunDetails struct {
			Byproducts []struct {
				Name        string `json:"name"`
				URI         string `json:"uri"`
				Annotations struct {
					Egress struct {
						Method   string  `json:"method"`
						Host     string  `json:"host"`
						Port     float64 `json:"port"`
						Address  string  `json:"address"`
						Outcome  string  `json:"outcome"`
						Reason   string  `json:"reason"`
						Sent     float64 `json:"sent"`
						Received float64 `json:"received"`
					} `json:"foundry_egress"`
				} `json:"annotations"`
			} `json:"byproducts"`
		} `json:"runDetails"`
	} `json:"predicate"`
}

// egressProvenance returns the statements of the project's attestations whose network
// mode is egress.
func egressProvenance(t *testing.T, dir string) []egressStatement {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, ".foundry", "attestations"))
	if err != nil {
		t.Fatal(err)
	}
	var out []egressStatement
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, ".foundry", "attestations", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Payload string }
		if json.Unmarshal(b, &env) != nil {
			continue
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			continue
		}
		var st egressStatement
		if json.Unmarshal(payload, &st) == nil && st.Predicate.BuildDefinition.InternalParameters.Network.Mode == "egress" {
			out = append(out, st)
		}
	}
	return out
}

// TestEgressStepFetchesThroughGrantedBroker is the life of a fixed-output step, on both
// sandboxes: needs-grant and refused with nothing run while its upstream is not granted;
// once granted, a wrong output digest fails it with the digest it got (which is the tree
// digest of its declared outputs) and stores nothing; pinned, it fetches through the
// broker, its provenance records the connection, the build runs offline from its output,
// and a second apply runs nothing and reaches nothing.
func TestEgressStepFetchesThroughGrantedBroker(t *testing.T) {
	needSandbox(t)
	client := egressClient(t)
	for _, exe := range []string{"runc", "containerd"} {
		t.Run(exe, func(t *testing.T) {
			args := []string{"-executor", exe}
			if exe == "containerd" {
				needContainerd(t)
				args = append(args, "-containerd-address", containerdAddress())
			}
			up := newCounting(t, true, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/mod.txt" {
					http.NotFound(w, r)
					return
				}
				fmt.Fprint(w, "module content\n")
			})
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(egressProject), 0o644); err != nil {
				t.Fatal(err)
			}
			vars := []string{"-var", "upstream=" + up.addr(), "-var", "ca=" + up.caPEM(), "-var", "client=" + client}

			// Not granted: needs-grant in the plan, refused by apply before anything runs.
			code, out, errs := foundry(t, dir, append([]string{"plan", "-json"}, vars...)...)
			p := decodePlan(t, out)
			var fetch *plan.Node
			for _, n := range p.Nodes {
				if n.Address == "step.fetch" {
					fetch = n
				}
			}
			if code != 0 || fetch == nil || fetch.Status != plan.StatusNeedsGrant || fetch.Egress == nil ||
				len(fetch.Egress.Hosts) != 1 || fetch.Egress.Hosts[0].Host != up.addr() || fetch.Egress.Hosts[0].Granted ||
				fetch.Step.OutputDigest != zeroDigest || p.Summary.NeedsGrant != 1 {
				t.Fatalf("plan: exit %d, step.fetch %+v, summary %+v\n%s", code, fetch, p.Summary, errs)
			}
			r := apply(t, dir, nil, append(args, vars...)...)
			if r.code != 1 || len(r.executed) != 0 || up.hits.Load() != 0 {
				t.Fatalf("apply without a grant: exit %d, executed %v, upstream hits %d\n%s", r.code, r.executed, up.hits.Load(), r.stderr)
			}
			for _, want := range []string{"step.fetch reaches " + up.addr() + ", which no grant allows", "Nothing was run", `grant "network" {`, `hosts = ["` + up.addr() + `"]`} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
				}
			}

			// Granted, with the digest not yet known: it fails and says the digest it got.
			grants := writeGrants(t, up.addr())
			args = append(args, "-grants", grants)
			r = apply(t, dir, nil, append(args, vars...)...)
			m := gotDigest.FindStringSubmatch(r.stderr)
			if r.code != 1 || m == nil || !strings.Contains(r.stderr, "not its output_digest "+zeroDigest) || len(r.executed) != 0 || up.hits.Load() != 1 {
				t.Fatalf("apply with a wrong output digest: exit %d, executed %v, upstream hits %d\n%s", r.code, r.executed, up.hits.Load(), r.stderr)
			}
			// The digest got is the tree digest of the declared outputs: /out/src/mod.txt.
			want := filepath.Join(t.TempDir(), "out")
			os.MkdirAll(filepath.Join(want, "src"), 0o755)
			os.WriteFile(filepath.Join(want, "src", "mod.txt"), []byte("module content\n"), 0o644)
			if _, d, err := digest.Dir(want); err != nil || string(d) != m[1] {
				t.Fatalf("the digest got is %s; the tree of the outputs has %s (%v)", m[1], d, err)
			}
			// Nothing was stored: the step is still to run.
			_, out, _ = foundry(t, dir, append([]string{"plan", "-json", "-grants", grants}, vars...)...)
			for _, n := range decodePlan(t, out).Nodes {
				if n.Address == "step.fetch" && n.Status != plan.StatusRun {
					t.Fatalf("after a wrong output digest, step.fetch is %s, want run", n.Status)
				}
			}

			// Pinned: it fetches through the broker and the build runs from its output.
			vars = append(vars, "-var", "digest="+m[1])
			r = apply(t, dir, nil, append(args, vars...)...)
			if r.code != 0 || !sameSet(r.executed, "step.fetch", "step.build") || up.hits.Load() != 2 {
				t.Fatalf("apply pinned: exit %d, executed %v, upstream hits %d\n%s", r.code, r.executed, up.hits.Load(), r.stderr)
			}
			sts := egressProvenance(t, dir)
			if len(sts) != 1 {
				t.Fatalf("%d egress provenance statements, want 1", len(sts))
			}
			nw := sts[0].Predicate.BuildDefinition.InternalParameters.Network
			if len(nw.Hosts) != 1 || nw.Hosts[0] != up.addr() || nw.OutputDigest != m[1] {
				t.Errorf("provenance network %+v", nw)
			}
			bp := sts[0].Predicate.RunDetails.Byproducts
			var conns int
			for _, b := range bp {
				if !strings.HasPrefix(b.Name, "egress/") {
					continue
				}
				conns++
				c := b.Annotations.Egress
				if c.Method != "CONNECT" || c.Host+fmt.Sprintf(":%d", int(c.Port)) != up.addr() || c.Address != up.addr() ||
					(c.Outcome != "relayed" && c.Outcome != "ended") || c.Received == 0 || c.Sent == 0 || b.URI != "tcp://"+up.addr() {
					t.Errorf("provenance connection %s: %+v (uri %s)", b.Name, c, b.URI)
				}
			}
			if conns != 1 {
				t.Errorf("provenance records %d connections, want 1: %+v", conns, bp)
			}

			// Everything is stored: a second apply runs nothing, and reaches nothing.
			r = apply(t, dir, nil, append(args, vars...)...)
			if r.code != 0 || len(r.executed) != 0 || !sameSet(r.cached, "step.fetch", "step.build") || up.hits.Load() != 2 {
				t.Fatalf("second apply: exit %d, executed %v, cached %v, upstream hits %d\n%s", r.code, r.executed, r.cached, up.hits.Load(), r.stderr)
			}
		})
	}
}

// attackProject's step tries what the broker must refuse, then fetches what it may; its
// report says how each went.
const attackProject = `
project "attacker" {}

variable "upstream" { type = string }
variable "plain"    { type = string }
variable "other"    { type = string }
variable "ca"       { type = string }
variable "client"   { type = string }
variable "digest"   { default = "` + zeroDigest + `" }
variable "limit"    { default = "1GiB" }
variable "time"     { default = "5m" }
variable "script"   { type = string }

seed "bb" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox"), "/bin/egressclient" = host_file(var.client) }
    symlinks = { "/bin/sh" = "busybox" }
  }
  env = { PATH = "/bin" }
}

step "attacks" {
  image         = seed.bb
  network       = "egress"
  egress        = [var.upstream, "localhost:${split(":", var.upstream)[1]}", "localhost:${split(":", var.plain)[1]}"]
  output_digest = var.digest
  mounts        = { "/ca.pem" = var.ca }
  env           = { SSL_CERT_FILE = "/ca.pem" }
  run           = ["sh", "-c", var.script]
  outputs       = ["/out/report.txt"]
  limits {
    egress = var.limit
    time   = var.time
  }
}
`

// TestEgressAttacksAreRefusedAndRecorded runs, through the CLI in a real sandbox, a step
// that attacks its broker: an ungranted endpoint, a granted name that resolves to
// loopback, the literal IP of a granted name, a CONNECT whose Host header names another
// endpoint. Each is refused, nothing reaches the upstreams it aimed at, and the step's
// provenance records each connection with its outcome; the granted fetch after them works.
// Then the bounds: a download past limits.egress is cut and a slow one ends at the step's
// time limit, each failing the step with what the broker saw in its log tail.
func TestEgressAttacksAreRefusedAndRecorded(t *testing.T) {
	needSandbox(t)
	client := egressClient(t)
	release := make(chan struct{})
	defer close(release)
	up := newCounting(t, true, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/mod.txt":
			fmt.Fprint(w, "module content\n")
		case "/big":
			chunk := make([]byte, 64<<10)
			for i := 0; i < 64; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/slow":
			w.Write([]byte("a trickle"))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	plain := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain\n") })
	other := newCounting(t, true, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other\n") })
	_, upPort, _ := strings.Cut(up.addr(), ":")
	_, plainPort, _ := strings.Cut(plain.addr(), ":")
	script := strings.Join([]string{
		"egressclient try https://" + other.addr() + "/x",                                             // not granted (another port of 127.0.0.1)
		"egressclient try https://localhost:" + upPort + "/mod.txt",                                   // granted name, resolves to loopback
		"egressclient try http://127.0.0.1:" + plainPort + "/x",                                       // the literal IP of a granted name
		`egressclient raw 'CONNECT ` + up.addr() + ` HTTP/1.1\r\nHost: ` + other.addr() + `\r\n\r\n'`, // Host of another
		"egressclient get https://" + up.addr() + "/mod.txt /out/mod.txt",
		"cat /out/mod.txt",
	}, " >> /out/report.txt; ") + " >> /out/report.txt"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(attackProject), 0o644); err != nil {
		t.Fatal(err)
	}
	grants := writeGrants(t, up.addr(), "localhost:"+upPort, "localhost:"+plainPort)
	vars := []string{"-grants", grants, "-var", "upstream=" + up.addr(), "-var", "plain=" + plain.addr(), "-var", "other=" + other.addr(),
		"-var", "ca=" + up.caPEM(), "-var", "client=" + client, "-var", "script=" + script}
	r := apply(t, dir, nil, vars...)
	m := gotDigest.FindStringSubmatch(r.stderr)
	if r.code != 1 || m == nil {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	r = apply(t, dir, nil, append(vars, "-var", "digest="+m[1])...)
	if r.code != 0 || !sameSet(r.executed, "step.attacks") {
		t.Fatalf("pinned apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	if other.hits.Load() != 0 || plain.hits.Load() != 0 || up.hits.Load() != 2 {
		t.Fatalf("upstream hits: other %d, plain %d, granted %d; want 0, 0 and 2 (one per apply)", other.hits.Load(), plain.hits.Load(), up.hits.Load())
	}
	sts := egressProvenance(t, dir)
	if len(sts) != 1 {
		t.Fatalf("%d egress provenance statements, want 1", len(sts))
	}
	type seen struct{ outcome, reason string }
	var got []seen
	for _, b := range sts[0].Predicate.RunDetails.Byproducts {
		if strings.HasPrefix(b.Name, "egress/") {
			got = append(got, seen{b.Annotations.Egress.Outcome, b.Annotations.Egress.Reason})
		}
	}
	want := []seen{
		{"refused", "no grant allows " + other.addr()},
		{"refused", "resolves to 127.0.0.1"},
		{"refused", "no grant allows 127.0.0.1:" + plainPort},
		{"refused", "the Host header"},
		{"relayed", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("provenance records %d connections, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].outcome != w.outcome && !(w.outcome == "relayed" && got[i].outcome == "ended") || !strings.Contains(got[i].reason, w.reason) {
			t.Errorf("connection %d: %+v, want %+v", i, got[i], w)
		}
	}

	// The bounds: past limits.egress the connection is cut; a slow download ends with the
	// step at its time limit. Each fails the step and says what the broker saw.
	bounds := []struct {
		name, script, limit, time, want string
	}{
		{"huge", "egressclient get https://" + up.addr() + "/big /out/report.txt", "256KiB", "5m", "limit: cut after"},
		{"slow", "egressclient get https://" + up.addr() + "/slow /out/report.txt", "1GiB", "3s", "killed at its time limit"},
	}
	for _, b := range bounds {
		start := time.Now()
		r := apply(t, dir, nil, append(vars[:len(vars)-2], "-var", "script="+b.script, "-var", "limit="+b.limit, "-var", "time="+b.time)...)
		if r.code != 1 || !strings.Contains(r.stderr, b.want) {
			t.Errorf("%s download: exit %d after %v, want a failure saying %q:\n%s", b.name, r.code, time.Since(start), b.want, r.stderr)
		}
	}
}

// TestEgressFetchesAGoModuleFromTheModuleProxy fetches a real module through the broker
// from the module proxy this machine reaches (the first URL of go env GOPROXY; no host is
// named here), with the Go toolchain as a seed, pins its digest on first use, and finds
// the connection in the provenance.
func TestEgressFetchesAGoModuleFromTheModuleProxy(t *testing.T) {
	needSandbox(t)
	out, err := exec.Command("go", "env", "GOPROXY").Output()
	proxy := strings.TrimSpace(strings.Split(strings.TrimSpace(string(out)), ",")[0])
	pu, perr := url.Parse(proxy)
	if err != nil || perr != nil || (pu.Scheme != "https" && pu.Scheme != "http") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go env GOPROXY is %q (%v): this test needs the module proxy this machine reaches", out, err)
		}
		t.Skipf("go env GOPROXY names no proxy URL: %q", out)
	}
	hp, err := lang.URLHostPort(pu)
	if err != nil {
		t.Fatal(err)
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	project := `
project "gofetch" {}

variable "goroot"  { type = string }
variable "goproxy" { type = string }
variable "host"    { type = string }
variable "digest"  { default = "` + zeroDigest + `" }

seed "go" {
  layer {
    # The machine's CA certificates: the module proxy is reached over TLS.
    files    = { "/bin/busybox" = host_file("/bin/busybox"), "/etc/ssl/certs/ca-certificates.crt" = host_file("/etc/ssl/certs/ca-certificates.crt") }
    symlinks = { "/bin/sh" = "busybox", "/bin/mkdir" = "busybox", "/bin/cp" = "busybox" }
  }
  layer {
    dir = host_dir(var.goroot)
    at  = "/usr/local/go"
  }
  env = { PATH = "/usr/local/go/bin:/bin", HOME = "/tmp", GOCACHE = "/tmp/go-cache" }
}

step "download" {
  image         = seed.go
  network       = "egress"
  egress        = [var.host]
  output_digest = var.digest
  env           = { GOPROXY = var.goproxy, GOSUMDB = "off", GOFLAGS = "-modcacherw", GOMODCACHE = "/tmp/mod", GOTOOLCHAIN = "local" }
  run = ["sh", "-c", "go mod download -x github.com/mattn/go-isatty@v0.0.20 && mkdir -p /out/mod && cp /tmp/mod/cache/download/github.com/mattn/go-isatty/@v/v0.0.20.zip /tmp/mod/cache/download/github.com/mattn/go-isatty/@v/v0.0.20.mod /out/mod/"]
  outputs = ["/out/mod"]
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := []string{"-grants", writeGrants(t, hp.String()), "-var", "goroot=" + strings.TrimSpace(string(goroot)),
		"-var", "goproxy=" + proxy, "-var", "host=" + hp.String()}
	r := apply(t, dir, nil, vars...)
	m := gotDigest.FindStringSubmatch(r.stderr)
	if r.code != 1 || m == nil {
		t.Fatalf("first apply: exit %d\n%s", r.code, r.stderr)
	}
	r = apply(t, dir, nil, append(vars, "-var", "digest="+m[1])...)
	if r.code != 0 || !sameSet(r.executed, "step.download") {
		t.Fatalf("pinned apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	sts := egressProvenance(t, dir)
	if len(sts) != 1 {
		t.Fatalf("%d egress provenance statements, want 1", len(sts))
	}
	var relayed int
	for _, b := range sts[0].Predicate.RunDetails.Byproducts {
		c := b.Annotations.Egress
		if strings.HasPrefix(b.Name, "egress/") && (c.Outcome == "relayed" || c.Outcome == "ended") && c.Host == hp.Host && c.Received > 0 {
			relayed++
		}
	}
	if relayed == 0 {
		t.Fatalf("no connection to %s recorded: %+v", hp, sts[0].Predicate.RunDetails.Byproducts)
	}
}

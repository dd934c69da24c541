// Command registry measures Foundry's registry path against crane on the same bytes: publish
// and verified pull of a 100 MiB capability, versus crane push and crane pull of the
// identical manifest and layer, against the same local registry in the same run. It prints
// one line with the ratio crane/foundry (goal ≥ 0.8: Foundry at most 25% slower than a plain
// OCI copy, although it also builds the layer from the content store, verifies signatures
// and the tree, and extracts the files), and what attaching the attestation adds.
//
// Run: go run ./bench/registry [-mib 100] [-runs 3]. It needs crane (scripts/crane.sh) and
// uses Debian's docker-registry when installed, else Foundry's own served layout
// (-registry serve forces the latter).
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
	"github.com/foundry-build/foundry/store"
)

func main() {
	mib := flag.Int("mib", 100, "capability size in MiB")
	runs := flag.Int("runs", 5, "measured runs (the median is reported)")
	server := flag.String("registry", "auto", "registry to measure against: docker-registry, serve (foundry registry serve), or auto (docker-registry if installed)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench/registry: ")
	ctx := context.Background()

	crane := lookPath("crane", "run scripts/crane.sh")
	work, err := os.MkdirTemp("", "foundry-bench-registry-")
	check(err)
	defer os.RemoveAll(work)

	host, kind, stop := startRegistry(work, *server)
	defer stop()

	// The capability: files of random bytes (incompressible, like binaries) in a content store.
	files := filepath.Join(work, "files")
	check(os.MkdirAll(filepath.Join(files, "bin"), 0o755))
	const parts = 4
	for i := 0; i < parts; i++ {
		f, err := os.Create(filepath.Join(files, "bin", fmt.Sprintf("part%d", i)))
		check(err)
		_, err = io.CopyN(f, rand.Reader, int64(*mib)<<20/parts)
		check(err)
		check(f.Close())
	}
	src, err := store.Open(filepath.Join(work, "blobs"))
	check(err)
	tree, _, err := src.PutDir(files)
	check(err)
	keys, signer := keyPair(work)

	var fPub, fAtt, fPull, cPush, cPull []time.Duration
	var ratios, withAttach []float64
	foundry := func(i int) {
		// A new repository each run, so nothing is skipped as already present.
		s, err := registry.Open(fmt.Sprintf("%s/bench/foundry%d", host, i))
		check(err)
		t0 := time.Now()
		md, err := registry.Publish(ctx, s, src, registry.Capability{Contract: []byte(`{"name":"bench"}`), Tree: tree,
			Name: "bench", Version: "1", Target: "linux/amd64", Tag: "stable"})
		check(err)
		fPub = append(fPub, time.Since(t0))
		t0 = time.Now()
		_, err = registry.Attach(ctx, s, md, syntheticProvenance(signer, md), "")
		check(err)
		fAtt = append(fAtt, time.Since(t0))
		t0 = time.Now()
		_, err = registry.Pull(ctx, s, "stable", filepath.Join(work, fmt.Sprintf("pulled%d", i)), registry.PullOptions{Keys: keys})
		check(err)
		fPull = append(fPull, time.Since(t0))
		os.RemoveAll(filepath.Join(work, fmt.Sprintf("pulled%d", i)))
	}
	// crane moves the same manifest and layer: copied into a plain OCI layout (not timed),
	// pushed, pulled back by digest.
	craneRun := func(i int, md digest.Digest, from registry.Store) {
		lay := filepath.Join(work, fmt.Sprintf("layout%d", i))
		l, err := registry.OpenLayout(lay)
		check(err)
		copyManifest(ctx, from, l, md)
		ref := fmt.Sprintf("%s/bench/crane%d", host, i)
		t0 := time.Now()
		runTool(crane, "push", "--insecure", lay, ref+":stable")
		cPush = append(cPush, time.Since(t0))
		t0 = time.Now()
		runTool(crane, "pull", "--insecure", "--format=oci", ref+"@"+string(md), filepath.Join(work, fmt.Sprintf("cranepull%d", i)))
		cPull = append(cPull, time.Since(t0))
		os.RemoveAll(filepath.Join(work, fmt.Sprintf("cranepull%d", i)))
		os.RemoveAll(lay)
	}
	// The manifest crane pushes is the one Foundry publishes (same bytes, same digest).
	ref0, err := registry.Open(host + "/bench/reference")
	check(err)
	md0, err := registry.Publish(ctx, ref0, src, registry.Capability{Contract: []byte(`{"name":"bench"}`), Tree: tree,
		Name: "bench", Version: "1", Target: "linux/amd64"})
	check(err)
	// The machine is shared: alternate which tool goes first and compare each run's pair,
	// so that load that comes and goes hits both alike; the median ratio is reported.
	for i := 0; i < *runs; i++ {
		if i%2 == 0 {
			foundry(i)
			craneRun(i, md0, ref0)
		} else {
			craneRun(i, md0, ref0)
			foundry(i)
		}
		// The ratio compares moving the same bytes (publish vs push, pull vs pull); attaching
		// the attestation, which crane does not do, is reported beside it.
		ratios = append(ratios, (cPush[i]+cPull[i]).Seconds()/(fPub[i]+fPull[i]).Seconds())
		withAttach = append(withAttach, (cPush[i]+cPull[i]).Seconds()/(fPub[i]+fAtt[i]+fPull[i]).Seconds())
	}
	sort.Float64s(ratios)
	sort.Float64s(withAttach)
	ratio := ratios[len(ratios)/2]
	f := median(fPub) + median(fPull)
	c := median(cPush) + median(cPull)
	verdict := "meets"
	if ratio < 0.8 {
		verdict = "MISSES"
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("registry bench (%d MiB capability, %s, %d runs, load %s): foundry publish %.2fs + verified pull %.2fs = %.2fs; crane push %.2fs + pull %.2fs = %.2fs (medians); ratio crane/foundry %.2f (per run: %s; %s the goal >= 0.8); attaching the attestation adds %.2fs (ratio with it %.2f)\n",
		*mib, kind, *runs, strings.Join(strings.Fields(string(load))[:3], " "), median(fPub).Seconds(), median(fPull).Seconds(), f.Seconds(),
		median(cPush).Seconds(), median(cPull).Seconds(), c.Seconds(), ratio, fmtRatios(ratios), verdict,
		median(fAtt).Seconds(), withAttach[len(withAttach)/2])
}

func fmtRatios(rs []float64) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%.2f", r))
	}
	return strings.Join(parts, " ")
}

// startRegistry starts Debian's docker-registry on a free loopback port, or Foundry's
// served layout when it is not installed, and returns host:port and a stop function.
func startRegistry(work, which string) (string, string, func()) {
	port := freePort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	bin, err := exec.LookPath("docker-registry")
	if which == "docker-registry" && err != nil {
		log.Fatalf("docker-registry not found: apt-get install docker-registry")
	}
	if which != "serve" && err == nil {
		cfg := filepath.Join(work, "registry.yml")
		check(os.WriteFile(cfg, []byte(fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n",
			filepath.Join(work, "registry-data"), addr)), 0o644))
		cmd := exec.Command(bin, "serve", cfg)
		check(cmd.Start())
		waitHTTP(addr)
		return addr, "Debian docker-registry", func() { cmd.Process.Kill(); cmd.Wait() }
	}
	// foundry registry serve serves one repository per layout; the bench wants a fresh
	// repository per run, so it routes each repository name to its own served layout.
	var mu sync.Mutex
	handlers := map[string]http.Handler{}
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, "/v2/")
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) < 3 {
			w.WriteHeader(http.StatusOK) // the /v2/ ping
			return
		}
		name := parts[0] + "/" + parts[1]
		mu.Lock()
		h := handlers[name]
		if h == nil {
			l, err := registry.OpenLayout(filepath.Join(work, "served", strings.ReplaceAll(name, "/", "_")))
			check(err)
			h, err = registry.Handler(l, name, nil)
			check(err)
			handlers[name] = h
		}
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", addr)
	check(err)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	return addr, "foundry registry serve", func() { srv.Close() }
}

func copyManifest(ctx context.Context, from registry.Store, to *registry.Layout, md digest.Digest) {
	raw, mt, err := from.Manifest(ctx, md)
	check(err)
	m, err := registry.ParseManifest(raw)
	check(err)
	for _, d := range append([]registry.Descriptor{m.Config}, m.Layers...) {
		check(to.PutBlob(ctx, d.Digest, d.Size, func() (io.ReadCloser, error) { return from.Blob(ctx, d.Digest) }))
	}
	_, err = to.PutManifest(ctx, raw, mt)
	check(err)
}

// keyPair makes a throwaway signing key for the run.
func keyPair(work string) ([]*provenance.Verifier, *provenance.Signer) {
	priv, pub, err := provenance.GenerateKey(provenance.KeyECDSAP256)
	check(err)
	check(os.WriteFile(filepath.Join(work, "k.key"), priv, 0o600))
	check(os.WriteFile(filepath.Join(work, "k.pub"), pub, 0o644))
	s, err := provenance.LoadSigner(filepath.Join(work, "k.key"))
	check(err)
	v, err := provenance.LoadVerifiers(filepath.Join(work, "k.pub"))
	check(err)
	return v, s
}

// syntheticProvenance signs provenance naming md, so that the measured pull does the full
// verification. It is a benchmark fixture (like the tests'), describing no real execution.
func syntheticProvenance(s *provenance.Signer, md digest.Digest) []byte {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := string(digest.FromBytes([]byte("bench")))
	st, err := provenance.NewProvenance(&provenance.Execution{InvocationID: "bench", Executor: "runc",
		Isolation: provenance.IsolationContainer, Step: json.RawMessage(`{"bench":true}`), ActionDigest: h,
		Platform: "linux/amd64", Network: provenance.Network{Mode: "none"}, Image: provenance.Dependency{Name: "image", Digest: h},
		Outputs: []provenance.Artifact{{Name: "capability", Digest: string(md)}}, StartedOn: t, FinishedOn: t})
	check(err)
	env, err := provenance.Sign(s, st)
	check(err)
	return env
}

func lookPath(name, hint string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	home, _ := os.UserHomeDir()
	if p := filepath.Join(home, "go", "bin", name); fileExists(p) {
		return p
	}
	log.Fatalf("%s not found: %s", name, hint)
	return ""
}

func runTool(name string, args ...string) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		log.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func waitHTTP(addr string) {
	for i := 0; i < 400; i++ {
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	log.Fatalf("registry on %s did not start", addr)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

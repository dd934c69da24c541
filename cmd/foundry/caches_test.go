package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// goCacheProject builds a small Go program (a local package and fmt) with the host's Go
// toolchain as a seed and GOCACHE on a cache volume. The build writes how many packages it
// compiled (the compile commands go build -x printed) to /out/compiles. Step "other" mounts
// the same cache name in another image, and counts what it finds there.
const goCacheProject = `
project "gocache" {}

variable "goroot" { type = string }
variable "cache"  { default = "go-build" }

seed "go" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "grep", "cat", "ls", "wc"] : "/bin/${a}" => "busybox" }
  }
  layer {
    dir = host_dir(var.goroot)
    at  = "/usr/local/go"
  }
  env = { PATH = "/usr/local/go/bin:/bin", HOME = "/tmp", GOTOOLCHAIN = "local", GOFLAGS = "-trimpath", CGO_ENABLED = "0" }
}

seed "other" {
  layer { from = seed.go }
  layer { files = { "/etc/other" = "another image" } }
}

step "build" {
  image   = seed.go
  mounts  = { "/src" = dir("src") }
  caches  = { "/cache/go-build" = var.cache }
  env     = { GOCACHE = "/cache/go-build" }
  workdir = "/src"
  run     = ["sh", "-c", "go build -x -o /out/app . 2>/tmp/log; st=$?; grep -c '/compile ' /tmp/log > /out/compiles; [ $st = 0 ] || cat /tmp/log >&2; exit $st"]
  outputs = ["/out/app", "/out/compiles"]
}

step "other" {
  image   = seed.other
  caches  = { "/cache/go-build" = "go-build" }
  run     = ["sh", "-c", "ls -A /cache/go-build | wc -l > /out/entries"]
  outputs = ["/out/entries"]
}
`

const goCacheMain = `package main

import (
	"fmt"

	"example.com/app/greet"
)

func main() { fmt.Println(greet.Hello("cache")) }
`

// TestCacheVolumeSpeedsUpAGoBuild: with GOCACHE on a cache volume, the second build after a
// one-line change compiles one package where the cold build compiled the standard library
// too (counted from go build -x, not timed); the step's provenance records the cache as a
// non-hermetic input; the cache is not part of the step's cache key; the same cache name in
// another image is another, empty volume; `foundry cache ls|prune` show and delete them.
func TestCacheVolumeSpeedsUpAGoBuild(t *testing.T) {
	needSandbox(t)
	needContainerd(t)
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.hcl", goCacheProject)
	write("src/go.mod", "module example.com/app\n\ngo 1.22\n")
	write("src/main.go", goCacheMain)
	write("src/greet/greet.go", "package greet\n\nfunc Hello(s string) string { return \"hello, \" + s }\n")
	args := []string{"-executor", "containerd", "-containerd-address", containerdAddress(), "-var", "goroot=" + strings.TrimSpace(string(goroot))}
	compiles := func() int {
		t.Helper()
		code, out, errs := foundry(t, dir, "output", "step.build", "/out/compiles")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if code != 0 || err != nil {
			t.Fatalf("foundry output: exit %d: %q %s", code, out, errs)
		}
		return n
	}

	r := apply(t, dir, nil, args...)
	if r.code != 0 || !sameSet(r.executed, "step.build", "step.other") {
		t.Fatalf("cold apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	cold := compiles()
	// fmt alone needs runtime, internal/*, sync, io, os, reflect, strconv, unicode…
	if cold < 15 {
		t.Fatalf("the cold build compiled %d packages; want the standard library's too", cold)
	}

	// One line of main.go changes: only package main is compiled again.
	write("src/main.go", strings.Replace(goCacheMain, `"cache"`, `"warm cache"`, 1))
	r = apply(t, dir, nil, args...)
	if r.code != 0 || !sameSet(r.executed, "step.build") {
		t.Fatalf("warm apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	warm := compiles()
	if warm != 1 {
		t.Fatalf("after a one-line change the build compiled %d packages (cold: %d); want 1, package main", warm, cold)
	}
	t.Logf("compiled packages: cold %d, after a one-line change %d", cold, warm)

	// The cache is not in the step's cache key: another cache name leaves it cached.
	r = apply(t, dir, nil, append(args, "-var", "cache=another")...)
	if r.code != 0 || len(r.executed) != 0 || !sameSet(r.cached, "step.build", "step.other") {
		t.Fatalf("renamed cache: exit %d, executed %v, cached %v\n%s", r.code, r.executed, r.cached, r.stderr)
	}

	// The same name in another image is another volume: "other" found it empty.
	code, out, _ := foundry(t, dir, "output", "step.other", "/out/entries")
	if code != 0 || strings.TrimSpace(out) != "0" {
		t.Fatalf("step.other found %q entries in its go-build cache; want a volume of its own, empty", out)
	}
	code, out, errs := foundry(t, dir, "cache", "ls", "-json")
	var vols []struct {
		Name, Domain, Image string
		Size                int64
	}
	if code != 0 || json.Unmarshal([]byte(out), &vols) != nil {
		t.Fatalf("cache ls: exit %d: %s %s", code, out, errs)
	}
	images := map[string]bool{}
	for _, v := range vols {
		if v.Name != "go-build" || v.Domain != "project" {
			t.Fatalf("unexpected volume %+v", v)
		}
		images[v.Image] = true
	}
	if len(vols) != 2 || len(images) != 2 {
		t.Fatalf("want two go-build volumes, one per image: %+v", vols)
	}

	// Provenance of the build says it mounted the cache, and that it is not hermetic.
	found := false
	for _, st := range statements(t, dir) {
		var p struct {
			Predicate struct {
				BuildDefinition struct {
					InternalParameters struct {
						Caches []struct {
							Path, Name, Sharing, Volume string
							Hermetic                    *bool
						} `json:"caches"`
					} `json:"internalParameters"`
				} `json:"buildDefinition"`
			} `json:"predicate"`
		}
		json.Unmarshal(st, &p)
		for _, c := range p.Predicate.BuildDefinition.InternalParameters.Caches {
			if c.Path == "/cache/go-build" && c.Name == "go-build" && c.Sharing == "shared" && len(c.Volume) == 64 && c.Hermetic != nil && !*c.Hermetic {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("no provenance records the go-build cache as a non-hermetic input")
	}

	code, out, errs = foundry(t, dir, "cache", "prune", "-all", "-json")
	var pr struct {
		Removed []struct{ Name string }
		Freed   int64
	}
	if code != 0 || json.Unmarshal([]byte(out), &pr) != nil || len(pr.Removed) != 2 || pr.Freed == 0 {
		t.Fatalf("cache prune: exit %d: %s %s", code, out, errs)
	}
	if code, out, _ = foundry(t, dir, "cache", "ls", "-json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("after prune -all: exit %d: %s", code, out)
	}
}

// statements returns the in-toto statements of every attestation of the project in dir.
func statements(t *testing.T, dir string) [][]byte {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, ".foundry", "attestations"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, ".foundry", "attestations", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Payload string }
		if json.Unmarshal(b, &env) != nil {
			continue
		}
		if p, err := base64.StdEncoding.DecodeString(env.Payload); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// lockedProject runs two steps at once that use one locked cache: each records when it
// held it, by the host's uptime, which both sandboxes read.
const lockedProject = `
project "locked" {}

seed "busybox" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "cat", "sleep", "echo"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}

step "a" {
  image   = seed.busybox
  caches  = { "/c" = { name = "lk", sharing = "locked" } }
  run     = ["sh", "-c", "read s _ < /proc/uptime; sleep 1.5; read e _ < /proc/uptime; echo \"$s $e\" > /out/t; echo a >> /c/users"]
  outputs = ["/out/t"]
}

step "b" {
  image   = seed.busybox
  caches  = { "/c" = { name = "lk", sharing = "locked" } }
  run     = ["sh", "-c", "read s _ < /proc/uptime; sleep 1.5; read e _ < /proc/uptime; echo \"$s $e\" > /out/t; echo b >> /c/users"]
  outputs = ["/out/t"]
}
`

// TestLockedCacheOneStepAtATime: two steps of one apply using one locked cache do not
// overlap; one waits (cache_waiting), and both wrote to the same volume.
func TestLockedCacheOneStepAtATime(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(lockedProject), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apply(t, dir, nil, "-parallelism", "2")
	if r.code != 0 || !sameSet(r.executed, "step.a", "step.b") {
		t.Fatalf("apply: exit %d, executed %v\n%s", r.code, r.executed, r.stderr)
	}
	if !strings.Contains(r.stderr, `"cache_waiting"`) {
		t.Fatalf("no step waited for the locked cache:\n%s", r.stderr)
	}
	span := func(step string) (float64, float64) {
		_, out, _ := foundry(t, dir, "output", step, "/out/t")
		var s, e float64
		f := strings.Fields(out)
		if len(f) != 2 {
			t.Fatalf("%s wrote %q", step, out)
		}
		s, _ = strconv.ParseFloat(f[0], 64)
		e, _ = strconv.ParseFloat(f[1], 64)
		return s, e
	}
	as, ae := span("step.a")
	bs, be := span("step.b")
	if as < be && bs < ae {
		t.Fatalf("the steps held the locked cache at once: a %.2f-%.2f, b %.2f-%.2f", as, ae, bs, be)
	}
	users := volumeFile(t, dir, "users")
	if got := strings.Fields(users); len(got) != 2 {
		t.Fatalf("the volume's users file holds %q; want both steps' lines", users)
	}
}

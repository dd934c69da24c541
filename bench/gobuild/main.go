// Command gobuild benchmarks a real Go program, crane from go-containerregistry (its module
// source from the Go module proxy, vendored: ~1,400 Go files), built with the host's Go
// toolchain and GOCACHE on a cache volume, as a user runs it (whole process, real sandboxes):
//
//   - cold: the cache volume is empty and the step's input is new, so the standard library and
//     every dependency are compiled;
//   - no-op: nothing changed, nothing runs;
//   - one-line change: one line of cmd/crane/main.go changes, so package main is compiled
//     again and crane linked, the rest coming from the cache volume;
//
// in Foundry, with each of -executors and `caches = { "/cache/go-build" = "go-build" }`, and,
// given -buildkit, in BuildKit with `RUN --mount=type=cache` for GOCACHE, interleaved round by
// round in the same run. Goals (issue 32): one-line change ≤ 1.0x BuildKit's time, cold ≤ 1.0x,
// no-op ≤ 0.5x, with every executor. It prints each contender's median time, the ratios, and CPU
// seconds: the go build's own (read in the sandbox from the shell's reaped-children times) and
// the engine's (the whole process tree of `foundry apply`, or buildctl and buildkitd, less the go
// build). The containerd executor's containers run under containerd's shims, which the bench
// cannot see (the shared containerd serves others too): its engine CPU is foundry apply's alone.
//
// Run with `make bench` (it builds bin/foundry, and BuildKit with scripts/buildkit.sh, first).
// Numbers are medians over -rounds; nothing here asserts a time.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/foundry-build/foundry/bench/benchutil"
)

var (
	bin         = flag.String("foundry", "bin/foundry", "the foundry binary to measure")
	executors   = flag.String("executors", "containerd,runc", "Foundry executors to measure")
	buildkitDir = flag.String("buildkit", "", "`DIR` holding buildkitd and buildctl (scripts/buildkit.sh prints it): crane is also built in BuildKit, for the ratios")
	rounds      = flag.Int("rounds", 3, "rounds: each builds crane cold, no-op twice and after a one-line change, per contender")
)

// module is the Go program built: crane, pinned as scripts/crane.sh pins it.
const (
	module  = "github.com/google/go-containerregistry"
	version = "v0.22.1"
	mainGo  = "cmd/crane/main.go"
	// editLine is the line of mainGo that a one-line change (and a cold round's new input)
	// replaces with editTo(nonce): a real change of code, so package main is compiled again
	// and crane linked again (a comment alone may leave the object, and so the link, cached).
	editLine = "\tlogs.Warn.SetOutput(os.Stderr)\n"
)

func editTo(nonce string) string {
	return fmt.Sprintf("\tlogs.Warn.SetOutput(os.Stderr); logs.Warn.SetPrefix(%q)\n", nonce+" ")
}

// buildScript builds crane with GOCACHE on the cache volume and reports, on a line "gocpu U S",
// the user and system clock ticks of the go build and the compilers and linker it ran (the
// shell's cutime and cstime, fields 16 and 17 of /proc/$$/stat), in /out/cpu and on stderr.
const buildScript = `cd /src && go build -o /out/crane ./cmd/crane && echo "gocpu $(cut -d' ' -f16,17 /proc/$$/stat)" | tee /out/cpu >&2`

const foundryHCL = `project "gobuild" {}

variable "goroot" { type = string }

seed "go" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "cut", "tee", "echo"] : "/bin/${a}" => "busybox" }
  }
  layer {
    dir = host_dir(var.goroot)
    at  = "/usr/local/go"
  }
  env = { PATH = "/usr/local/go/bin:/bin", HOME = "/tmp", GOTOOLCHAIN = "local", GOFLAGS = "-trimpath -mod=vendor", CGO_ENABLED = "0" }
}

step "build" {
  image   = seed.go
  mounts  = { "/src" = dir("src") }
  caches  = { "/cache/go-build" = "go-build" }
  env     = { GOCACHE = "/cache/go-build" }
  run     = ["sh", "-c", %q]
  outputs = ["/out/crane", "/out/cpu"]
}
`

// dockerfile is the same build for BuildKit: the toolchain bind-mounted from the named
// context goroot (the host's GOROOT, as Foundry's seed layer holds it), the source from the
// build context, GOCACHE on a cache mount whose id a cold round makes new (an empty cache).
const dockerfile = `FROM bb
ENV PATH=/usr/local/go/bin:/bin HOME=/tmp GOTOOLCHAIN=local GOFLAGS="-trimpath -mod=vendor" CGO_ENABLED=0 GOCACHE=/cache/go-build
RUN --mount=type=bind,from=goroot,target=/usr/local/go --mount=type=bind,target=/src --mount=type=cache,id=%s,target=/cache/go-build sh -c %s
`

var (
	gocpu       = regexp.MustCompile(`gocpu (\d+) (\d+)`)
	executedOne = regexp.MustCompile(`\b1 executed,`) // apply's summary line
)

// measure is one build: its wall time, the go build's CPU time (0 when nothing ran) and the
// engine's (the rest of the CPU the bench can see).
type measure struct{ wall, build, engine time.Duration }

// contender is one way of building crane.
type contender struct {
	name string
	// edit writes nonce into mainGo's edited line; cold also empties the cache volume.
	edit  func(nonce string, cold bool)
	build func() measure
	runs  map[string][]measure // by phase: cold, no-op, one-line
}

func main() {
	flag.Parse()
	// An interrupted bench still stops its buildkitd and removes its projects and volumes.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		exit(1)
	}()
	abs, err := filepath.Abs(*bin)
	must(err)
	*bin = abs
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	must(err)

	src := vendoredCrane()
	atExit(func() { os.RemoveAll(src) })

	var cs []*contender
	for _, e := range strings.Split(*executors, ",") {
		cs = append(cs, foundryContender(e, src, strings.TrimSpace(string(goroot))))
	}
	if *buildkitDir != "" {
		c, stop := buildkitContender(src, strings.TrimSpace(string(goroot)))
		atExit(stop)
		cs = append(cs, c)
	}

	// Warm-up, not measured: imports the seed or transfers the toolchain and fills the cache.
	for _, c := range cs {
		c.edit("warm-up", true)
		c.build()
	}
	phases := []string{"cold", "no-op", "one-line"}
	for r := range *rounds {
		for i := range cs {
			c := cs[(i+r)%len(cs)] // who goes first rotates from round to round
			record := func(phase string) {
				m := c.build()
				c.runs[phase] = append(c.runs[phase], m)
				// Each build as it ends, on stderr: a long run that is cut short still says something.
				fmt.Fprintf(os.Stderr, "round %d: %s %s %.2f s (go build CPU %.1f s, engine %.1f s)\n",
					r+1, c.label(), phase, m.wall.Seconds(), m.build.Seconds(), m.engine.Seconds())
			}
			c.edit(fmt.Sprintf("cold-%d", r), true)
			record("cold")
			for range 2 {
				record("no-op")
			}
			c.edit(fmt.Sprintf("edit-%d", r), false)
			record("one-line")
		}
	}

	goals := map[string]float64{"cold": 1.0, "no-op": 0.5, "one-line": 1.0}
	for _, p := range phases {
		fmt.Printf("crane %s build (median of %d):\n", p, len(cs[0].runs[p]))
		bk := cs[len(cs)-1]
		for _, c := range cs {
			m := medianOf(c.runs[p])
			line := fmt.Sprintf("  %-20s %7.2f s   CPU: go build %6.1f s, engine %5.1f s", c.label(), m.wall.Seconds(), m.build.Seconds(), m.engine.Seconds())
			if bk.name == "buildkit" && c != bk {
				r := m.wall.Seconds() / medianOf(bk.runs[p]).wall.Seconds()
				line += fmt.Sprintf("   %.2fx BuildKit (goal <= %.1fx: %s)", r, goals[p], met(r <= goals[p]))
			}
			fmt.Println(line)
		}
	}
	exit(0)
}

// cleanups run at exit, also when a build fails: a started buildkitd must not outlive the
// bench, nor its projects and their cache volumes stay on disk.
var cleanups []func()

func atExit(f func()) { cleanups = append(cleanups, f) }

var exitOnce sync.Mutex

// exit runs the cleanups, once (a signal may arrive while main exits), and exits.
func exit(code int) {
	exitOnce.Lock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	os.Exit(code)
}

func (c *contender) label() string {
	if c.name == "buildkit" {
		return "buildkit"
	}
	return "foundry/" + filepath.Base(c.name)
}

// vendoredCrane copies go-containerregistry's module source out of the module cache into a
// writable directory and vendors its dependencies, so no build needs the network or a module
// cache. It returns the directory.
func vendoredCrane() string {
	out, err := exec.Command("go", "mod", "download", "-json", module+"@"+version).Output()
	must(err)
	var m struct{ Dir string }
	must(json.Unmarshal(out, &m))
	dir, err := os.MkdirTemp("", "foundry-gobuildbench-src-")
	must(err)
	must(copyTree(m.Dir, dir))
	vendor := exec.Command("go", "mod", "vendor")
	vendor.Dir = dir
	vendor.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := vendor.CombinedOutput(); err != nil {
		fail("go mod vendor of %s@%s: %v\n%s", module, version, err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, mainGo))
	must(err)
	if strings.Count(string(b), editLine) != 1 {
		fail("%s@%s: %s has no line %q to change", module, version, mainGo, editLine)
	}
	return dir
}

// copyTree copies the regular files and directories under src to dst, writable.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}

// setEdit rewrites mainGo under root with its edited line for nonce, as an editor saves it.
func setEdit(root, nonce string) {
	p := filepath.Join(root, mainGo)
	b, err := os.ReadFile(p)
	must(err)
	lines := strings.SplitAfter(string(b), "\n")
	for i, l := range lines {
		if l == editLine || strings.HasPrefix(l, "\tlogs.Warn.SetOutput(os.Stderr); logs.Warn.SetPrefix(") {
			lines[i] = editTo(nonce)
		}
	}
	must(os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644))
}

// foundryContender is crane in a Foundry project of its own (its own state, cache and cache
// volumes) applied with executor. Its name is the project's directory/executor.
func foundryContender(executor, src, goroot string) *contender {
	dir, err := os.MkdirTemp("", "foundry-gobuildbench-")
	must(err)
	atExit(func() { os.RemoveAll(dir) })
	must(copyTree(src, filepath.Join(dir, "src")))
	must(os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(fmt.Sprintf(foundryHCL, buildScript)), 0o644))
	foundry := func(args ...string) (string, *os.ProcessState) {
		cmd := exec.Command(*bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			fail("foundry %s in %s: %v\n%s", strings.Join(args, " "), dir, err, benchutil.Tail(string(out)))
		}
		return string(out), cmd.ProcessState
	}
	// The cache volumes may live outside the project directory: prune them first.
	atExit(func() {
		prune := exec.Command(*bin, "cache", "prune", "-all")
		prune.Dir = dir
		prune.Run()
	})
	return &contender{
		name: filepath.Join(dir, executor),
		runs: map[string][]measure{},
		edit: func(nonce string, cold bool) {
			if cold {
				foundry("cache", "prune", "-all")
			}
			setEdit(filepath.Join(dir, "src"), nonce)
		},
		build: func() measure {
			start := time.Now()
			out, ps := foundry("apply", "-auto-approve", "-progress", "plain", "-executor", executor, "-var", "goroot="+goroot)
			m := measure{wall: time.Since(start)}
			total := benchutil.ProcessCPU(ps)
			if executedOne.MatchString(out) { // else nothing ran: no go build to count
				cpu, _ := foundry("output", "step.build", "/out/cpu")
				m.build = ticks(cpu)
			}
			// With runc the go build is in apply's process tree; with containerd it is not.
			if executor == "runc" {
				m.engine = total - m.build
			} else {
				m.engine = total
			}
			return m
		},
	}
}

// buildkitContender is crane in BuildKit: the source as the build context, the host's GOROOT
// as the named context goroot. It returns a function that stops buildkitd.
func buildkitContender(src, goroot string) (*contender, func()) {
	bk, err := benchutil.StartBuildKit(*buildkitDir, []string{"sh", "cut", "tee", "echo"})
	must(err)
	ctx, dfdir := filepath.Join(bk.Root, "context"), filepath.Join(bk.Root, "dockerfile")
	must(copyTree(src, ctx))
	must(os.MkdirAll(dfdir, 0o755))
	cacheID := ""
	return &contender{
		name: "buildkit",
		runs: map[string][]measure{},
		edit: func(nonce string, cold bool) {
			if cold { // a new cache mount id is a new, empty cache
				cacheID = "go-build-" + nonce
				must(os.WriteFile(filepath.Join(dfdir, "Dockerfile"), []byte(fmt.Sprintf(dockerfile, cacheID, shellQuote(buildScript))), 0o644))
			}
			setEdit(ctx, nonce)
		},
		build: func() measure {
			before, err := bk.DaemonCPU()
			must(err)
			wall, out, client, err := bk.Build("--local", "context="+ctx, "--local", "dockerfile="+dfdir,
				"--local", "goroot="+goroot, "--opt", "context:goroot=local:goroot")
			if err != nil {
				fail("%v", err)
			}
			after, err := bk.DaemonCPU()
			must(err)
			m := measure{wall: wall, build: ticks(out)}
			m.engine = client + after - before - m.build
			return m
		},
	}, bk.Stop
}

// ticks is the CPU time of a "gocpu U S" line in out (clock ticks), 0 if there is none.
func ticks(out string) time.Duration {
	sm := gocpu.FindStringSubmatch(out)
	if sm == nil {
		return 0
	}
	u, _ := strconv.ParseInt(sm[1], 10, 64)
	s, _ := strconv.ParseInt(sm[2], 10, 64)
	return time.Duration(u+s) * time.Second / benchutil.ClockTicks
}

// shellQuote quotes s as one JSON string, which a Dockerfile's shell form passes to /bin/sh -c
// as a single-quoted word would be: here, the script in single quotes with its own quotes
// escaped.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// medianOf is the measure of median wall time.
func medianOf(ms []measure) measure {
	s := append([]measure{}, ms...)
	sort.Slice(s, func(i, j int) bool { return s[i].wall < s[j].wall })
	return s[len(s)/2]
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func must(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gobuild bench: "+format+"\n", args...)
	exit(1)
}

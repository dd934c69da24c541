package executortest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foundry-build/foundry/executors"
)

// Config describes the executor under test.
type Config struct {
	// New returns the executor; the suite closes it.
	New func(t *testing.T) executors.Executor
	// Image is the busybox image in the form the executor needs.
	Image func(t *testing.T) executors.Image
	// Sandboxed is false for the local executor: the isolation tests (network, confinement,
	// user, limits) do not apply, only exit status, output, argv/env/workdir and deadline do.
	Sandboxed bool
	// Leftovers lists what the executor left behind for IDs with prefix (containers,
	// snapshots, leases, bundles) beyond the processes and mounts the suite checks itself.
	Leftovers func(t *testing.T, prefix string) []string
}

// Run runs the conformance suite.
func Run(t *testing.T, c Config) {
	s := &suite{c: c, prefix: "t" + randHex(4) + "-"}
	t.Run("ExitCode", s.exitCode)
	t.Run("Output", s.output)
	t.Run("Stdin", s.stdin)
	t.Run("ArgvEnvWorkdir", s.argvEnvWorkdir)
	t.Run("Deadline", s.deadline)
	t.Run("Cancel", s.cancel)
	t.Run("BadArgv", s.badArgv)
	t.Run("Service", s.service)
	t.Run("ServiceExits", s.serviceExits)
	t.Run("Usage", s.usage)
	t.Run("Egress", s.egress)
	if c.Sandboxed {
		t.Run("Identity", s.identity)
		t.Run("ReadOnlyMounts", s.readOnlyMounts)
		t.Run("WritableMount", s.writableMount)
		t.Run("WriteConfinement", s.writeConfinement)
		t.Run("NoNetwork", s.noNetwork)
		t.Run("HostNetwork", s.hostNetwork)
		t.Run("OOM", s.oom)
		t.Run("Pids", s.pids)
		t.Run("WritableBound", s.writableBound)
		t.Run("CleanupKillsOrphans", s.cleanupKillsOrphans)
	}
	t.Run("NoLeftovers", s.noLeftovers)
}

type suite struct {
	c      Config
	prefix string
	n      atomic.Int64
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// step is one action with captured output.
type step struct {
	a      *executors.Action
	stdout bytes.Buffer
	stderr bytes.Buffer
}

func (s *suite) newStep(t *testing.T, argv ...string) *step {
	st := &step{}
	out := t.TempDir()
	st.a = &executors.Action{
		ID:     fmt.Sprintf("%s%d", s.prefix, s.n.Add(1)),
		Image:  s.c.Image(t),
		Argv:   argv,
		OutDir: out,
		Limits: executors.Limits{Timeout: time.Minute},
		Stdout: &st.stdout,
		Stderr: &st.stderr,
	}
	return st
}

func (s *suite) exec(t *testing.T, ctx context.Context, e executors.Executor, st *step) *executors.Result {
	t.Helper()
	r, err := e.Run(ctx, st.a)
	if err != nil {
		t.Fatalf("Run(%q): %v\nstdout: %s\nstderr: %s", st.a.Argv, err, st.stdout.String(), st.stderr.String())
	}
	if r.Started.IsZero() || r.Finished.Before(r.Started) {
		t.Errorf("Run(%q): bad timings %v .. %v", st.a.Argv, r.Started, r.Finished)
	}
	return r
}

func (s *suite) run(t *testing.T, st *step) *executors.Result {
	t.Helper()
	e := s.c.New(t)
	defer e.Close()
	return s.exec(t, context.Background(), e, st)
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func (s *suite) exitCode(t *testing.T) {
	for _, code := range []int{0, 1, 3, 42} {
		st := s.newStep(t, sh(fmt.Sprintf("exit %d", code))...)
		r := s.run(t, st)
		if r.ExitCode != code || r.TimedOut || r.OOMKilled || r.Signal != "" {
			t.Errorf("exit %d: got %+v", code, r)
		}
	}
}

func (s *suite) output(t *testing.T) {
	st := s.newStep(t, sh("echo to-stdout; echo to-stderr >&2; i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done")...)
	r := s.run(t, st)
	if r.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", r.ExitCode, st.stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(st.stdout.String(), "\n"), "\n")
	if len(lines) != 2001 || lines[0] != "to-stdout" || lines[2000] != "line1999" {
		t.Errorf("stdout: %d lines, first %q last %q", len(lines), lines[0], lines[len(lines)-1])
	}
	if st.stderr.String() != "to-stderr\n" {
		t.Errorf("stderr = %q", st.stderr.String())
	}
}

// stdin: the input reaches the process, and its end is seen (the process exits).
func (s *suite) stdin(t *testing.T) {
	input := strings.Repeat("[3,1,2]\n", 5000) // more than a pipe buffer
	st := s.newStep(t, sh("n=0; while read -r line; do n=$((n+1)); done; echo $n lines")...)
	st.a.Stdin = strings.NewReader(input)
	r := s.run(t, st)
	if r.ExitCode != 0 || r.TimedOut || strings.TrimSpace(st.stdout.String()) != "5000 lines" {
		t.Errorf("stdin: exit %d, timed out %v, stdout %q, stderr %q", r.ExitCode, r.TimedOut, st.stdout.String(), st.stderr.String())
	}
	empty := s.newStep(t, sh("cat; echo done")...)
	if r := s.run(t, empty); r.ExitCode != 0 || strings.TrimSpace(empty.stdout.String()) != "done" {
		t.Errorf("no stdin: exit %d, stdout %q", r.ExitCode, empty.stdout.String())
	}
}

func (s *suite) argvEnvWorkdir(t *testing.T) {
	// printf receives the arguments verbatim: no shell re-splits them.
	st := s.newStep(t, "/bin/sh", "-c", `printf '[%s]' "$@"; echo; echo "FOO=$FOO"; pwd`, "sh", "a b", "", "c'd\"e")
	st.a.Env = []string{"PATH=/bin", "FOO=bar baz"}
	if s.c.Sandboxed {
		st.a.Workdir = "/tmp"
	} else {
		st.a.Workdir = t.TempDir()
	}
	r := s.run(t, st)
	want := fmt.Sprintf("[a b][][c'd\"e]\nFOO=bar baz\n%s\n", st.a.Workdir)
	if r.ExitCode != 0 || st.stdout.String() != want {
		t.Errorf("got exit %d stdout %q, want %q (stderr %q)", r.ExitCode, st.stdout.String(), want, st.stderr.String())
	}
	// With Env nil the image environment applies.
	st = s.newStep(t, sh("echo $HOME")...)
	s.run(t, st)
	if got := strings.TrimSpace(st.stdout.String()); got != "/tmp" {
		t.Errorf("image env: HOME=%q, want /tmp", got)
	}
}

// ProcRunning reports whether a process on the host has a command line containing s
// (arguments separated by NUL).
func ProcRunning(s string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// procGone reports whether no process on the host has exactly argv.
func procGone(argv ...string) bool {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == want {
			return false
		}
	}
	return true
}

func (s *suite) deadline(t *testing.T) {
	// In a sandbox the grandchild detaches into its own session and ignores SIGTERM and
	// SIGHUP; only a kill of every process of the step ends it. The local executor kills the
	// process group, so there the grandchild stays in it.
	marker := fmt.Sprint(900000 + time.Now().UnixNano()%99999)
	detach := "setsid "
	if !s.c.Sandboxed {
		detach = ""
	}
	st := s.newStep(t, sh("trap '' TERM HUP; "+detach+"sleep "+marker+" & echo started; sleep 3600")...)
	st.a.Limits.Timeout = 2 * time.Second
	start := time.Now()
	r := s.run(t, st)
	if !r.TimedOut {
		t.Errorf("TimedOut = false: %+v", r)
	}
	if r.ExitCode == 0 {
		t.Errorf("exit code 0 after a timeout: %+v", r)
	}
	if !strings.Contains(st.stdout.String(), "started") {
		t.Errorf("the step did not start: stdout %q stderr %q", st.stdout.String(), st.stderr.String())
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Run returned after %v", d)
	}
	if !procGone("sleep", marker) {
		t.Errorf("grandchild `sleep %s` survived the deadline", marker)
	}
}

func (s *suite) cancel(t *testing.T) {
	e := s.c.New(t)
	defer e.Close()
	st := s.newStep(t, sh("echo started; sleep 3600")...)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(time.Second)
		cancel()
	}()
	r, err := e.Run(ctx, st.a)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel: result %+v, err %v; want an error wrapping context.Canceled", r, err)
	}
}

func (s *suite) badArgv(t *testing.T) {
	e := s.c.New(t)
	defer e.Close()
	st := s.newStep(t, "/no/such/binary")
	if r, err := e.Run(context.Background(), st.a); !errors.Is(err, executors.ErrNotStarted) {
		t.Errorf("Run(/no/such/binary) = %+v, %v; want ErrNotStarted", r, err)
	}
	// A path that exists but cannot be executed: the program's fault, not the executor's.
	st = s.newStep(t, "/bin")
	if r, err := e.Run(context.Background(), st.a); !errors.Is(err, executors.ErrNotStarted) {
		t.Errorf("Run(/bin) = %+v, %v; want ErrNotStarted", r, err)
	}
	st = s.newStep(t)
	if r, err := e.Run(context.Background(), st.a); err == nil {
		t.Errorf("Run(empty argv) = %+v, nil; want an error", r)
	}
}

func (s *suite) identity(t *testing.T) {
	st := s.newStep(t, sh("id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status; hostname")...)
	r := s.run(t, st)
	want := "65534\n65534\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nfoundry\n"
	if r.ExitCode != 0 || st.stdout.String() != want {
		t.Errorf("identity: exit %d\n got %q\nwant %q\nstderr %q", r.ExitCode, st.stdout.String(), want, st.stderr.String())
	}
	// A private cgroup namespace: the step's own cgroup is its root.
	st = s.newStep(t, sh("cat /proc/self/cgroup")...)
	s.run(t, st)
	for _, line := range strings.Split(strings.TrimSpace(st.stdout.String()), "\n") {
		if !strings.HasSuffix(line, ":/") {
			t.Errorf("/proc/self/cgroup shows the host's tree: %q", line)
		}
	}
	st = s.newStep(t, sh("id -u")...)
	st.a.User = "1234:5678"
	s.run(t, st)
	if got := strings.TrimSpace(st.stdout.String()); got != "1234" {
		t.Errorf("User 1234:5678: id -u = %q", got)
	}
}

func (s *suite) readOnlyMounts(t *testing.T) {
	src := t.TempDir()
	if err := os.Chmod(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "single")
	if err := os.WriteFile(file, []byte("one file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := s.newStep(t, sh("cat /in/src/hello.txt /in/one; if touch /in/src/new 2>/dev/null; then echo WROTE; fi; if echo x >> /in/one 2>/dev/null; then echo APPENDED; fi")...)
	st.a.Mounts = []executors.Mount{{Source: file, Target: "/in/one"}, {Source: src, Target: "/in/src"}}
	st.a.User = "0:0" // even root (without capabilities) cannot write a read-only mount
	r := s.run(t, st)
	if r.ExitCode != 0 || st.stdout.String() != "hello input\none file\n" {
		t.Errorf("exit %d stdout %q stderr %q", r.ExitCode, st.stdout.String(), st.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(src, "new")); err == nil {
		t.Errorf("the step created a file in a read-only input")
	}
}

// writableMount: a Writable mount (a product acceptance's data volume) is written through
// to the host directory, and what one action writes the next one reads.
func (s *suite) writableMount(t *testing.T) {
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	for i, script := range []string{"echo kept > /data/f", "cat /data/f"} {
		st := s.newStep(t, sh(script)...)
		st.a.Mounts = []executors.Mount{{Source: vol, Target: "/data", Writable: true}}
		r := s.run(t, st)
		if r.ExitCode != 0 || (i == 1 && st.stdout.String() != "kept\n") {
			t.Errorf("%s: exit %d stdout %q stderr %q", script, r.ExitCode, st.stdout.String(), st.stderr.String())
		}
	}
	if b, err := os.ReadFile(filepath.Join(vol, "f")); err != nil || string(b) != "kept\n" {
		t.Errorf("the volume on the host: %q, %v", b, err)
	}
}

func (s *suite) writeConfinement(t *testing.T) {
	img := s.c.Image(t)
	src := t.TempDir()
	if err := os.Chmod(src, 0o777); err != nil {
		t.Fatal(err)
	}
	script := `for p in /x /bin/x /bin/busybox /etc /in/x /dev/x /sys/x /proc/x /var; do
  if (echo x > $p) 2>/dev/null || mkdir $p 2>/dev/null; then echo "WROTE $p"; fi
done
echo ok > /out/result && echo ok > /tmp/scratch && cat /tmp/scratch && mkdir -p /out/sub && echo deep > /out/sub/f`
	for _, user := range []string{"", "0:0"} {
		st := s.newStep(t, sh(script)...)
		st.a.User = user
		st.a.Mounts = []executors.Mount{{Source: src, Target: "/in"}}
		r := s.run(t, st)
		if r.ExitCode != 0 || st.stdout.String() != "ok\n" {
			t.Errorf("user %q: exit %d stdout %q stderr %q", user, r.ExitCode, st.stdout.String(), st.stderr.String())
		}
		if b, err := os.ReadFile(filepath.Join(st.a.OutDir, "sub", "f")); err != nil || string(b) != "deep\n" {
			t.Errorf("user %q: /out/sub/f on the host: %q, %v", user, b, err)
		}
	}
	if ents, _ := os.ReadDir(src); len(ents) != 0 {
		t.Errorf("the step wrote into a read-only input: %v", ents)
	}
	if img.Rootfs != "" {
		ents, err := os.ReadDir(img.Rootfs)
		if err != nil || len(ents) != 1 || ents[0].Name() != "bin" {
			t.Errorf("image rootfs changed: %v %v", ents, err)
		}
	}
}

// freePort returns a TCP port nothing listens on on the host's loopback.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// service runs an HTTP server as an action and reaches it through Attach's dialer. In a
// sandbox the server listens on the sandbox's loopback, which the host cannot reach: the
// dialer must connect from inside the sandbox's network namespace. When Attach returns the
// action is killed.
func (s *suite) service(t *testing.T) {
	port := freePort(t)
	marker := randHex(6)
	st := s.newStep(t, sh(fmt.Sprintf(`d=$(mktemp -d) && echo served-%s > "$d/index.html" && exec busybox httpd -f -p 127.0.0.1:%d -h "$d"`, marker, port))...)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var body string
	var lastErr error
	hostReached := false
	st.a.Attach = func(ctx context.Context, dial executors.Dialer) {
		client := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: 5 * time.Second}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
			resp, err := client.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					body = string(b)
					break
				}
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			lastErr = err
			time.Sleep(20 * time.Millisecond)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			hostReached = true
			c.Close()
		}
	}
	start := time.Now()
	r := s.run(t, st)
	if body != "served-"+marker+"\n" {
		t.Fatalf("GET through the dialer: body %q, last error %v; stderr %q", body, lastErr, st.stderr.String())
	}
	if s.c.Sandboxed && hostReached {
		t.Errorf("the sandboxed service was reachable on the host's loopback at %s", addr)
	}
	if !s.c.Sandboxed && !hostReached {
		t.Errorf("the unsandboxed service should listen on the host's loopback at %s", addr)
	}
	if !r.Stopped || r.ExitCode != -1 || r.Signal != "SIGKILL" || r.TimedOut {
		t.Errorf("after Attach returned: got %+v, want Stopped with SIGKILL", r)
	}
	if d := time.Since(start); d > 40*time.Second {
		t.Errorf("Run took %v after Attach returned", d)
	}
	if ProcRunning("httpd\x00-f\x00-p\x00" + addr + "\x00") {
		t.Errorf("httpd on %s still running after Run returned", addr)
	}
}

// serviceExits: a service that exits on its own cancels Attach's context, and Run reports
// its exit status. One that exits at once may end before Attach is called at all.
func (s *suite) serviceExits(t *testing.T) {
	for _, script := range []string{"sleep 1; exit 3", "exit 3"} {
		st := s.newStep(t, sh(script)...)
		called, cancelled := false, false
		st.a.Attach = func(ctx context.Context, dial executors.Dialer) {
			called = true
			select {
			case <-ctx.Done():
				cancelled = true
			case <-time.After(30 * time.Second):
			}
		}
		start := time.Now()
		r := s.run(t, st)
		if script != "exit 3" && !called {
			t.Errorf("%q: Attach was not called while the process ran", script)
		}
		if called && !cancelled {
			t.Errorf("%q: Attach's context was not cancelled when the process exited", script)
		}
		if r.Stopped || r.ExitCode != 3 {
			t.Errorf("%q: got %+v, want exit 3 and not Stopped", script, r)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%q: Run took %v", script, d)
		}
	}
}

// usage: a step that burns CPU and fills a 128 MiB buffer reports more than 100ms of CPU and at
// least 32 MiB of peak memory; a trivial one reports less of both. A sandbox's numbers include
// its runtime's init (runc's takes some 30ms of CPU and 4 MiB), hence the margins. The buffer
// is well above the test process's own peak (some 70 MiB), which the local executor cannot
// tell from its child's (executors/local: PeakMemoryBytes is then 0); with 64 MiB, CI saw 0.
func (s *suite) usage(t *testing.T) {
	const minCPU, minPeak = 100 * time.Millisecond, 32 << 20
	// dd reads /dev/zero into a 128 MiB buffer, which makes every page of it resident; the loop
	// takes some 700ms of CPU in busybox sh, and 300ms in dash (the local executor's sh).
	st := s.newStep(t, sh("dd if=/dev/zero of=/dev/null bs=128M count=1 2>/dev/null && i=0 && while [ $i -lt 300000 ]; do i=$((i+1)); done")...)
	r := s.run(t, st)
	t.Logf("busy step: %+v", r.Usage)
	if r.ExitCode != 0 || r.Usage.CPU <= minCPU || r.Usage.PeakMemoryBytes < minPeak {
		t.Errorf("busy step: exit %d, usage %+v; want CPU > %v and peak memory >= %d (stderr %q)",
			r.ExitCode, r.Usage, minCPU, minPeak, st.stderr.String())
	}
	st = s.newStep(t, "/bin/true")
	r = s.run(t, st)
	t.Logf("trivial step: %+v", r.Usage)
	if r.ExitCode != 0 || r.Usage.CPU >= minCPU || r.Usage.PeakMemoryBytes >= minPeak {
		t.Errorf("trivial step: exit %d, usage %+v; want CPU < %v and peak memory < %d", r.ExitCode, r.Usage, minCPU, minPeak)
	}
}

func (s *suite) noNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Write([]byte("reached-host\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// The step sees only lo, up; the host's listener is not on that loopback.
	st := s.newStep(t, sh(fmt.Sprintf(`ls /sys/class/net; cat /sys/class/net/lo/operstate; cat /sys/class/net/lo/flags
if echo hi | nc -w 2 127.0.0.1 %d; then echo CONNECTED; fi`, port))...)
	r := s.run(t, st)
	if accepted.Load() != 0 || strings.Contains(st.stdout.String(), "CONNECTED") || strings.Contains(st.stdout.String(), "reached-host") {
		t.Errorf("the step reached the host's loopback listener: stdout %q", st.stdout.String())
	}
	lines := strings.Fields(st.stdout.String())
	// flags 0x9 = IFF_UP|IFF_LOOPBACK (operstate of lo is "unknown" when up).
	if r.ExitCode != 0 || len(lines) < 3 || lines[0] != "lo" || lines[1] != "unknown" || lines[2] != "0x9" {
		t.Errorf("want only lo, up: exit %d stdout %q stderr %q", r.ExitCode, st.stdout.String(), st.stderr.String())
	}
}

// egress runs a step with network egress: its Egress function is called with a listener
// before the process starts, the step finds it through the proxy variables (busybox wget
// reads http_proxy) and reaches nothing else; Run waits for Egress to return after the
// process ended. In a sandbox the listener is in the step's own namespace: lo is its only
// interface, the host's loopback is out of reach, and the listener is not on the host's.
func (s *suite) egress(t *testing.T) {
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	var hostAccepted atomic.Int64
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			hostAccepted.Add(1)
			c.Close()
		}
	}()
	marker := randHex(6)
	var mu sync.Mutex
	var asked []string
	var listenAddr string
	var ended atomic.Bool
	var accepted atomic.Int64
	st := s.newStep(t, sh(fmt.Sprintf(`echo "proxy=$HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy"
ls /sys/class/net | tr '\n' ' '; echo
wget -q -O - http://egress.test/fetch-%s
if echo hi | nc -w 2 127.0.0.1 %d; then echo HOST-REACHED; fi`, marker, host.Addr().(*net.TCPAddr).Port))...)
	st.a.Network = executors.NetworkEgress
	st.a.Egress = func(ctx context.Context, l net.Listener) error {
		defer ended.Store(true)
		mu.Lock()
		listenAddr = l.Addr().String()
		mu.Unlock()
		if s.c.Sandboxed {
			// Were the listener on the host's loopback, this would be a second connection.
			if c, err := net.DialTimeout("tcp", listenAddr, time.Second); err == nil {
				c.Close()
			}
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				asked = append(asked, r.RequestURI)
				mu.Unlock()
				fmt.Fprintf(w, "egress-served %s\n", r.URL.Path)
			}),
			ConnState: func(_ net.Conn, cs http.ConnState) {
				if cs == http.StateNew {
					accepted.Add(1)
				}
			},
		}
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	r := s.run(t, st)
	if !ended.Load() {
		t.Errorf("Run returned before the Egress function did")
	}
	out := st.stdout.String()
	proxy := "http://" + listenAddr
	if !strings.Contains(out, fmt.Sprintf("proxy=%s %s %s %s", proxy, proxy, proxy, proxy)) {
		t.Errorf("the proxy variables are not %s: stdout %q", proxy, out)
	}
	if r.ExitCode != 0 || !strings.Contains(out, "egress-served /fetch-"+marker) {
		t.Errorf("the step did not reach its Egress through the proxy: exit %d stdout %q stderr %q", r.ExitCode, out, st.stderr.String())
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != "http://egress.test/fetch-"+marker {
		t.Errorf("Egress got %q, want the one proxy request", asked)
	}
	mu.Unlock()
	if !s.c.Sandboxed {
		return
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the egress listener accepted %d connections, want the step's one: the host reached it at %s", n, listenAddr)
	}
	if strings.Contains(out, "HOST-REACHED") || hostAccepted.Load() != 0 {
		t.Errorf("the egress step reached the host's loopback: stdout %q", out)
	}
	if lines := strings.Split(out, "\n"); len(lines) < 2 || lines[1] != "lo " {
		t.Errorf("want lo as the only interface: stdout %q", out)
	}
}

func (s *suite) hostNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("reached-host\n"))
			c.Close()
		}
	}()
	st := s.newStep(t, sh(fmt.Sprintf("nc -w 5 127.0.0.1 %d </dev/null", ln.Addr().(*net.TCPAddr).Port))...)
	st.a.Network = executors.NetworkHost
	r := s.run(t, st)
	if r.ExitCode != 0 || !strings.Contains(st.stdout.String(), "reached-host") {
		t.Errorf("Network=host: exit %d stdout %q stderr %q", r.ExitCode, st.stdout.String(), st.stderr.String())
	}
}

func (s *suite) oom(t *testing.T) {
	// dd allocates its 256 MiB block and fills it from /dev/zero: far above the 64 MiB limit.
	st := s.newStep(t, sh("echo before; dd if=/dev/zero of=/dev/null bs=256M count=1; echo after-$?")...)
	st.a.Limits.MemoryBytes = 64 << 20
	r := s.run(t, st)
	if !r.OOMKilled {
		t.Errorf("OOMKilled = false: %+v stdout %q stderr %q", r, st.stdout.String(), st.stderr.String())
	}
	// A step under its limit is not reported as OOM-killed.
	st = s.newStep(t, sh("dd if=/dev/zero of=/dev/null bs=1M count=1 2>/dev/null")...)
	st.a.Limits.MemoryBytes = 64 << 20
	if r := s.run(t, st); r.OOMKilled || r.ExitCode != 0 {
		t.Errorf("small step: %+v", r)
	}
}

// writableBound: /out and /tmp together are bounded while the step runs, in bytes and in
// inodes. A write past the bound fails at once (the step sees ENOSPC), Result.Full names the
// bound and where it was reached, and what was written up to it is all that reaches the
// host's OutDir. A step under the bound is not reported full and its output arrives whole,
// modes and links included.
func (s *suite) writableBound(t *testing.T) {
	const bound = 4 << 20
	for _, c := range []struct{ name, script, limit, where string }{
		{"bytes to /out", "dd if=/dev/zero of=/out/big bs=1M count=64; echo dd-exit-$?", "disk", "/out"},
		{"bytes to /tmp", "dd if=/dev/zero of=/tmp/big bs=1M count=64; echo dd-exit-$?", "disk", "/tmp"},
		{"inodes in /out", "mkdir /out/d && i=0; while [ $i -lt 500 ]; do : > /out/d/f$i || break; i=$((i+1)); done; echo made-$i", "inodes", "/out"},
	} {
		st := s.newStep(t, sh(c.script)...)
		st.a.Limits.DiskBytes, st.a.Limits.Inodes = bound, 100
		r := s.run(t, st)
		if r.Full == nil || r.Full.Limit != c.limit || r.Full.Where != c.where {
			t.Errorf("%s: Full = %+v, want %s at %s; exit %d stdout %q stderr %q", c.name, r.Full, c.limit, c.where, r.ExitCode, st.stdout.String(), st.stderr.String())
			continue
		}
		if c.limit == "disk" && (r.Full.Bound != bound || strings.Contains(st.stdout.String(), "dd-exit-0")) {
			t.Errorf("%s: Full %+v, stdout %q: the write past the bound did not fail", c.name, r.Full, st.stdout.String())
		}
		if c.limit == "inodes" && (r.Full.Bound != 100 || strings.Contains(st.stdout.String(), "made-500")) {
			t.Errorf("%s: Full %+v, stdout %q: files past the bound were made", c.name, r.Full, st.stdout.String())
		}
		var size, files int64
		filepath.WalkDir(st.a.OutDir, func(p string, d os.DirEntry, err error) error {
			if err == nil && p != st.a.OutDir {
				files++
				if fi, err := d.Info(); err == nil {
					size += fi.Size()
				}
			}
			return nil
		})
		if size > bound || files > 100 {
			t.Errorf("%s: the host's OutDir holds %d bytes in %d entries, past the bound of %d bytes, 100 inodes", c.name, size, files, bound)
		}
	}
	// Under the bound: nothing full, and /out arrives as the step left it.
	st := s.newStep(t, sh("mkdir -p /out/d/e && echo hi > /out/d/f && chmod 755 /out/d/f && ln -s f /out/d/l && mkfifo /out/d/p && echo t > /tmp/t && dd if=/dev/zero of=/out/z bs=1M count=2 2>/dev/null")...)
	st.a.Limits.DiskBytes, st.a.Limits.Inodes = bound, 100
	r := s.run(t, st)
	if r.Full != nil || r.ExitCode != 0 {
		t.Fatalf("under the bound: Full %+v exit %d stderr %q", r.Full, r.ExitCode, st.stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(st.a.OutDir, "d", "f")); err != nil || string(b) != "hi\n" {
		t.Errorf("/out/d/f: %q %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(st.a.OutDir, "d", "f")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("/out/d/f mode: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(st.a.OutDir, "d", "l")); err != nil || l != "f" {
		t.Errorf("/out/d/l: %q %v", l, err)
	}
	if fi, err := os.Lstat(filepath.Join(st.a.OutDir, "d", "p")); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("/out/d/p: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(st.a.OutDir, "z")); err != nil || fi.Size() != 2<<20 {
		t.Errorf("/out/z: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(st.a.OutDir, "d", "e")); err != nil || !fi.IsDir() {
		t.Errorf("/out/d/e: %v %v", fi, err)
	}
}

func (s *suite) pids(t *testing.T) {
	// With a limit of 8 tasks the shell cannot fork twelve sleeps: fork fails with EAGAIN,
	// and busybox sh either counts the failure or gives up. With the default limit it can.
	script := "n=0; for i in 1 2 3 4 5 6 7 8 9 10 11 12; do if sleep 2 & then n=$((n+1)); fi; done 2>/dev/null; echo $n; kill $(jobs -p) 2>/dev/null; true"
	st := s.newStep(t, sh(script)...)
	st.a.Limits.Pids = 8
	s.run(t, st)
	if n := strings.TrimSpace(st.stdout.String()); n == "12" {
		t.Errorf("pids limit 8 not enforced: forked %s sleeps", n)
	}
	st = s.newStep(t, sh(script)...)
	r := s.run(t, st)
	if n := strings.TrimSpace(st.stdout.String()); n != "12" || r.ExitCode != 0 {
		t.Errorf("default pids limit: exit %d, forked %q sleeps, want 12", r.ExitCode, n)
	}
}

// syncBuffer is a bytes.Buffer safe to read while the executor writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// cleanupKillsOrphans stands in for a crashed foundry: a step is left running, and a second
// executor instance (a restarted foundry) calls Cleanup with the IDs' prefix. The step must be
// killed and everything it held removed.
func (s *suite) cleanupKillsOrphans(t *testing.T) {
	prefix := s.prefix + "orphan-"
	e1 := s.c.New(t)
	st := s.newStep(t, sh("echo started; sleep 3600")...)
	st.a.ID = prefix + "1"
	var out syncBuffer
	st.a.Stdout = &out
	done := make(chan error, 1)
	go func() {
		_, err := e1.Run(context.Background(), st.a)
		done <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "started") {
		if time.Now().After(deadline) {
			t.Fatalf("the step did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	e2 := s.c.New(t)
	if err := e2.Cleanup(context.Background(), prefix); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	select {
	case <-done: // the first Run saw its step die; its result does not matter here
	case <-time.After(time.Minute):
		t.Fatalf("the orphaned step still runs a minute after Cleanup")
	}
	e1.Close()
	// The first executor's own deletions may have raced Cleanup; a second pass must find
	// nothing to fail on.
	if err := e2.Cleanup(context.Background(), prefix); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
	e2.Close()
	if left := s.settledLeftovers(t, prefix); len(left) > 0 {
		t.Errorf("leftovers after Cleanup:\n%s", strings.Join(left, "\n"))
	}
}

// noLeftovers runs 100 trivial steps, four at a time, and then checks that no process, mount
// or runtime object with the suite's ID prefix remains.
func (s *suite) noLeftovers(t *testing.T) {
	e := s.c.New(t)
	prefix := s.prefix + "leak-"
	var wg sync.WaitGroup
	ids := make(chan int)
	var failed atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				st := s.newStep(t, "/bin/true")
				st.a.ID = fmt.Sprintf("%s%d", prefix, i)
				r, err := e.Run(context.Background(), st.a)
				if err != nil || r.ExitCode != 0 {
					if failed.Add(1) < 5 {
						t.Errorf("run %d: %+v %v %s", i, r, err, st.stderr.String())
					}
				}
			}
		}()
	}
	for i := 0; i < 100; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	left := s.settledLeftovers(t, prefix)
	if len(left) > 0 {
		t.Errorf("leftovers after 100 runs:\n%s", strings.Join(left, "\n"))
	}
}

// settledLeftovers is leftovers once things have had a moment to go: containerd's shim
// answers the request to shut down before its process exits, so a check made at once can
// catch a shim on its way out (CI saw one, under load). Anything still there after a few
// seconds is a real leftover.
func (s *suite) settledLeftovers(t *testing.T, prefix string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := s.leftovers(t, prefix)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leftovers lists processes, mounts and runtime objects whose names contain prefix.
func (s *suite) leftovers(t *testing.T, prefix string) []string {
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(prefix)) {
			left = append(left, "process "+ent.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if strings.Contains(line, prefix) {
				left = append(left, "mount "+line)
			}
		}
	}
	if s.c.Leftovers != nil {
		left = append(left, s.c.Leftovers(t, prefix)...)
	}
	return left
}

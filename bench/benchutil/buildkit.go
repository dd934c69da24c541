package benchutil

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BuildKit is a buildkitd of a bench's own (the OCI worker, which runs the host's runc, with
// its own --root and socket) and a busybox base image in a local OCI layout (there is no
// registry to pull one from), driven with `buildctl build` as a user runs it (whole process,
// the built-in dockerfile.v0 frontend).
type BuildKit struct {
	buildctl string
	Root     string // buildkitd's --root; also holds its socket, log and the base layout
	addr     string
	daemon   *exec.Cmd
	Base     string // the base as --opt context:bb names it: oci-layout://bb@sha256:...
}

// StartBuildKit starts buildkitd from dir (scripts/buildkit.sh prints it), with a base image
// of the host's static busybox and applets, and waits until it answers. The caller stops it.
func StartBuildKit(dir string, applets []string) (*BuildKit, error) {
	for _, tool := range []string{"buildkitd", "buildctl"} {
		if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
			return nil, fmt.Errorf("no BuildKit to compare with: %w (scripts/buildkit.sh builds it)", err)
		}
	}
	root, err := os.MkdirTemp("", "foundry-buildkitbench-")
	if err != nil {
		return nil, err
	}
	b := &BuildKit{buildctl: filepath.Join(dir, "buildctl"), Root: root, addr: "unix://" + filepath.Join(root, "buildkitd.sock")}
	digest, err := writeBase(filepath.Join(root, "base"), applets)
	if err != nil {
		b.Stop()
		return nil, fmt.Errorf("base image: %w", err)
	}
	b.Base = "oci-layout://bb@" + digest

	log, err := os.Create(filepath.Join(root, "buildkitd.log"))
	if err != nil {
		b.Stop()
		return nil, err
	}
	defer log.Close()
	// --oci-worker-net=host: no CNI plugins here. It spares BuildKit the network namespace
	// that Foundry creates for every step, so it errs in BuildKit's favour.
	daemon := exec.Command(filepath.Join(dir, "buildkitd"), "--oci-worker=true", "--containerd-worker=false",
		"--oci-worker-net=host", "--root", filepath.Join(root, "state"), "--addr", b.addr)
	daemon.Stdout, daemon.Stderr = log, log
	if err := daemon.Start(); err != nil {
		b.Stop()
		return nil, err
	}
	b.daemon = daemon
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if exec.Command(b.buildctl, "--addr", b.addr, "debug", "workers").Run() == nil {
			return b, nil
		}
		if time.Since(start) > 30*time.Second {
			logText, _ := os.ReadFile(log.Name())
			b.Stop()
			return nil, fmt.Errorf("buildkitd did not answer on %s within 30s:\n%s", b.addr, Tail(string(logText)))
		}
	}
}

// Build runs `buildctl build` with the dockerfile.v0 frontend, the base as named context bb,
// and args (the --local and --opt of the caller's contexts), exporting nothing (the results
// stay in BuildKit's cache, as Foundry's stay in its own). It returns buildctl's wall time,
// its output (--progress plain), and buildctl's CPU time.
func (b *BuildKit) Build(args ...string) (wall time.Duration, out string, cpu time.Duration, err error) {
	full := append([]string{"--addr", b.addr, "build", "--progress", "plain", "--frontend", "dockerfile.v0",
		"--oci-layout", "bb=" + filepath.Join(b.Root, "base"), "--opt", "context:bb=" + b.Base}, args...)
	cmd := exec.Command(b.buildctl, full...)
	start := time.Now()
	o, err := cmd.CombinedOutput()
	wall = time.Since(start)
	if err != nil {
		return wall, string(o), 0, fmt.Errorf("buildctl build: %v\n%s", err, Tail(string(o)))
	}
	return wall, string(o), ProcessCPU(cmd.ProcessState), nil
}

// DaemonCPU is the CPU time buildkitd and the children it has reaped (runc, and what runs in
// its containers) have used so far.
func (b *BuildKit) DaemonCPU() (time.Duration, error) {
	return PidCPU(b.daemon.Process.Pid)
}

// Stop ends buildkitd (SIGTERM lets it unmount its snapshots) and removes its root. A second
// call does nothing.
func (b *BuildKit) Stop() {
	if b.Root == "" {
		return
	}
	if b.daemon != nil {
		b.daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { b.daemon.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			b.daemon.Process.Kill()
			<-done
		}
	}
	root := b.Root
	b.Root = ""
	if err := os.RemoveAll(root); err != nil {
		fmt.Fprintf(os.Stderr, "could not remove buildkitd's root: %v\n", err)
	}
}

// ProcessCPU is the user and system time of an ended process and of the children it waited for.
func ProcessCPU(ps *os.ProcessState) time.Duration {
	return ps.UserTime() + ps.SystemTime()
}

// PidCPU is the user and system time of a running process and of the children it has reaped
// (utime, stime, cutime, cstime of /proc/PID/stat).
func PidCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:15] { // fields 14-17 of proc(5): utime stime cutime cstime
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / ClockTicks, nil
}

// ClockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux architecture Go
// supports.
const ClockTicks = 100

// writeBase writes an OCI layout at dir holding one image of one layer: the host's static
// busybox with applets, and empty /out and /tmp (Foundry's sandboxes provide them). It returns
// the image's manifest digest.
func writeBase(dir string, applets []string) (string, error) {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", err
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, d := range []string{"bin/", "out/", "tmp/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode}); err != nil {
			return "", err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(busybox))}); err != nil {
		return "", err
	}
	if _, err := tw.Write(busybox); err != nil {
		return "", err
	}
	for _, applet := range applets {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox"}); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}

	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tb.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile() // carries the layer's diff ID
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Env: []string{"PATH=/bin"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	if err := p.AppendImage(img); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"github.com/foundry-build/foundry/bench/benchutil"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// buildkit is BuildKit's side of the chain comparison: a buildkitd of its own (the OCI worker,
// which runs the host's runc, with its own --root and socket), a busybox base image in a local
// OCI layout (there is no registry to pull one from), and the chain as a Dockerfile, built with
// `buildctl build` as a user runs it (whole process, the built-in dockerfile.v0 frontend).
type buildkit struct {
	buildctl string
	root     string // buildkitd's --root; also holds its socket, log, the base layout and the context
	addr     string
	daemon   *exec.Cmd
	base     string // the base as --opt context:bb names it: oci-layout://bb@sha256:...
	last     string // the Dockerfile last written
}

// startBuildkit starts buildkitd from dir (scripts/buildkit.sh prints it) and waits until it
// answers. It is stopped at exit if not before.
func startBuildkit(dir string) *buildkit {
	for _, tool := range []string{"buildkitd", "buildctl"} {
		if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
			fmt.Fprintf(os.Stderr, "no BuildKit to compare with: %v (scripts/buildkit.sh builds it)\n", err)
			exit(1)
		}
	}
	root, err := os.MkdirTemp("", "foundry-buildkitbench-")
	must(err)
	b := &buildkit{buildctl: filepath.Join(dir, "buildctl"), root: root, addr: "unix://" + filepath.Join(root, "buildkitd.sock")}
	atExit(b.stop)
	b.base = "oci-layout://bb@" + writeBase(filepath.Join(root, "base"))
	must(os.MkdirAll(filepath.Join(root, "context"), 0o755))

	log, err := os.Create(filepath.Join(root, "buildkitd.log"))
	must(err)
	// --oci-worker-net=host: no CNI plugins here. It spares BuildKit the network namespace
	// that Foundry creates for every step, so it errs in BuildKit's favour.
	daemon := exec.Command(filepath.Join(dir, "buildkitd"), "--oci-worker=true", "--containerd-worker=false",
		"--oci-worker-net=host", "--root", filepath.Join(root, "state"), "--addr", b.addr)
	daemon.Stdout, daemon.Stderr = log, log
	must(daemon.Start())
	b.daemon = daemon
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if exec.Command(b.buildctl, "--addr", b.addr, "debug", "workers").Run() == nil {
			return b
		}
		if time.Since(start) > 30*time.Second {
			logText, _ := os.ReadFile(log.Name())
			fmt.Fprintf(os.Stderr, "buildkitd did not answer on %s within 30s:\n%s", b.addr, benchutil.Tail(string(logText)))
			exit(1)
		}
	}
}

// build writes the Dockerfile, if it changed, and builds it, exporting nothing (the results
// stay in BuildKit's cache, as Foundry's stay in its own); it returns the wall time of buildctl.
func (b *buildkit) build(dockerfile string) time.Duration {
	ctx := filepath.Join(b.root, "context")
	if dockerfile != b.last {
		must(os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(dockerfile), 0o644))
		b.last = dockerfile
	}
	cmd := exec.Command(b.buildctl, "--addr", b.addr, "build", "--progress", "plain",
		"--frontend", "dockerfile.v0", "--local", "context="+ctx, "--local", "dockerfile="+ctx,
		"--oci-layout", "bb="+filepath.Join(b.root, "base"), "--opt", "context:bb="+b.base)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		fmt.Fprintf(os.Stderr, "buildctl build failed: %v\n%s", err, benchutil.Tail(string(out)))
		exit(1)
	}
	return d
}

// stop ends buildkitd (SIGTERM lets it unmount its snapshots) and removes its root. A second
// call does nothing.
func (b *buildkit) stop() {
	if b.root == "" {
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
	root := b.root
	b.root = ""
	if err := os.RemoveAll(root); err != nil {
		fmt.Fprintf(os.Stderr, "could not remove buildkitd's root: %v\n", err)
	}
}

// chainDockerfile is benchChain's chain for BuildKit: each step a stage on the busybox base
// that bind-mounts the previous stage's /out/o at /in, as Foundry's step mounts it, and writes
// /out/o with the same shell command. nonce goes into step 0's output, so a new nonce makes
// every step run again (each step's input changes) while the base stays imported.
func chainDockerfile(nonce string) string {
	var b strings.Builder
	for i := range chainSteps {
		fmt.Fprintf(&b, "FROM bb AS s%d\n", i)
		if i == 0 {
			fmt.Fprintf(&b, "RUN echo 0 %s > /out/o\n", nonce)
			continue
		}
		fmt.Fprintf(&b, "RUN --mount=type=bind,from=s%d,source=/out/o,target=/in cat /in > /out/o; echo %d >> /out/o\n", i-1, i)
	}
	return b.String()
}

// writeBase writes an OCI layout at dir holding one image of one layer: the host's static
// busybox with the applets the chain uses, and an empty /out (Foundry's sandboxes provide
// one). It returns the image's manifest digest.
func writeBase(dir string) string {
	busybox, err := os.ReadFile("/bin/busybox")
	must(err)
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, d := range []string{"bin/", "out/", "tmp/"} {
		must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}))
	}
	must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(busybox))}))
	_, err = tw.Write(busybox)
	must(err)
	for _, applet := range []string{"sh", "cat", "echo"} {
		must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox"}))
	}
	must(tw.Close())

	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tb.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	must(err)
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	must(err)
	cf, err := img.ConfigFile() // carries the layer's diff ID
	must(err)
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Env: []string{"PATH=/bin"}}
	img, err = mutate.ConfigFile(img, cf)
	must(err)
	p, err := layout.Write(dir, empty.Index)
	must(err)
	must(p.AppendImage(img))
	d, err := img.Digest()
	must(err)
	return d.String()
}

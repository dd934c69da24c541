// Package executortest is the conformance suite every executor runs (Run), plus the busybox
// images it runs them on. Each executor package calls Run from its own test with a factory;
// the suite checks behaviour the engine relies on: exit status, output capture, argv/env/
// workdir, read-only inputs, no network, write confinement, memory limit, deadline, and that
// nothing (process, mount, container) outlives a step.
//
// Tests that need a runtime FAIL instead of skipping when CI=true (see Require), so a CI
// machine without runc or containerd cannot pass by skipping.
//
// Running them (as root, after scripts/deps.sh, which installs runc, containerd and
// busybox-static and starts the private containerd):
//
//	CI=true go test -count=1 ./executors/...
//
// The containerd tests use FOUNDRY_CONTAINERD_ADDRESS (default
// /run/foundry-containerd/containerd.sock) and the "foundry-test" namespace. The benchmark is
// the execbench command (scripts/bench.sh runs it).
package executortest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/foundry-build/foundry/executors"
)

// Busybox is the static busybox from Debian's busybox-static.
const Busybox = "/bin/busybox"

// Require fails the test when CI=true and ok is false, and skips it otherwise: a developer
// machine may lack a runtime, a CI machine must not.
func Require(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required when CI=true", what)
	}
	t.Skipf("%s not available (set CI=true to make this a failure)", what)
}

// applets lists the busybox applets, from `busybox --list`.
func applets() ([]string, error) {
	out, err := exec.Command(Busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", Busybox, err)
	}
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if n != "busybox" && !strings.Contains(n, "/") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// busyboxEnv is the image environment of the test images.
var busyboxEnv = []string{"PATH=/bin", "HOME=/tmp"}

var (
	rootfsOnce sync.Once
	rootfsDir  string
	rootfsErr  error
)

// BusyboxRootfs returns a directory holding only bin/busybox and a symlink per applet. It
// deliberately has no /proc, /dev, /sys, /tmp, /out or /etc, so executors must create mount
// points without writing to it. It is built once per test process and shared; treat it as
// read-only (the suite checks that steps leave it unchanged).
func BusyboxRootfs(t testing.TB) executors.Image {
	t.Helper()
	rootfsOnce.Do(func() {
		rootfsDir, rootfsErr = buildRootfs()
	})
	Require(t, rootfsErr == nil, fmt.Sprintf("busybox rootfs (%v)", rootfsErr))
	return executors.Image{Rootfs: rootfsDir, Env: busyboxEnv}
}

// BuildRootfs writes a fresh busybox rootfs (see BusyboxRootfs) into a new temporary
// directory and returns it; the caller removes it.
func BuildRootfs() (string, error) { return buildRootfs() }

func buildRootfs() (string, error) {
	if _, err := os.Stat(Busybox); err != nil {
		return "", err
	}
	names, err := applets()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "foundry-busybox-rootfs-")
	if err != nil {
		return "", err
	}
	// The step runs as nobody: the root must be traversable.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", err
	}
	b, err := os.ReadFile(Busybox)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), b, 0o755); err != nil {
		return "", err
	}
	for _, n := range names {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", n)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

var (
	layoutOnce sync.Once
	layoutImg  executors.Image
	layoutErr  error
)

// BusyboxLayout returns an OCI image layout holding one single-layer busybox image (the same
// tree as BusyboxRootfs), with Image.LayoutPath, Image.Digest and Image.Env set. Built once
// per test process.
func BusyboxLayout(t testing.TB) executors.Image {
	t.Helper()
	layoutOnce.Do(func() {
		layoutImg, layoutErr = buildLayout()
	})
	Require(t, layoutErr == nil, fmt.Sprintf("busybox OCI layout (%v)", layoutErr))
	return layoutImg
}

// BuildLayout writes a fresh busybox OCI layout (see BusyboxLayout) into a new temporary
// directory; the caller removes Image.LayoutPath.
func BuildLayout() (executors.Image, error) { return buildLayout() }

func buildLayout() (executors.Image, error) {
	var img executors.Image
	names, err := applets()
	if err != nil {
		return img, err
	}
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		return img, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}}
	hdrs = append(hdrs, &tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	for _, n := range names {
		hdrs = append(hdrs, &tar.Header{Name: "bin/" + n, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	for _, h := range hdrs {
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return img, err
		}
		if h.Name == "bin/busybox" {
			if _, err := tw.Write(bb); err != nil {
				return img, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return img, err
	}
	tarBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	})
	if err != nil {
		return img, err
	}
	i, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return img, err
	}
	cf, err := i.ConfigFile()
	if err != nil {
		return img, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = busyboxEnv
	i, err = mutate.ConfigFile(i, cf)
	if err != nil {
		return img, err
	}
	dir, err := os.MkdirTemp("", "foundry-busybox-layout-")
	if err != nil {
		return img, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return img, err
	}
	if err := p.AppendImage(i); err != nil {
		return img, err
	}
	d, err := i.Digest()
	if err != nil {
		return img, err
	}
	return executors.Image{Digest: d.String(), LayoutPath: dir, Env: busyboxEnv}, nil
}

// RemoveImages deletes the images built by BusyboxRootfs and BusyboxLayout; call it from
// TestMain after m.Run, since they are shared by the tests of a process.
func RemoveImages() {
	if rootfsDir != "" {
		os.RemoveAll(rootfsDir)
	}
	if layoutImg.LayoutPath != "" {
		os.RemoveAll(layoutImg.LayoutPath)
	}
}

// Both returns an image with both a layout and a rootfs, for tests that run every executor.
func Both(t testing.TB) executors.Image {
	img := BusyboxLayout(t)
	img.Rootfs = BusyboxRootfs(t).Rootfs
	return img
}

package executors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A sandbox reads /proc/self/mountinfo and /proc/mounts; the kernel writes there, for every
// mount, the path of a bind mount's source within its filesystem and an overlay's options as
// they were given. Mounted plainly, the sandbox's root and inputs would show the host's
// layout: the project's path, the run's ID, the bundle's path. Neither file can be masked
// (each /proc/PID has its own), so what they show is made neutral at the source:
//   - an overlay names its layers /proc/self/fd/N (MountOverlay), descriptors of the mounting
//     process that are closed once it is mounted;
//   - an input is bound from a read-only overlay of it (StageInputs), whose root is "/", so
//     its bind shows "/" (a directory) or "/NAME" (a file: its materialized name, a content
//     digest), never where it is on the host;
//   - /out and /tmp are bound from the writable space's tmpfs (Writable): "/out", "/tmp".

// MountOverlay mounts at target an overlay of the directories lower (uppermost first) and,
// when upper is set, of upper with its work directory, with the extra options, each layer
// named by a descriptor (/proc/self/fd/N) so that the mount's options name no host path.
func MountOverlay(target string, lower []string, upper, work string, extra []string, flags uintptr) error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	name := func(dir string) (string, error) {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("overlay layer %s: %w", dir, err)
		}
		fds = append(fds, fd)
		return "/proc/self/fd/" + strconv.Itoa(fd), nil
	}
	var layers []string
	for _, l := range lower {
		n, err := name(l)
		if err != nil {
			return err
		}
		layers = append(layers, n)
	}
	opts := []string{"lowerdir=" + strings.Join(layers, ":")}
	if upper != "" {
		u, err := name(upper)
		if err != nil {
			return err
		}
		w, err := name(work)
		if err != nil {
			return err
		}
		opts = append(opts, "upperdir="+u, "workdir="+w)
	}
	opts = append(opts, extra...)
	if err := unix.Mount("overlay", target, "overlay", flags, strings.Join(opts, ",")); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", target, err)
	}
	return nil
}

// StageInputs mounts under dir a read-only overlay of each read-only input's source (of a
// file's directory, for a file) and returns the mounts with their sources moved there. A
// writable mount (an acceptance's data volume, which outlives the sandbox) is kept as it is.
// UnstageInputs(dir) undoes it.
func StageInputs(dir string, ms []Mount) ([]Mount, error) {
	if len(ms) == 0 {
		return ms, nil
	}
	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return nil, fmt.Errorf("staging inputs: %w", err)
	}
	out := append([]Mount(nil), ms...)
	for i, m := range ms {
		if m.Writable {
			continue
		}
		fi, err := os.Stat(m.Source)
		if err != nil {
			return nil, fmt.Errorf("staging input %s: %w", m.Target, err)
		}
		src, file := m.Source, ""
		if !fi.IsDir() {
			src, file = filepath.Dir(m.Source), filepath.Base(m.Source)
		}
		at := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(at, 0o755); err != nil {
			return nil, fmt.Errorf("staging input %s: %w", m.Target, err)
		}
		// Two lower layers: an overlay without an upper layer needs at least two.
		if err := MountOverlay(at, []string{src, empty}, "", "", nil, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
			return nil, fmt.Errorf("staging input %s: %w", m.Target, err)
		}
		out[i].Source = filepath.Join(at, file)
	}
	return out, nil
}

// UnstageInputs unmounts what StageInputs mounted under dir and removes dir. A dir that does
// not exist is nothing to do.
func UnstageInputs(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			p := filepath.Join(dir, e.Name())
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount staged input %s: %w", p, err))
			}
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

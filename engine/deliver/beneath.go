package deliver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A delivery's filesystem destination (dir: and oci-layout:) is reached from the directory
// its grant names (Request.Root) one component at a time with openat2(2), RESOLVE_BENEATH
// and RESOLVE_NO_SYMLINKS: no symbolic link below the granted directory is followed (a
// product that delivered a link to somewhere outside cannot have a later delivery written
// there), and no directory of an earlier release is entered (a grant never covers a path
// inside a release: its files are a product's, its data/ a service's). The granted
// directory itself is opened as the operator named it: an operator who grants a directory
// grants what its links lead to (spec/grants.md §3).

// Beneath is a destination directory resolved beneath its grant, held open: every path of
// the delivery is taken under Path, which names the directory by its descriptor, so no
// path is resolved from the destination's name again.
type Beneath struct {
	f    *os.File
	Path string // /proc/self/fd/N: the directory itself, whatever its name leads to now
}

// Close releases the directory.
func (b *Beneath) Close() error { return b.f.Close() }

// errMissing: a directory of the destination does not exist yet (without create): a
// delivery makes it, beneath its grant.
var errMissing = errors.New("does not exist")

// OpenBeneath opens dest, which is root or a directory under it, as a delivery writes to it:
// the directories missing below root are made (0755). It refuses a symbolic link or a
// non-directory on the way, and a directory of a release (one holding release.json), root
// included.
func OpenBeneath(root, dest string) (*Beneath, error) {
	return openBeneath(root, dest, true)
}

// CheckBeneath reports why dest could not be delivered to beneath root, as OpenBeneath
// would refuse it, without making anything: nil when it could (also when part of it does
// not exist yet). The plan shows it before anything runs.
func CheckBeneath(root, dest string) error {
	b, err := openBeneath(root, dest, false)
	if errors.Is(err, errMissing) {
		return nil
	}
	if err != nil {
		return err
	}
	return b.Close()
}

// lookBeneath opens dest beneath root without making anything: found is false when some
// directory of it does not exist (a delivery that was never made).
func lookBeneath(root, dest string) (b *Beneath, found bool, err error) {
	b, err = openBeneath(root, dest, false)
	if errors.Is(err, errMissing) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func openBeneath(root, dest string, create bool) (*Beneath, error) {
	rel, err := filepath.Rel(root, dest)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(root) != filepath.IsAbs(dest) {
		return nil, fmt.Errorf("%s is not under the granted directory %s", dest, root)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && create {
		// The granted directory itself is made as named, as os.MkdirAll would.
		if err = os.MkdirAll(root, 0o755); err == nil {
			fd, err = unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("the granted directory %s %w", root, errMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("the granted directory %s: %w", root, err)
	}
	at := root
	if err := refuseRelease(fd, at); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if rel != "." {
		for _, c := range strings.Split(rel, "/") {
			next, err := stepBeneath(fd, c, create)
			at = filepath.Join(at, c)
			unix.Close(fd)
			if errors.Is(err, unix.ENOENT) {
				return nil, fmt.Errorf("%s %w", at, errMissing)
			}
			if err != nil {
				return nil, fmt.Errorf("delivering to %s: %s %w", dest, at, err)
			}
			fd = next
			if err := refuseRelease(fd, at); err != nil {
				unix.Close(fd)
				return nil, fmt.Errorf("delivering to %s: %w", dest, err)
			}
		}
	}
	f := os.NewFile(uintptr(fd), dest)
	return &Beneath{f: f, Path: "/proc/self/fd/" + strconv.Itoa(fd)}, nil
}

// stepBeneath opens the directory name in the directory dirfd, following no symbolic link,
// and makes it first when it is missing and create is set.
func stepBeneath(dirfd int, name string, create bool) (int, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(dirfd, name, how)
	if errors.Is(err, unix.ENOENT) && create {
		if err = unix.Mkdirat(dirfd, name, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
			fd, err = unix.Openat2(dirfd, name, how)
		}
	}
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ELOOP):
		return -1, errors.New("is a symbolic link: a delivery follows no link below its granted directory")
	case errors.Is(err, unix.ENOTDIR):
		return -1, errors.New("is not a directory")
	case errors.Is(err, unix.EXDEV):
		return -1, errors.New("leads outside the granted directory")
	case errors.Is(err, unix.ENOSYS):
		return -1, errors.New("cannot be resolved safely: delivering needs openat2(2), Linux 5.6 or later")
	}
	return -1, err
}

// refuseRelease refuses the directory fd, at, when it is a release (it holds release.json).
func refuseRelease(fd int, at string) error {
	var st unix.Stat_t
	err := unix.Fstatat(fd, ManifestFile, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil {
		return fmt.Errorf("%s is a delivered release (it holds %s): no grant covers a path inside a release", at, ManifestFile)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("%s: %w", at, err)
}

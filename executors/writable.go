package executors

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Full says which bound of its writable space an action reached (Result.Full).
type Full struct {
	// Limit is "disk" (Limits.DiskBytes: bytes) or "inodes" (Limits.Inodes: files,
	// directories and links).
	Limit string
	// Bound is the bound reached, in bytes or inodes.
	Bound int64
	// Where is "/out" or "/tmp": the one that holds more of what filled it.
	Where string
}

// Writable is a sandbox's writable space: one tmpfs on the host, bounded in bytes (size=)
// and inodes (nr_inodes=), whose directories out and tmp a sandboxed executor binds at /out
// and /tmp. A step that fills it gets ENOSPC at once, while it runs, instead of filling the
// host's disk; and the sandbox's view of /out and /tmp names no host path (the bind's root
// is "/out" on a tmpfs).
//
// Its pages are memory, charged to the memory cgroup of the process that writes them (the
// step's), so they count against Limits.MemoryBytes as well: the smaller bound wins. A
// tmpfs is chosen over a disk image formatted per step (mkfs and a loop device cost a
// hundred milliseconds or more per step) and over project quotas (which the host's
// filesystem may not have).
type Writable struct {
	Dir           string // the mount point
	bytes, inodes int64
}

// writableReserved are the inodes of the tmpfs that the step did not make: its root and
// the out and tmp directories.
const writableReserved = 3

// MountWritable mounts the writable space at dir (created if missing), bounded to bytes
// and inodes, with out owned by uid:gid (mode 0755) and tmp world-writable and sticky.
func MountWritable(dir string, bytes, inodes int64, uid, gid uint32) (*Writable, error) {
	if bytes <= 0 || inodes <= 0 {
		return nil, fmt.Errorf("writable space: bounds %d bytes, %d inodes must be positive", bytes, inodes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("writable space: %w", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755", bytes, inodes+writableReserved)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return nil, fmt.Errorf("writable space: mount tmpfs at %s: %w", dir, err)
	}
	w := &Writable{Dir: dir, bytes: bytes, inodes: inodes}
	err := os.Mkdir(w.Out(), 0o755)
	if err == nil {
		err = os.Lchown(w.Out(), int(uid), int(gid))
	}
	if err == nil {
		err = os.Mkdir(w.Tmp(), 0o777)
	}
	if err == nil {
		err = os.Chmod(w.Tmp(), 0o777|os.ModeSticky)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("writable space: %w", err), w.Unmount())
	}
	return w, nil
}

// Out is the host directory bound at /out.
func (w *Writable) Out() string { return filepath.Join(w.Dir, "out") }

// Tmp is the host directory bound at /tmp.
func (w *Writable) Tmp() string { return filepath.Join(w.Dir, "tmp") }

// Full reports the bound the step reached, or nil: the tmpfs has no free page left, or no
// free inode. Read once the step's processes are gone.
func (w *Writable) Full() (*Full, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(w.Dir, &st); err != nil {
		return nil, fmt.Errorf("writable space: %w", err)
	}
	var f *Full
	switch {
	case st.Bfree == 0:
		f = &Full{Limit: "disk", Bound: w.bytes}
	case st.Ffree == 0:
		f = &Full{Limit: "inodes", Bound: w.inodes}
	default:
		return nil, nil
	}
	outB, outN := treeUsage(w.Out())
	tmpB, tmpN := treeUsage(w.Tmp())
	f.Where = "/out"
	if f.Limit == "disk" && tmpB > outB || f.Limit == "inodes" && tmpN > outN {
		f.Where = "/tmp"
	}
	return f, nil
}

// treeUsage is the bytes (allocated) and entries under dir; unreadable parts count nothing.
func treeUsage(dir string) (bytes, entries int64) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		entries++
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				bytes += st.Blocks * 512
			}
		}
		return nil
	})
	return bytes, entries
}

// CopyOut copies what the step left in out into dst, an existing empty directory on the
// host: regular files (content and permission bits), directories, symlinks (their targets
// as written, never followed) and named pipes; sockets and device nodes are left out (the
// step cannot make devices: it has no capability and the space is nodev). The walk does not
// follow symlinks, so nothing is written outside dst. It is read once the step's processes
// are gone, so nothing changes under it.
func (w *Writable) CopyOut(dst string) error {
	src := w.Out()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fi.Mode().Perm()
		switch t := fi.Mode().Type(); {
		case t.IsDir():
			// Made writable for the copy; its own mode is set once its entries are in.
			return os.Mkdir(to, 0o700)
		case t.IsRegular():
			return copyFile(p, to, perm)
		case t == fs.ModeSymlink:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case t == fs.ModeNamedPipe:
			return unix.Mkfifo(to, uint32(perm))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("copying /out: %w", err)
	}
	// Directories' modes last, deepest first, so that a read-only directory was writable
	// while its entries were copied in.
	var dirs []string
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != src {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		fi, err := os.Lstat(dirs[i])
		if err != nil {
			return fmt.Errorf("copying /out: %w", err)
		}
		rel := strings.TrimPrefix(dirs[i], src+string(filepath.Separator))
		if err := os.Chmod(filepath.Join(dst, rel), fi.Mode().Perm()); err != nil {
			return fmt.Errorf("copying /out: %w", err)
		}
	}
	return nil
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.OpenFile(from, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	// io.Copy between two files uses copy_file_range (or sendfile): no pass through user space.
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// The umask may have cut the permission bits the step gave.
	return os.Chmod(to, perm)
}

// Unmount unmounts the writable space (detaching it if a process still holds it: the
// kernel frees it with the last user) and removes its mount point.
func (w *Writable) Unmount() error {
	return UnmountWritable(w.Dir)
}

// UnmountWritable unmounts and removes a writable space left at dir (by a crashed run, for
// Cleanup). A dir that is not mounted is only removed.
func UnmountWritable(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount writable space %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove writable space %s: %w", dir, err)
	}
	return nil
}

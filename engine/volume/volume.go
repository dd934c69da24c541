// Package volume keeps a project's cache volumes (spec/language.md §9b): named, writable,
// persistent filesystems that steps mount (a compiler's cache, a package manager's
// download directory) and that outlive any one step. A volume belongs to one project and
// one trust domain, and is keyed by its name and the image and platform of the step that
// mounts it: the same name with another image is another volume. Its content is never part
// of a step's cache key; provenance says a step mounted it.
//
// Each instance of a volume is an ext4 filesystem in a sparse image file of its bound
// (Spec.MaxSize), made once by mkfs.ext4 and loop-mounted while a lease holds it: a step that
// fills it gets ENOSPC while it runs, and the host's disk holds at most the bound per
// instance. Volumes live under .foundry/caches, one directory each, named by the key:
//
//	<key>/meta.json       what the volume is for, when it was made and last used
//	<key>/use.lock        every user holds it shared; prune holds it exclusively to delete
//	<key>/mount.lock      held exclusively while an instance is mounted or unmounted
//	<key>/data.img        instance 0, what shared and locked users mount, at <key>/data/
//	<key>/data.lock       instance 0's lock: shared users share it, a locked user holds it alone
//	<key>/private-N.img   instances a private user takes when instance 0 is in use (N ≥ 1),
//	                      mounted at <key>/private-N/
//
// Every lock is an flock on a file this process opened: the kernel drops it when the process
// ends however it ends, so a killed step or a killed foundry never leaves a volume locked.
// An instance is mounted by its first lease and unmounted by its last (the one that can then
// take the instance's lock exclusively); a mount a killed process left is found (the mount
// point is on another device than its parent) and used as it is, and Prune unmounts before
// it deletes.
//
// It imports digest, containerd's mount package (the loop mount) and x/sys/unix.
package volume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/containerd/containerd/mount"
	"golang.org/x/sys/unix"

	"github.com/foundry-build/foundry/digest"
)

// Sharing modes of a cache mount.
const (
	// Shared: any number of steps use the volume at once (a tool that is safe under
	// concurrent use, as Go's build cache is). The default.
	Shared = "shared"
	// Locked: one step at a time; another waits until it is done.
	Locked = "locked"
	// Private: a step that finds the volume in use gets an instance of its own instead of
	// waiting; instances are kept and reused.
	Private = "private"
)

// ValidSharing reports whether s is a sharing mode.
func ValidSharing(s string) bool { return s == Shared || s == Locked || s == Private }

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`) })

// ValidName reports whether s can name a cache: 1-64 of [a-z0-9._-], starting with a
// letter or digit.
func ValidName(s string) bool { return nameRE().MatchString(s) }

// Spec says which volume a step mounts.
type Spec struct {
	Project  string `json:"project"`  // the project's name
	Domain   string `json:"domain"`   // the trust domain: "project", or a recipe's or product's scope
	Name     string `json:"name"`     // the cache's name, as the step wrote it
	Image    string `json:"image"`    // the image digest of the step
	Platform string `json:"platform"` // the step's platform
	// MaxSize bounds each instance, in bytes; 0 is DefaultMaxSize. A bound given is part of
	// the key (a filesystem is made at its size: another bound is another volume); the
	// default is not, so volumes keep the keys they had before bounds existed.
	MaxSize int64 `json:"max_size,omitempty"`
}

// DefaultMaxSize bounds an instance whose Spec gives no MaxSize: gc's default bound of all
// volumes together (foundry gc -cache-max-size), so that one volume alone stays within it.
const DefaultMaxSize = 10 << 30

// maxSize is s's bound in bytes.
func (s Spec) maxSize() int64 {
	if s.MaxSize > 0 {
		return s.MaxSize
	}
	return DefaultMaxSize
}

// Key is the volume's identity: the digest of the canonical JSON of s, as hex.
func (s Spec) Key() (string, error) {
	d, _, err := digest.Of(s)
	if err != nil {
		return "", fmt.Errorf("cache %q: %w", s.Name, err)
	}
	return d.Hex(), nil
}

// meta is meta.json.
type meta struct {
	Spec
	Created time.Time `json:"created"`
	Used    time.Time `json:"used"`
}

// Store is the volumes of one workspace.
type Store struct {
	Dir string // .foundry/caches
}

// Lease is one use of a volume: its Path is mounted while it is held.
type Lease struct {
	Path    string // the host directory to mount
	Key     string // the volume's key
	Sharing string
	// Instance is 0 for the volume's shared data, N ≥ 1 for a private instance.
	Instance int
	MaxSize  int64 // the bound of the instance's filesystem, in bytes
	// Note, when set, says what the lease did to the volume that its user should know (an
	// old, unbounded directory volume replaced by an empty bounded one).
	Note string
	use  *os.File // use.lock, shared
	inst *os.File // the instance's lock, once taken
	dir  string
}

// poll is how often a waiting Acquire tries a lock again: a blocking flock could not be
// interrupted by ctx.
const poll = 100 * time.Millisecond

// Acquire takes the volume s names in mode sharing, making it if it does not exist. A locked
// user waits for the volume's other users, and they for it, until ctx ends; waiting, if not
// nil, is called once when it has to wait. Release ends the lease.
func (st *Store) Acquire(ctx context.Context, s Spec, sharing string, waiting func()) (*Lease, error) {
	if !ValidSharing(sharing) {
		return nil, fmt.Errorf("cache %q: sharing %q: want shared, locked or private", s.Name, sharing)
	}
	key, err := s.Key()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(st.Dir, key)
	l := &Lease{Key: key, Sharing: sharing, MaxSize: s.maxSize(), dir: dir}
	// use.lock, shared, keeps prune away for as long as the lease lasts. Prune renames the
	// directory away under it exclusively, so the file locked must still be the one at
	// the path once it is held.
	for {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cache %q: %w", s.Name, err)
		}
		f, err := lockFile(ctx, filepath.Join(dir, "use.lock"), syscall.LOCK_SH, nil)
		if err != nil {
			return nil, fmt.Errorf("cache %q: %w", s.Name, err)
		}
		if same(f, filepath.Join(dir, "use.lock")) {
			l.use = f
			break
		}
		f.Close()
	}
	if err := writeMeta(dir, s); err != nil {
		l.Release()
		return nil, fmt.Errorf("cache %q: %w", s.Name, err)
	}
	switch sharing {
	case Shared:
		err = l.take(ctx, 0, syscall.LOCK_SH, waiting)
	case Locked:
		err = l.take(ctx, 0, syscall.LOCK_EX, waiting)
	case Private:
		// The first instance nobody uses; a new one when all are in use.
		for i := 0; ; i++ {
			f, ok, terr := tryLock(instanceLock(dir, i), syscall.LOCK_EX)
			if terr != nil {
				err = terr
				break
			}
			if ok {
				l.inst = f
				l.Instance = i
				err = l.mount(ctx, i)
				break
			}
		}
	}
	if err != nil {
		l.Release()
		return nil, fmt.Errorf("cache %q: %w", s.Name, err)
	}
	return l, nil
}

// take locks instance i with how (LOCK_SH or LOCK_EX), waiting until ctx ends, and mounts
// it.
func (l *Lease) take(ctx context.Context, i int, how int, waiting func()) error {
	f, err := lockFile(ctx, instanceLock(l.dir, i), how, waiting)
	if err != nil {
		return err
	}
	l.inst = f
	l.Instance = i
	return l.mount(ctx, i)
}

// mount mounts instance i at its data directory, unless it is mounted already (by another
// lease, or by a process killed while it held one), making its image first if there is none.
// An instance's data directory that holds files but has no image is a volume of a Foundry
// from before volumes were bounded: a cache is only a cache, so it is emptied and made anew,
// and Note says so. The root of the filesystem is writable by any user: a step runs as a user
// of its own choosing, by default nobody.
func (l *Lease) mount(ctx context.Context, i int) error {
	unlock, err := lockMounts(ctx, l.dir)
	if err != nil {
		return err
	}
	defer unlock()
	l.Path = instanceData(l.dir, i)
	if !mounted(l.Path) {
		img := l.Path + ".img"
		fresh := false
		if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
			fresh = true
			if ents, _ := os.ReadDir(l.Path); len(ents) > 0 {
				if err := removeAll(l.Path); err != nil {
					return fmt.Errorf("replacing the unbounded directory volume %s: %w", l.Path, err)
				}
				l.Note = fmt.Sprintf("its volume was a directory without a size bound, made by an earlier Foundry; it was replaced by an empty volume bounded to %d bytes", l.MaxSize)
			}
			if err := makeImage(img, l.MaxSize); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if err := os.MkdirAll(l.Path, 0o755); err != nil {
			return err
		}
		// noinit_itable keeps the kernel from zeroing the unused inode tables (which would
		// allocate them in the sparse image).
		m := mount.Mount{Type: "ext4", Source: img, Options: []string{"loop", "nodev", "nosuid", "noinit_itable"}}
		// The image may still back a loop device whose filesystem lives on in another mount
		// namespace (a sandbox a killed foundry left running) though it is unmounted here:
		// that device is mounted again, so that one filesystem, never two, writes the image.
		if dev := loopOf(img); dev != "" {
			m.Source, m.Options = dev, m.Options[1:]
		}
		if err := m.Mount(l.Path); err != nil {
			return fmt.Errorf("mounting %s at %s: %w", img, l.Path, err)
		}
		if fresh {
			// A new cache is empty: mkfs's lost+found is for fsck, which makes it again
			// when it needs it.
			if err := os.Remove(filepath.Join(l.Path, "lost+found")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return os.Chmod(l.Path, 0o777)
}

// makeImage makes an empty ext4 filesystem of size bytes in a sparse file at img: made
// under another name and renamed, so that an image at img is always whole. -m 0 reserves
// no blocks for root, so the whole bound is the step's; the lazy inits leave the inode
// tables and journal unwritten (the image holds a few megabytes until it is used).
func makeImage(img string, size int64) error {
	tmp := img + ".tmp-" + strconv.Itoa(os.Getpid())
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		cmd := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp)
		if out, rerr := cmd.CombinedOutput(); rerr != nil {
			err = fmt.Errorf("mkfs.ext4 (from e2fsprogs) %s: %w: %s", tmp, rerr, strings.TrimSpace(string(out)))
		}
	}
	if err == nil {
		err = os.Rename(tmp, img)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("making the volume's filesystem: %w", err)
	}
	return nil
}

// loopOf returns the loop device img backs ("/dev/loop3"), or "" if none does.
func loopOf(img string) string {
	abs, err := filepath.Abs(img)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == abs {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		}
	}
	return ""
}

// mounted reports whether dir is a mount point: it is on another device than its parent.
// Every instance is its own ext4 filesystem, so this holds exactly while it is mounted.
func mounted(dir string) bool {
	a, err := os.Stat(dir)
	if err != nil {
		return false
	}
	b, err := os.Stat(filepath.Dir(dir))
	if err != nil {
		return false
	}
	return a.Sys().(*syscall.Stat_t).Dev != b.Sys().(*syscall.Stat_t).Dev
}

// fitrim is FITRIM, _IOWR('X', 121, struct fstrim_range), which x/sys/unix does not name.
const fitrim = 0xc0185879

// trimSlack is how many bytes more than its filesystem uses an image may hold before trim
// gives them back: a trim costs about 0.1 s on a 10 GiB volume, too much for every lease.
const trimSlack = 64 << 20

// trim gives the blocks of the files deleted in the filesystem at dir back to the host, when
// its image img holds more than trimSlack bytes the filesystem no longer uses: the loop
// device punches them out of the sparse image. (The discard mount option would do it at
// each deletion, but measured it left most of a deleted file's blocks allocated.) A failure
// only leaves the image larger, never past its bound.
func trim(dir, img string) {
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	defer f.Close()
	// Blocks freed in the running journal transaction are not free until it commits.
	unix.Syncfs(int(f.Fd()))
	var fsst unix.Statfs_t
	var ist unix.Stat_t
	if unix.Fstatfs(int(f.Fd()), &fsst) != nil || unix.Stat(img, &ist) != nil {
		return
	}
	if used := int64(fsst.Blocks-fsst.Bfree) * fsst.Bsize; ist.Blocks*512-used < trimSlack {
		return
	}
	r := struct{ start, len, minlen uint64 }{0, ^uint64(0), 0}
	syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fitrim, uintptr(unsafe.Pointer(&r)))
}

// lockMounts holds the volume's mount.lock exclusively until unlock is called: an instance
// is mounted or unmounted by one lease at a time, so two first users never both mount it.
func lockMounts(ctx context.Context, dir string) (unlock func(), err error) {
	f, err := lockFile(ctx, filepath.Join(dir, "mount.lock"), syscall.LOCK_EX, nil)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// fullMargin is the free space under which an instance counts as full: ext4 keeps blocks
// for the metadata of writes in flight, so a write fails with ENOSPC while statfs still
// shows a few hundred kilobytes available (measured: 0.4 MiB of a 16 MiB and of a 1 GiB
// volume, 0.9 MiB of a 256 MiB one).
const fullMargin = 2 << 20

// Full reports whether the instance the lease holds is full (less than fullMargin
// available) or has no free inode: a step that wrote to it met ENOSPC. Read before Release,
// once the step has ended.
func (l *Lease) Full() bool {
	var st syscall.Statfs_t
	if l == nil || syscall.Statfs(l.Path, &st) != nil || !mounted(l.Path) {
		return false
	}
	return int64(st.Bavail)*st.Bsize < fullMargin || st.Ffree == 0
}

// Release ends the lease: the volume's last use is recorded, the instance is unmounted if no
// other lease holds it, and the locks are dropped. An instance that cannot be unmounted (a
// process still has a file open in it) stays mounted, and the next lease uses it.
func (l *Lease) Release() {
	if l == nil || l.use == nil {
		return
	}
	touchMeta(l.dir)
	if l.inst != nil {
		if unlock, err := lockMounts(context.Background(), l.dir); err == nil {
			// Drop this lease's instance lock; whoever can then take it alone is the last user.
			l.inst.Close()
			if f, ok, _ := tryLock(instanceLock(l.dir, l.Instance), syscall.LOCK_EX); ok {
				if mounted(l.Path) {
					trim(l.Path, l.Path+".img")
					mount.Unmount(l.Path, 0)
				}
				f.Close()
			}
			unlock()
		}
		l.inst.Close() // a second Close of a closed file is harmless
		l.inst = nil
	}
	l.use.Close()
	l.use = nil
}

func instanceLock(dir string, i int) string {
	if i == 0 {
		return filepath.Join(dir, "data.lock")
	}
	return filepath.Join(dir, "private-"+strconv.Itoa(i)+".lock")
}

func instanceData(dir string, i int) string {
	if i == 0 {
		return filepath.Join(dir, "data")
	}
	return filepath.Join(dir, "private-"+strconv.Itoa(i))
}

// lockFile opens path and flocks it with how, polling until ctx ends.
func lockFile(ctx context.Context, path string, how int, waiting func()) (*os.File, error) {
	var tick *time.Ticker
	for {
		f, ok, err := tryLock(path, how)
		if err != nil {
			return nil, err
		}
		if ok {
			return f, nil
		}
		if tick == nil {
			if waiting != nil {
				waiting()
			}
			tick = time.NewTicker(poll)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", path, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// tryLock opens path and flocks it with how without waiting; ok is false when another open
// file holds a conflicting lock.
func tryLock(path string, how int) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, true, nil
}

// same reports whether f is the file at path (not one renamed away since it was opened).
func same(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

func writeMeta(dir string, s Spec) error {
	now := time.Now().UTC()
	m := meta{Spec: s, Created: now, Used: now}
	if old, err := readMeta(dir); err == nil {
		m.Created = old.Created
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "meta.json.tmp-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(now.UnixNano(), 36))
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "meta.json"))
}

// touchMeta records now as the volume's last use; a failure only loses that hint.
func touchMeta(dir string) {
	if m, err := readMeta(dir); err == nil {
		writeMeta(dir, m.Spec)
	}
}

func readMeta(dir string) (*meta, error) {
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "meta.json"), err)
	}
	return &m, nil
}

// Info describes one volume, as `foundry cache ls` shows it.
type Info struct {
	Key       string    `json:"key"`
	Name      string    `json:"name"`
	Domain    string    `json:"domain"`
	Image     string    `json:"image"`
	Platform  string    `json:"platform"`
	Size      int64     `json:"size"`      // bytes it takes on the host's disk, all instances
	MaxSize   int64     `json:"max_size"`  // the bound of each instance, in bytes
	Instances int       `json:"instances"` // 1 + private instances
	Created   time.Time `json:"created"`
	Used      time.Time `json:"used"`
	InUse     bool      `json:"in_use"`
}

// List describes every volume, most recently used first. A directory without a readable
// meta.json is listed by its key alone.
func (st *Store) List() ([]Info, error) {
	ents, err := os.ReadDir(st.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(st.Dir, e.Name())
		in := Info{Key: e.Name()}
		if m, err := readMeta(dir); err == nil {
			in.Name, in.Domain, in.Image, in.Platform, in.Created, in.Used = m.Name, m.Domain, m.Image, m.Platform, m.Created, m.Used
			in.MaxSize = m.maxSize()
		}
		in.Size = du(dir)
		subs, _ := os.ReadDir(dir)
		for _, s := range subs {
			if s.IsDir() && (s.Name() == "data" || strings.HasPrefix(s.Name(), "private-")) {
				in.Instances++
			}
		}
		if f, ok, err := tryLock(filepath.Join(dir, "use.lock"), syscall.LOCK_EX); err == nil {
			in.InUse = !ok
			if ok {
				f.Close()
			}
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Used.Equal(out[j].Used) {
			return out[i].Used.After(out[j].Used)
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

// du is the bytes the files under dir take on the host's disk (allocated blocks: an image
// is sparse), not counting a mounted instance's files twice: they are in its image.
func du(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && p != dir && mounted(p) {
			return filepath.SkipDir
		}
		if fi, err := d.Info(); err == nil && d.Type().IsRegular() {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return n
}

// PruneOptions say which volumes Prune deletes. Volumes in use are never deleted.
type PruneOptions struct {
	All bool // every volume
	// Name, when set, deletes the volumes of that cache name (any image, platform, domain).
	Name string
	// OlderThan deletes the volumes last used longer ago than it (0: no age bound).
	OlderThan time.Duration
	// MaxBytes bounds the volumes' total size: the least recently used are deleted until
	// the rest fit (0: no size bound).
	MaxBytes int64
	DryRun   bool
	Now      time.Time // zero: time.Now()
}

// PruneResult says what Prune deleted, and what it kept because a step was using it.
type PruneResult struct {
	Removed []Info `json:"removed"`
	Busy    []Info `json:"busy"`
	Freed   int64  `json:"freed"`
}

// Prune deletes the volumes o selects, least recently used first, skipping those in use.
func (st *Store) Prune(o PruneOptions) (*PruneResult, error) {
	list, err := st.List()
	if err != nil {
		return nil, err
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	var total int64
	for _, in := range list {
		total += in.Size
	}
	res := &PruneResult{}
	// List is most recently used first: walk it backwards, oldest first.
	for i := len(list) - 1; i >= 0; i-- {
		in := list[i]
		pick := o.All || (o.Name != "" && in.Name == o.Name) ||
			(o.OlderThan > 0 && now.Sub(in.Used) > o.OlderThan) ||
			(o.MaxBytes > 0 && total > o.MaxBytes)
		if !pick {
			continue
		}
		removed, err := st.remove(in.Key, o.DryRun)
		if err != nil {
			return res, err
		}
		if !removed {
			res.Busy = append(res.Busy, in)
			continue
		}
		res.Removed = append(res.Removed, in)
		res.Freed += in.Size
		total -= in.Size
	}
	return res, nil
}

// remove deletes volume key unless a lease holds it, and reports whether it did (or, dry,
// would have).
func (st *Store) remove(key string, dry bool) (bool, error) {
	dir := filepath.Join(st.Dir, key)
	f, ok, err := tryLock(filepath.Join(dir, "use.lock"), syscall.LOCK_EX)
	if err != nil || !ok {
		return false, err
	}
	defer f.Close()
	if dry {
		return true, nil
	}
	// No lease holds it, but a process killed while it held one may have left an instance
	// mounted: deleting under a mount would empty the filesystem and leave it mounted.
	subs, _ := os.ReadDir(dir)
	for _, s := range subs {
		if p := filepath.Join(dir, s.Name()); s.IsDir() && mounted(p) {
			if err := mount.Unmount(p, 0); err != nil {
				return false, fmt.Errorf("unmounting %s: %w", p, err)
			}
		}
	}
	// Renamed away under the lock: an Acquire that opened use.lock before finds it is no
	// longer the file at the path, and makes the volume anew.
	trash := filepath.Join(st.Dir, ".trash-"+key+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(dir, trash); err != nil {
		return false, err
	}
	return true, removeAll(trash)
}

// removeAll removes dir, making read-only directories a step left writable first.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

package volume

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func spec(name, image string) Spec {
	return Spec{Project: "p", Domain: "project", Name: name, Image: "sha256:" + image, Platform: "linux/amd64"}
}

func acquire(t *testing.T, st *Store, s Spec, sharing string) *Lease {
	t.Helper()
	l, err := st.Acquire(context.Background(), s, sharing, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Release) // a test that fails half way leaves nothing mounted; a no-op after Release
	return l
}

// Same name, another image: another volume; same spec: the same data, kept between leases.
func TestVolumeKeyedByNameImageAndPlatform(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	a := acquire(t, st, spec("go-build", "aa"), Shared)
	os.WriteFile(filepath.Join(a.Path, "x"), []byte("from a"), 0o644)
	a.Release()
	b := acquire(t, st, spec("go-build", "bb"), Shared)
	defer b.Release()
	if b.Path == a.Path {
		t.Fatalf("another image got the same volume %s", b.Path)
	}
	if _, err := os.Stat(filepath.Join(b.Path, "x")); err == nil {
		t.Fatal("another image's volume holds the first image's file")
	}
	other := spec("go-build", "aa")
	other.Platform = "linux/arm64"
	if k1, _ := other.Key(); k1 == a.Key {
		t.Fatal("another platform has the same key")
	}
	other = spec("go-build", "aa")
	other.Domain = "recipe.r"
	if k1, _ := other.Key(); k1 == a.Key {
		t.Fatal("another trust domain has the same key")
	}
	again := acquire(t, st, spec("go-build", "aa"), Locked)
	defer again.Release()
	if got, _ := os.ReadFile(filepath.Join(again.Path, "x")); string(got) != "from a" {
		t.Fatalf("the volume did not keep its file: %q", got)
	}
}

// A locked user waits for the shared users and they for it; private users never wait.
func TestLockedWaitsPrivateDoesNot(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	s := spec("c", "aa")
	first := acquire(t, st, s, Locked)
	waited := make(chan struct{}, 1)
	got := make(chan *Lease)
	go func() {
		l, err := st.Acquire(context.Background(), s, Locked, func() { waited <- struct{}{} })
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("a second locked user did not wait")
	}
	// A shared user cannot get in either; a private one gets an instance of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if _, err := st.Acquire(ctx, s, Shared, nil); err == nil {
		t.Fatal("a shared user got a locked volume")
	}
	cancel()
	p := acquire(t, st, s, Private)
	if p.Instance == 0 || p.Path == first.Path {
		t.Fatalf("a private user got the locked instance: %+v", p)
	}
	p.Release()
	select {
	case <-got:
		t.Fatal("the second locked user got the volume while the first held it")
	case <-time.After(200 * time.Millisecond):
	}
	first.Release()
	second := <-got
	if second == nil || second.Path != first.Path {
		t.Fatalf("second lease %+v", second)
	}
	second.Release()
	// Free again: a private user takes instance 0.
	p = acquire(t, st, s, Private)
	defer p.Release()
	if p.Instance != 0 {
		t.Fatalf("a private user of an unused volume got instance %d", p.Instance)
	}
}

// TestHelperHoldLocked is not a test: run by TestKilledHolderLeavesNoLock as a process that
// takes a locked lease and then sleeps until it is killed.
func TestHelperHoldLocked(t *testing.T) {
	dir := os.Getenv("VOLUME_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	st := &Store{Dir: dir}
	l, err := st.Acquire(context.Background(), spec("c", "aa"), Locked, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(l.Path, "left"), []byte("by the killed holder"), 0o644)
	os.WriteFile(filepath.Join(dir, "held"), nil, 0o644)
	time.Sleep(time.Hour)
}

// A process killed while it holds a locked volume leaves it free: the kernel drops flocks.
func TestKilledHolderLeavesNoLock(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLocked$")
	cmd.Env = append(os.Environ(), "VOLUME_HELPER_DIR="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(dir, "held")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the helper never took the lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := &Store{Dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if _, err := st.Acquire(ctx, spec("c", "aa"), Locked, nil); err == nil {
		t.Fatal("got a locked volume another process holds")
	}
	cancel()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := st.Acquire(ctx, spec("c", "aa"), Locked, nil)
	if err != nil {
		t.Fatalf("the killed holder left the volume locked: %v", err)
	}
	// It left its instance mounted: the lease uses that mount (what it wrote is there, and
	// the volume is not mounted a second time over it), and unmounts it as the last user.
	if got, _ := os.ReadFile(filepath.Join(l.Path, "left")); string(got) != "by the killed holder" {
		t.Fatalf("the lease after a killed holder does not see its file: %q", got)
	}
	if n := mountsAt(t, l.Path); n != 1 {
		t.Fatalf("%d mounts at %s after a killed holder, want 1", n, l.Path)
	}
	l.Release()
	if mounted(l.Path) {
		t.Fatal("the last lease left the volume mounted")
	}
}

// mountsAt counts the mounts at dir in this process's mount table.
func mountsAt(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			n++
		}
	}
	return n
}

// A volume is a filesystem of its bound: a write past it fails with ENOSPC, Full says so,
// and the host holds no more than the bound for it.
func TestVolumeBoundedWhileMounted(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	s := spec("small", "aa")
	s.MaxSize = 16 << 20
	l := acquire(t, st, s, Shared)
	if !mounted(l.Path) || l.MaxSize != 16<<20 {
		t.Fatalf("lease %+v: mounted %v", l, mounted(l.Path))
	}
	if l.Full() {
		t.Fatal("an empty volume is full")
	}
	if ents, _ := os.ReadDir(l.Path); len(ents) != 0 {
		t.Fatalf("a new volume holds %v", ents)
	}
	f, err := os.Create(filepath.Join(l.Path, "big"))
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	for i := 0; i < 32 && werr == nil; i++ {
		_, werr = f.Write(make([]byte, 1<<20))
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("writing 32 MiB to a 16 MiB volume: %v, want ENOSPC", werr)
	}
	if !l.Full() {
		t.Fatal("Full is false after ENOSPC")
	}
	l.Release()
	list, err := st.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("list %+v %v", list, err)
	}
	if list[0].Size > 16<<20+64<<10 || list[0].MaxSize != 16<<20 {
		t.Fatalf("the volume takes %d bytes of the host's disk, bound %d", list[0].Size, list[0].MaxSize)
	}
	if k0, _ := spec("small", "aa").Key(); k0 == l.Key {
		t.Fatal("a bound given is not part of the key")
	}
}

// Shared leases share one mount; the last to go unmounts it.
func TestLastLeaseUnmounts(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	a := acquire(t, st, spec("c", "aa"), Shared)
	b := acquire(t, st, spec("c", "aa"), Shared)
	if a.Path != b.Path || mountsAt(t, a.Path) != 1 {
		t.Fatalf("two shared leases: %s %s, %d mounts", a.Path, b.Path, mountsAt(t, a.Path))
	}
	a.Release()
	if !mounted(b.Path) {
		t.Fatal("releasing one shared lease unmounted the other's volume")
	}
	b.Release()
	if mounted(b.Path) {
		t.Fatal("the last lease left the volume mounted")
	}
}

// A volume of a Foundry from before bounds (a plain directory) is replaced, empty, and the
// lease says so.
func TestDirectoryVolumeReplaced(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	key, _ := spec("c", "aa").Key()
	old := filepath.Join(st.Dir, key, "data")
	os.MkdirAll(old, 0o777)
	os.WriteFile(filepath.Join(old, "stale"), []byte("x"), 0o644)
	l := acquire(t, st, spec("c", "aa"), Shared)
	defer l.Release()
	if l.Path != old || !mounted(l.Path) || !strings.Contains(l.Note, "replaced by an empty volume") {
		t.Fatalf("lease %+v", l)
	}
	if _, err := os.Stat(filepath.Join(l.Path, "stale")); err == nil {
		t.Fatal("the old directory's file is still there")
	}
}

// Prune unmounts what a killed holder left mounted before deleting it.
func TestPruneUnmounts(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	l := acquire(t, st, spec("c", "aa"), Shared)
	path := l.Path
	// As a killed holder would: the locks go, the mount stays.
	l.inst.Close()
	l.use.Close()
	if !mounted(path) {
		t.Fatal("not mounted")
	}
	res, err := st.Prune(PruneOptions{All: true})
	if err != nil || len(res.Removed) != 1 {
		t.Fatalf("prune: %+v %v", res, err)
	}
	if n := mountsAt(t, path); n != 0 {
		t.Fatalf("prune left %d mounts at %s", n, path)
	}
}

// Prune deletes by name, age and size, least recently used first, and never a volume in use.
func TestPrune(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	fill := func(name string, n int) {
		l := acquire(t, st, spec(name, "aa"), Shared)
		os.WriteFile(filepath.Join(l.Path, "f"), make([]byte, n), 0o644)
		l.Release()
		time.Sleep(10 * time.Millisecond) // distinct last-use times
	}
	fill("old", 1000)
	fill("mid", 1000)
	fill("new", 1000)
	busy := acquire(t, st, spec("old", "aa"), Shared)
	// Under 1000 bytes only if all go; "old" was just used (this lease) and goes last,
	// but it is in use: it stays.
	res, err := st.Prune(PruneOptions{MaxBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 2 || res.Removed[0].Name != "mid" || res.Removed[1].Name != "new" || len(res.Busy) != 1 || res.Busy[0].Name != "old" {
		t.Fatalf("size-bounded prune removed %+v, busy %+v", res.Removed, res.Busy)
	}
	busy.Release()
	fill("new", 10)
	res, err = st.Prune(PruneOptions{Name: "new", DryRun: true})
	if err != nil || len(res.Removed) != 1 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if list, _ := st.List(); len(list) != 2 {
		t.Fatalf("a dry run deleted: %+v", list)
	}
	res, err = st.Prune(PruneOptions{OlderThan: time.Minute, Now: time.Now().Add(time.Hour)})
	if err != nil || len(res.Removed) != 2 {
		t.Fatalf("age prune: %+v %v", res, err)
	}
	if list, _ := st.List(); len(list) != 0 {
		t.Fatalf("left %+v", list)
	}
}

// An image whose filesystem lives on elsewhere (here a second mount of it, as a sandbox a
// killed foundry left running would hold) is mounted again through the same loop device:
// one filesystem writes the image, never two.
func TestImageStillInUseIsMountedOnce(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	l := acquire(t, st, spec("c", "aa"), Shared)
	other := t.TempDir()
	if err := syscall.Mount(l.Path, other, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(other, syscall.MNT_DETACH)
	l.Release()
	if mounted(l.Path) {
		t.Fatal("still mounted at the volume's path")
	}
	os.WriteFile(filepath.Join(other, "f"), []byte("still alive"), 0o644)
	l = acquire(t, st, spec("c", "aa"), Shared)
	defer l.Release()
	a, _ := os.Stat(l.Path)
	b, _ := os.Stat(other)
	if a.Sys().(*syscall.Stat_t).Dev != b.Sys().(*syscall.Stat_t).Dev {
		t.Fatal("the image was mounted through a second loop device while its filesystem was alive")
	}
	if got, _ := os.ReadFile(filepath.Join(l.Path, "f")); string(got) != "still alive" {
		t.Fatalf("read %q", got)
	}
}

// The last lease gives the blocks of deleted files back to the host, once they are more
// than trimSlack.
func TestReleaseTrims(t *testing.T) {
	st := &Store{Dir: t.TempDir()}
	l := acquire(t, st, spec("c", "aa"), Shared)
	os.WriteFile(filepath.Join(l.Path, "big"), make([]byte, trimSlack+32<<20), 0o644)
	l.Release()
	l = acquire(t, st, spec("c", "aa"), Shared)
	os.Remove(filepath.Join(l.Path, "big"))
	l.Release()
	if list, _ := st.List(); len(list) != 1 || list[0].Size > 8<<20 {
		t.Fatalf("after the 32 MiB file was deleted the volume takes %+v", list)
	}
}

// BenchmarkLease is the cost of one lease of an existing, unused volume: mount, trim and
// unmount of its 10 GiB image.
func BenchmarkLease(b *testing.B) {
	st := &Store{Dir: b.TempDir()}
	l, err := st.Acquire(context.Background(), spec("c", "aa"), Shared, nil)
	if err != nil {
		b.Fatal(err)
	}
	l.Release()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := st.Acquire(context.Background(), spec("c", "aa"), Shared, nil)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

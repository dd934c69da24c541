package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foundry-build/foundry/digest"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tempFiles(t *testing.T, s *Store) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(s.tmp, tempPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPutGet(t *testing.T) {
	s := newStore(t)
	data := []byte("hello, foundry")
	d, n, err := s.Put(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if d != digest.FromBytes(data) || n != int64(len(data)) {
		t.Fatalf("Put = %s, %d", d, n)
	}
	if s.Path(d) != filepath.Join(s.Root(), "sha256", d.Hex()) {
		t.Fatalf("Path = %s", s.Path(d))
	}
	got, err := s.Get(d)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if ok, err := s.Has(d); !ok || err != nil {
		t.Fatalf("Has = %v, %v", ok, err)
	}
	if size, err := s.Stat(d); size != n || err != nil {
		t.Fatalf("Stat = %d, %v", size, err)
	}
	fi, _ := os.Stat(s.Path(d))
	if fi.Mode().Perm() != blobMode {
		t.Fatalf("blob mode %v, want %v", fi.Mode().Perm(), os.FileMode(blobMode))
	}
	// Storing the same bytes again is a no-op that leaves no temporary file.
	if d2, err := s.PutBytes(data); err != nil || d2 != d {
		t.Fatalf("second put = %s, %v", d2, err)
	}
	absent := digest.FromBytes([]byte("absent"))
	if ok, err := s.Has(absent); ok || err != nil {
		t.Fatalf("Has(absent) = %v, %v", ok, err)
	}
	if _, err := s.Get(absent); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(absent) err = %v", err)
	}
	if _, err := s.Stat("sha256:../../etc/passwd"); err == nil {
		t.Fatal("Stat accepted a malformed digest")
	}
	if tf := tempFiles(t, s); len(tf) != 0 {
		t.Fatalf("temporary files left: %v", tf)
	}
}

func TestPutExpectedRefusesMismatch(t *testing.T) {
	s := newStore(t)
	good := []byte("the real bytes")
	want := digest.FromBytes(good)
	if _, err := s.PutExpected(strings.NewReader("tampered bytes"), want); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err = %v, want ErrDigestMismatch", err)
	}
	if ok, _ := s.Has(want); ok {
		t.Fatal("a mismatching blob became visible under the expected digest")
	}
	if ok, _ := s.Has(digest.FromBytes([]byte("tampered bytes"))); ok {
		t.Fatal("a mismatching blob became visible under its own digest")
	}
	if tf := tempFiles(t, s); len(tf) != 0 {
		t.Fatalf("temporary files left: %v", tf)
	}
	if n, err := s.PutExpected(bytes.NewReader(good), want); err != nil || n != int64(len(good)) {
		t.Fatalf("PutExpected(good) = %d, %v", n, err)
	}
	if _, err := s.PutExpected(bytes.NewReader(good), "sha256:XYZ"); err == nil {
		t.Fatal("accepted a malformed expected digest")
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("disk on fire")
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

func TestFailedPutLeavesNothing(t *testing.T) {
	s := newStore(t)
	if _, _, err := s.Put(&failingReader{n: 100000}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("err = %v", err)
	}
	if tf := tempFiles(t, s); len(tf) != 0 {
		t.Fatalf("temporary files left: %v", tf)
	}
	n := 0
	s.Walk(func(digest.Digest, int64, time.Time) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d blobs visible after a failed put", n)
	}
}

func TestGetDetectsCorruption(t *testing.T) {
	s := newStore(t)
	d, _ := s.PutBytes([]byte("original"))
	p := s.Path(d)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("bit rot!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(d); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Get of a corrupt blob: err = %v", err)
	}
	if err := s.Verify(d); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Verify of a corrupt blob: err = %v", err)
	}
}

// TestMain doubles as the helper process of TestCrashMidWrite.
func TestMain(m *testing.M) {
	if root := os.Getenv("FOUNDRY_STORE_TEST_CRASH_ROOT"); root != "" {
		s, err := Open(root)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		// Write half a blob, say so, then hang in Read until killed.
		r := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("a"), 1<<20)), hangingReader{})
		go func() {
			for len(tempFilesIn(root)) == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			fmt.Println("writing")
		}()
		s.Put(r)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

type hangingReader struct{}

func (hangingReader) Read([]byte) (int, error) { select {} }

func tempFilesIn(root string) []string {
	m, _ := filepath.Glob(filepath.Join(root, "tmp", tempPrefix+"*"))
	return m
}

func TestCrashMidWrite(t *testing.T) {
	root := filepath.Join(t.TempDir(), "blobs")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FOUNDRY_STORE_TEST_CRASH_ROOT="+root)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if strings.TrimSpace(string(buf[:n])) != "writing" {
		t.Fatalf("helper said %q", buf[:n])
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	tf := tempFiles(t, s)
	if len(tf) != 1 {
		t.Fatalf("want the crashed writer's temporary file, found %v", tf)
	}
	if fi, _ := os.Stat(tf[0]); fi.Size() == 0 {
		t.Fatal("the temporary file is empty; the test did not crash mid-write")
	}
	// Nothing is visible as a blob: not the partial bytes, not the full ones.
	half := digest.FromBytes(bytes.Repeat([]byte("a"), 1<<20))
	if ok, _ := s.Has(half); ok {
		t.Fatal("a half-written blob is visible")
	}
	seen := 0
	s.Walk(func(digest.Digest, int64, time.Time) error { seen++; return nil })
	if seen != 0 {
		t.Fatalf("%d blobs visible after a crash mid-write", seen)
	}
	// A young temporary file is spared by an age-limited sweep, removed by a full one.
	if k, err := s.Sweep(time.Hour); err != nil || k != 0 {
		t.Fatalf("Sweep(1h) = %d, %v", k, err)
	}
	if k, err := s.Sweep(0); err != nil || k != 1 {
		t.Fatalf("Sweep(0) = %d, %v", k, err)
	}
	if tf := tempFiles(t, s); len(tf) != 0 {
		t.Fatalf("temporary files left after sweep: %v", tf)
	}
	if _, err := s.PutBytes(bytes.Repeat([]byte("a"), 1<<20)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Has(half); !ok {
		t.Fatal("the blob is missing after a clean put")
	}
}

func TestConcurrentPuts(t *testing.T) {
	s := newStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				// Every goroutine writes the same shared blobs and some of its own.
				for _, c := range []string{fmt.Sprintf("shared %d", i), fmt.Sprintf("own %d %d", g, i)} {
					d, _, err := s.Put(strings.NewReader(c))
					if err != nil {
						errs <- err
						return
					}
					if got, err := s.Get(d); err != nil || string(got) != c {
						errs <- fmt.Errorf("read back %s: %q, %v", d, got, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	s.Walk(func(digest.Digest, int64, time.Time) error { n++; return nil })
	if n != 20+8*20 {
		t.Fatalf("%d blobs, want %d", n, 20+8*20)
	}
	if tf := tempFiles(t, s); len(tf) != 0 {
		t.Fatalf("temporary files left: %v", tf)
	}
}

// TestOpenSweepsLegacyTempFiles: stores made before blobs/tmp existed kept temporary files
// among the blobs. The first Open that creates tmp removes the stale ones there, and spares
// one young enough that a writer of an older version may still own it.
func TestOpenSweepsLegacyTempFiles(t *testing.T) {
	root := filepath.Join(t.TempDir(), "blobs")
	dir := filepath.Join(root, digest.Algorithm)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale, young := filepath.Join(dir, tempPrefix+"stale"), filepath.Join(dir, tempPrefix+"young")
	for _, p := range []string{stale, young} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a stale legacy temporary file survived Open: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("a young legacy temporary file was removed: %v", err)
	}
	// New writes never go among the blobs.
	if _, err := s.PutBytes([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(m) != 1 {
		t.Errorf("temporary files among the blobs: %v", m)
	}
}

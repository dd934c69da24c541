package seed

import (
	"context"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The helper process builds the seed described by its environment; the test kills it.
func TestHelperBuildProcess(t *testing.T) {
	if os.Getenv("SEED_HELPER_ROOT") == "" {
		t.Skip("helper for TestKilledBuild")
	}
	b := &Builder{Root: os.Getenv("SEED_HELPER_ROOT")}
	_, err := b.Build(context.Background(), &Spec{Platform: "linux/amd64",
		Layers: []Layer{{Dir: os.Getenv("SEED_HELPER_DIR"), At: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKilledBuild kills a building process (SIGKILL) while it writes a layer and while it
// unpacks the rootfs, and checks that nothing incomplete looks complete and that the next
// Build finishes the job with the same digest as an uninterrupted build.
func TestKilledBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~48 MB")
	}
	src := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	for i := range 12 {
		data := make([]byte, 4<<20)
		rng.Read(data)
		if err := os.WriteFile(filepath.Join(src, "f"+string(rune('a'+i))), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := &Spec{Platform: "linux/amd64", Layers: []Layer{{Dir: src, At: "/data"}}}
	clean, err := newBuilder(t).Build(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, phase := range []string{"blob-", "rootfs-"} {
		t.Run(strings.TrimSuffix(phase, "-"), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "images")
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBuildProcess$")
			cmd.Env = append(os.Environ(), "SEED_HELPER_ROOT="+root, "SEED_HELPER_DIR="+src)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) && !killed {
				ents, _ := os.ReadDir(filepath.Join(root, "tmp"))
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), phase) {
						_ = cmd.Process.Signal(syscall.SIGKILL)
						killed = true
					}
				}
				time.Sleep(time.Millisecond)
			}
			_ = cmd.Wait()
			if !killed {
				t.Skip("build finished before it could be killed")
			}
			st, err := openStore(root)
			if err != nil {
				t.Fatal(err)
			}
			idx, err := st.readIndex()
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range idx.Manifests {
				if phase == "blob-" || d.Digest.String() != clean.Digest {
					t.Errorf("index lists %s after a kill during %s", d.Digest, phase)
				}
			}
			if ents, _ := os.ReadDir(st.rootfs); len(ents) != 0 {
				t.Errorf("rootfs has %v after a kill", ents)
			}
			b := &Builder{Root: root}
			img, err := b.Build(context.Background(), spec)
			if err != nil {
				t.Fatalf("build after kill: %v", err)
			}
			if img.Digest != clean.Digest {
				t.Fatalf("digest after kill %s, clean %s", img.Digest, clean.Digest)
			}
			if fi, err := os.Stat(filepath.Join(img.Rootfs, "data/fl")); err != nil || fi.Size() != 4<<20 {
				t.Fatalf("rootfs after kill: %v", err)
			}
		})
	}
}

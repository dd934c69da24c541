package executors

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkWritableSpace is what the bounded writable space adds to a trivial step: mount
// the tmpfs, read statfs, copy an /out holding one small file (the unmount is not timed).
func BenchmarkWritableSpace(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting needs root")
	}
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		w, err := MountWritable(filepath.Join(dir, "rw"), 1<<30, 1<<18, 65534, 65534)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.Out(), "f"), []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		os.RemoveAll(out)
		os.Mkdir(out, 0o755)
		if f, err := w.Full(); err != nil || f != nil {
			b.Fatal(f, err)
		}
		if err := w.CopyOut(out); err != nil {
			b.Fatal(err)
		}
		// The executors unmount off the step's critical path (with the bundle's removal).
		b.StopTimer()
		if err := w.Unmount(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkStageInputs is what staging adds to the critical path of a step with two
// inputs, a file and a directory: two overlay mounts.
func BenchmarkStageInputs(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounting needs root")
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	ms := []Mount{{Source: filepath.Join(src, "f"), Target: "/in/f"}, {Source: filepath.Join(src, "d"), Target: "/in/d"}}
	for i := 0; i < b.N; i++ {
		st := filepath.Join(dir, "in")
		if _, err := StageInputs(st, ms); err != nil {
			b.Fatal(err)
		}
		// The executors unstage off the step's critical path (with the bundle's removal).
		b.StopTimer()
		if err := UnstageInputs(st); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// TestStageInputsKeepsContent: a staged file and directory read as their sources, and a
// writable mount is left where it is.
func TestStageInputsKeepsContent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "d", "x"), []byte("dx"), 0o644)
	os.WriteFile(filepath.Join(src, "f"), []byte("fx"), 0o644)
	ms := []Mount{{Source: filepath.Join(src, "f")}, {Source: filepath.Join(src, "d")}, {Source: filepath.Join(src, "d"), Writable: true}}
	st := filepath.Join(dir, "in")
	got, err := StageInputs(st, ms)
	if err != nil {
		t.Fatal(err)
	}
	defer UnstageInputs(st)
	if b, err := os.ReadFile(got[0].Source); err != nil || string(b) != "fx" || got[0].Source == ms[0].Source {
		t.Errorf("staged file %s: %q %v", got[0].Source, b, err)
	}
	if b, err := os.ReadFile(filepath.Join(got[1].Source, "x")); err != nil || string(b) != "dx" || got[1].Source == ms[1].Source {
		t.Errorf("staged dir %s: %q %v", got[1].Source, b, err)
	}
	if got[2].Source != ms[2].Source {
		t.Errorf("a writable mount was staged: %s", got[2].Source)
	}
	if err := os.WriteFile(filepath.Join(got[1].Source, "y"), nil, 0o644); err == nil {
		t.Errorf("a staged input is writable")
	}
	if err := UnstageInputs(st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st); !os.IsNotExist(err) {
		t.Errorf("staging directory left: %v", err)
	}
}

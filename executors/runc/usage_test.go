package runc

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/foundry-build/foundry/executors"
)

// The counters' files as the kernel writes them, for the hierarchy this host does not have.
func TestUsageCounters(t *testing.T) {
	write := func(dir, name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v2 := t.TempDir()
	write(v2, "cpu.stat", "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\nnr_periods 0\n")
	write(v2, "memory.peak", "67108864\n")
	old := t.TempDir() // Linux before 5.19: no memory.peak
	write(old, "cpu.stat", "usage_usec 5000\n")
	cpuacct, memory := t.TempDir(), t.TempDir()
	write(cpuacct, "cpuacct.usage", "987654321\n")
	write(memory, "memory.max_usage_in_bytes", "4194304\n")
	for _, c := range []struct {
		name  string
		paths map[string]string
		want  executors.Usage
	}{
		{"v2", map[string]string{"": v2}, executors.Usage{CPU: 123456 * time.Microsecond, PeakMemoryBytes: 64 << 20}},
		{"v1", map[string]string{"cpuacct": cpuacct, "memory": memory}, executors.Usage{CPU: 987654321, PeakMemoryBytes: 4 << 20}},
		// Hybrid: the v1 controllers hold the counters, the unified tree has none.
		{"hybrid", map[string]string{"": t.TempDir(), "cpuacct": cpuacct, "memory": memory}, executors.Usage{CPU: 987654321, PeakMemoryBytes: 4 << 20}},
		{"v2 before 5.19", map[string]string{"": old}, executors.Usage{CPU: 5 * time.Millisecond}},
	} {
		if got := cgroupDirs(c.paths).usage(); got != c.want {
			t.Errorf("%s: usage %+v, want %+v", c.name, got, c.want)
		}
	}
}

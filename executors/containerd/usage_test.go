package containerd

import (
	"testing"
	"time"

	cgroupsv1 "github.com/containerd/cgroups/stats/v1"
	cgroupsv2 "github.com/containerd/cgroups/v2/stats"
	"github.com/containerd/typeurl/v2"

	"github.com/foundry-build/foundry/executors"
)

// Both payloads the daemon may send, including the v2 one this host's daemon does not.
func TestUsageFromMetrics(t *testing.T) {
	for _, c := range []struct {
		name string
		m    any
		want executors.Usage
	}{
		{"v1", &cgroupsv1.Metrics{
			CPU:    &cgroupsv1.CPUStat{Usage: &cgroupsv1.CPUUsage{Total: 987654321, User: 1}},
			Memory: &cgroupsv1.MemoryStat{Usage: &cgroupsv1.MemoryEntry{Usage: 1 << 20, Max: 64 << 20}},
		}, executors.Usage{CPU: 987654321, PeakMemoryBytes: 64 << 20}},
		// The peak is read from memory.peak, which a cgroup that does not exist lacks.
		{"v2", &cgroupsv2.Metrics{
			CPU:    &cgroupsv2.CPUStat{UsageUsec: 123456},
			Memory: &cgroupsv2.MemoryStat{Usage: 64 << 20},
		}, executors.Usage{CPU: 123456 * time.Microsecond}},
		{"v1 without memory", &cgroupsv1.Metrics{CPU: &cgroupsv1.CPUStat{Usage: &cgroupsv1.CPUUsage{Total: 5}}}, executors.Usage{CPU: 5}},
	} {
		data, err := typeurl.MarshalAny(c.m)
		if err != nil {
			t.Fatal(err)
		}
		if got := usage(data, "/no-such-cgroup"); got != c.want {
			t.Errorf("%s (%s): usage %+v, want %+v", c.name, data.GetTypeUrl(), got, c.want)
		}
	}
}

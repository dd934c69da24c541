package runc

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/foundry-build/foundry/executors"
)

// Sandbox defaults, applied when the action leaves a field zero. They are shared by the runc
// and containerd executors so that a step behaves the same under both.
const (
	// DefaultUser is nobody:nogroup. A step never runs as root unless it asks for "0:0".
	DefaultUser = "65534:65534"
	// DefaultMemoryBytes bounds the step's cgroup (anonymous memory, page cache and the
	// /tmp and /dev/shm tmpfs pages it writes).
	DefaultMemoryBytes = 2 << 30
	// DefaultPids bounds the number of tasks (processes and threads) in the step's cgroup.
	DefaultPids = 1024
	// DefaultTimeout is the wall-clock deadline when the step gives none.
	DefaultTimeout = time.Hour
	// DefaultDiskBytes and DefaultInodes bound the writable space (/out and /tmp together,
	// executors.Writable), which is memory: half the default memory limit.
	DefaultDiskBytes = 1 << 30
	DefaultInodes    = 1 << 18
	// DefaultPath is added to the environment when it has no PATH, as Docker and containerd
	// do; without it the runtime cannot resolve argv[0].
	DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// ociVersion is the spec's ociVersion.
	ociVersion = "1.0.2"
	// cpuPeriod is the CFS period a CPU quota is expressed in.
	cpuPeriod = 100000
)

// EffectiveLimits returns l with every zero field replaced by the sandbox default. CPUs has no
// default: zero means no CFS quota (the step shares the machine's CPUs with its peers and the
// scheduler's parallelism bounds the total).
func EffectiveLimits(l executors.Limits) executors.Limits {
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.Pids <= 0 {
		l.Pids = DefaultPids
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.DiskBytes <= 0 {
		l.DiskBytes = DefaultDiskBytes
	}
	if l.Inodes <= 0 {
		l.Inodes = DefaultInodes
	}
	return l
}

// SpecOptions are the parts of the spec that depend on the runtime driving it, not the action.
type SpecOptions struct {
	// RootPath is root.path: the rootfs directory relative to the bundle ("rootfs" for both
	// runc bundles and containerd shims).
	RootPath string
	// CgroupsPath is linux.cgroupsPath: where the runtime creates the step's cgroup.
	CgroupsPath string
	// Seccomp adds containerd's default seccomp profile (the Docker profile).
	Seccomp bool
	// Annotations are copied into the spec (the containerd executor uses one to share shims).
	Annotations map[string]string
	// Egress is the network an action with network egress runs in (executors.StartEgress):
	// the spec joins its namespace by path and sets the proxy variables to its listener.
	Egress *executors.Egress
	// Writable is the host directory whose out and tmp are bound at /out and /tmp: the
	// action's bounded writable space (executors.Writable). Required.
	Writable string
}

// Spec builds the complete OCI runtime spec of the sandbox for a: read-only root, input mounts
// read-only, /out and /tmp read-write from o.Writable, a private network namespace with only
// loopback (runc brings lo up) unless a.Network is "host" (the host's) or "egress" (the namespace
// o.Egress made, its proxy variables set), a non-root user, no capabilities,
// no-new-privileges, the default masked and read-only /proc and /sys paths, and memory, pids and
// CPU limits. Processes are in new pid, ipc, uts and mount namespaces, so killing the init
// process (or the whole cgroup) ends every process of the step.
func Spec(a *executors.Action, o SpecOptions) (*specs.Spec, error) {
	if err := Validate(a); err != nil {
		return nil, err
	}
	uid, gid, err := ResolveUser(a)
	if err != nil {
		return nil, err
	}
	lim := EffectiveLimits(a.Limits)

	env := a.Env
	if env == nil {
		env = a.Image.Env
	}
	env = withDefaultPath(env)
	if a.Network == executors.NetworkEgress {
		if o.Egress == nil {
			return nil, fmt.Errorf("action %s: network %q without its network (executors.StartEgress)", a.ID, executors.NetworkEgress)
		}
		env = executors.ProxyEnv(env, o.Egress.ProxyURL())
	}
	cwd := a.Workdir
	if cwd == "" {
		cwd = a.Image.Workdir
	}
	if cwd == "" {
		cwd = "/"
	}

	if o.Writable == "" || !path.IsAbs(o.Writable) {
		return nil, fmt.Errorf("action %s: the writable space %q must be an absolute host path", a.ID, o.Writable)
	}
	rootPath := o.RootPath
	if rootPath == "" {
		rootPath = "rootfs"
	}
	mem := lim.MemoryBytes
	// Swap is left unset: with swap accounting off (Debian's default) a swap limit is an
	// error, and without swap the memory limit already bounds the step.
	res := &specs.LinuxResources{
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
		Memory:  &specs.LinuxMemory{Limit: &mem},
		Pids:    &specs.LinuxPids{Limit: lim.Pids},
	}
	if lim.CPUs > 0 {
		quota := int64(lim.CPUs * cpuPeriod)
		period := uint64(cpuPeriod)
		res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}

	nss := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace},
		{Type: specs.IPCNamespace},
		{Type: specs.UTSNamespace},
		{Type: specs.MountNamespace},
		// The step sees its own cgroup as the root of /sys/fs/cgroup, not the host's tree.
		{Type: specs.CgroupNamespace},
	}
	switch a.Network {
	case executors.NetworkHost:
	case executors.NetworkEgress:
		// The namespace made for it, with loopback up and the broker's listener in it.
		nss = append(nss, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: o.Egress.Path()})
	default:
		// An empty network namespace: runc configures loopback and nothing else.
		nss = append(nss, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}

	s := &specs.Spec{
		// Every field used here is in runtime-spec 1.0.2; crun 1.8 (Debian 12) refuses a
		// newer version string, runc accepts any 1.x.
		Version:  ociVersion,
		Hostname: "foundry",
		Root:     &specs.Root{Path: rootPath, Readonly: true},
		Process: &specs.Process{
			Args:            append([]string(nil), a.Argv...),
			Env:             env,
			Cwd:             cwd,
			User:            specs.User{UID: uid, GID: gid},
			NoNewPrivileges: true,
			// All sets empty: the process holds no capability, even as uid 0.
			Capabilities: &specs.LinuxCapabilities{},
			Rlimits:      []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Mounts: mounts(a, o.Writable),
		Linux: &specs.Linux{
			CgroupsPath: o.CgroupsPath,
			Resources:   res,
			Namespaces:  nss,
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
				"/sys/devices/virtual/powercap", "/proc/scsi",
			},
			ReadonlyPaths: []string{
				"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
			},
		},
	}
	if len(o.Annotations) > 0 {
		s.Annotations = make(map[string]string, len(o.Annotations))
		for k, v := range o.Annotations {
			s.Annotations[k] = v
		}
	}
	if o.Seccomp {
		s.Linux.Seccomp = seccomp.DefaultProfile(s)
	}
	return s, nil
}

// mounts lists the kernel filesystems, /out and /tmp (from the writable space at writable),
// and the inputs (read-only unless Writable). Parents come before children: the runtime
// mounts in order, and a mount at /src/a must land on top of /src.
func mounts(a *executors.Action, writable string) []specs.Mount {
	ms := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		// Read-only: runc fills /dev with the device nodes first and remounts it at the end,
		// so not even uid 0 can add files there.
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k", "ro"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		// POSIX shared memory needs a writable /dev/shm; it is small, and its pages count
		// against the step's memory limit.
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		// One bounded tmpfs holds both (executors.Writable); its pages count against the
		// memory limit too.
		{Destination: "/tmp", Type: "bind", Source: path.Join(writable, "tmp"), Options: []string{"rbind", "rw", "nosuid", "nodev"}},
		{Destination: "/out", Type: "bind", Source: path.Join(writable, "out"), Options: []string{"rbind", "rw", "nosuid", "nodev"}},
	}
	in := append([]executors.Mount(nil), a.Mounts...)
	sort.SliceStable(in, func(i, j int) bool {
		di, dj := strings.Count(path.Clean(in[i].Target), "/"), strings.Count(path.Clean(in[j].Target), "/")
		if di != dj {
			return di < dj
		}
		return in[i].Target < in[j].Target
	})
	for _, m := range in {
		mode := "ro"
		if m.Writable {
			mode = "rw"
		}
		ms = append(ms, specs.Mount{
			Destination: path.Clean(m.Target),
			Type:        "bind",
			Source:      m.Source,
			Options:     []string{"rbind", mode, "nosuid", "nodev"},
		})
	}
	return ms
}

// reserved are sandbox paths an input mount may not cover or sit under: the kernel
// filesystems and the writable areas, whose meaning must not change.
var reserved = []string{"/proc", "/dev", "/sys", "/tmp", "/out"}

// Validate checks the parts of a that every sandboxed executor relies on.
func Validate(a *executors.Action) error {
	if a == nil {
		return fmt.Errorf("nil action")
	}
	if !ValidID(a.ID) {
		return fmt.Errorf("action ID %q: want 1-64 characters of [a-z0-9-]", a.ID)
	}
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return fmt.Errorf("action %s: empty argv", a.ID)
	}
	if a.OutDir == "" || !path.IsAbs(a.OutDir) {
		return fmt.Errorf("action %s: OutDir %q must be an absolute host path", a.ID, a.OutDir)
	}
	if fi, err := os.Stat(a.OutDir); err != nil {
		return fmt.Errorf("action %s: OutDir: %w", a.ID, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("action %s: OutDir %s is not a directory", a.ID, a.OutDir)
	}
	if a.Workdir != "" && !path.IsAbs(a.Workdir) {
		return fmt.Errorf("action %s: workdir %q must be absolute", a.ID, a.Workdir)
	}
	switch a.Network {
	case "", executors.NetworkNone, executors.NetworkHost, executors.NetworkEgress:
	default:
		return fmt.Errorf("action %s: unknown network policy %q (want %q, %q or %q)", a.ID, a.Network, executors.NetworkNone, executors.NetworkEgress, executors.NetworkHost)
	}
	if (a.Network == executors.NetworkEgress) != (a.Egress != nil) {
		return fmt.Errorf("action %s: network %q and an Egress function go together", a.ID, executors.NetworkEgress)
	}
	seen := map[string]bool{}
	for _, m := range a.Mounts {
		t := path.Clean(m.Target)
		if !path.IsAbs(m.Target) || t == "/" {
			return fmt.Errorf("action %s: mount target %q must be an absolute path other than /", a.ID, m.Target)
		}
		for _, r := range reserved {
			if t == r || strings.HasPrefix(t, r+"/") {
				return fmt.Errorf("action %s: mount target %s is reserved (%s)", a.ID, t, r)
			}
		}
		if seen[t] {
			return fmt.Errorf("action %s: two mounts at %s", a.ID, t)
		}
		seen[t] = true
		if !path.IsAbs(m.Source) {
			return fmt.Errorf("action %s: mount source %q must be an absolute host path", a.ID, m.Source)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return fmt.Errorf("action %s: mount source for %s: %w", a.ID, t, err)
		}
	}
	return nil
}

// ValidID reports whether id is safe as a container name: 1-64 bytes of [a-z0-9-].
func ValidID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ResolveUser returns the uid and gid the step runs as: a.User, else the image's user when it
// is numeric and not root, else DefaultUser. Names are not resolved: a name would have to be
// looked up in the image's /etc/passwd, which the engine does not trust to pick privileges.
func ResolveUser(a *executors.Action) (uint32, uint32, error) {
	u := a.User
	if u == "" {
		if iu, ig, err := parseUser(a.Image.User); err == nil && iu != 0 {
			return iu, ig, nil
		}
		u = DefaultUser
	}
	uid, gid, err := parseUser(u)
	if err != nil {
		return 0, 0, fmt.Errorf("action %s: user %q: %w", a.ID, u, err)
	}
	return uid, gid, nil
}

// parseUser parses "uid:gid" or "uid" (gid = uid).
func parseUser(s string) (uint32, uint32, error) {
	us, gs, ok := strings.Cut(s, ":")
	if !ok {
		gs = us
	}
	uid, err := strconv.ParseUint(us, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("want numeric uid:gid")
	}
	gid, err := strconv.ParseUint(gs, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("want numeric uid:gid")
	}
	return uint32(uid), uint32(gid), nil
}

func withDefaultPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return append([]string(nil), env...)
		}
	}
	return append(append([]string(nil), env...), DefaultPath)
}

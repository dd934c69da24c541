package temporal

import (
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// Names registered with Temporal: they are the protocol between an apply and its workers.
const (
	WorkflowName = "foundry.apply"
	ActivityName = "foundry.run-action" // a worker runs one action
	ReplyName    = "foundry.reply"      // the apply takes one action's outcome
	SignalRun    = "run"                // an apply hands the workflow one action (a Request)
	SignalCancel = "cancel"             // an apply stops one action (its ID), when it is interrupted
	SignalDone   = "done"               // the apply has finished: the workflow completes
)

// Error types of the activity that Temporal must not retry: the step itself is at fault.
const (
	ErrNotStarted = "NotStarted" // the step's program could not be started
	ErrBadRequest = "BadRequest" // the request cannot be run anywhere (a malformed action)
)

// DefaultTaskQueue is the workflows' queue when -task-queue is not given.
const DefaultTaskQueue = "foundry"

// ActivityQueue is the task queue of the steps written for platform ("os/arch") under the
// workflows' queue: "foundry-linux-amd64" for "foundry". A worker polls the queue of its
// own platform only, so a step never lands on a machine that cannot run it.
func ActivityQueue(queue, platform string) string {
	return queue + "-" + strings.NewReplacer("/", "-").Replace(platform)
}

// Input starts the workflow of one apply.
type Input struct {
	Project string // the project directory on the apply's machine, for operators reading the UI
	// ReplyQueue is the apply's own task queue: each action's outcome is handed back to
	// the apply as a ReplyName activity there.
	ReplyQueue string
	// HeartbeatTimeout is how long a running step's worker may stay silent before Temporal
	// gives the step to another worker.
	HeartbeatTimeout time.Duration
	// MaxHistory is the history length past which the workflow continues as new: it stops
	// starting actions, waits for those in flight, and carries the rest to the next run.
	MaxHistory int
	// MaxPending bounds the actions in flight at once (Temporal allows 2,000 pending
	// activities per execution); more wait in the workflow for a free slot.
	MaxPending int
	// Queued are actions received but not started by an earlier run, carried over when it
	// continued as new.
	Queued []Request
}

// Reply is one action's outcome, handed back to the apply.
type Reply struct {
	ID     string  `json:"id"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
	// NotStarted marks an Error that is the step's own (its program could not start).
	NotStarted bool `json:"not_started,omitempty"`
}

// Content is a blob or a tree manifest in the shared store, with its size (fetches are
// checked against both).
type Content struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
	Tree   bool          `json:"tree,omitempty"`
}

// Mount is one of a step's inputs: content mounted read-only at Target.
type Mount struct {
	Target  string  `json:"target"`
	Content Content `json:"content"`
	Mode    uint32  `json:"mode,omitempty"` // a file's mode (0644 or 0755)
}

// Request is one action, everything named by content: what a worker needs besides the
// registry. It carries no host path of the apply's machine.
type Request struct {
	ID       string   `json:"id"` // the logical action: activity ID
	Platform string   `json:"platform"`
	Registry string   `json:"registry"` // the shared store's address (registry.Open)
	Image    string   `json:"image"`    // the image manifest's digest, in Registry
	Argv     []string `json:"argv"`
	Env      []string `json:"env"`
	Workdir  string   `json:"workdir,omitempty"`
	User     string   `json:"user,omitempty"`
	Mounts   []Mount  `json:"mounts,omitempty"`
	Network  string   `json:"network"`
	Limits   Limits   `json:"limits"`
	// LogBytes bounds what the worker keeps of stdout and of stderr (the apply bounds them
	// again as it writes them to its own logs).
	LogBytes int64 `json:"log_bytes"`
}

// Limits are executors.Limits as they travel.
type Limits struct {
	MemoryBytes int64         `json:"memory_bytes,omitempty"`
	CPUs        float64       `json:"cpus,omitempty"`
	Pids        int64         `json:"pids,omitempty"`
	Timeout     time.Duration `json:"timeout_ns,omitempty"`
	DiskBytes   int64         `json:"disk_bytes,omitempty"`
	Inodes      int64         `json:"inodes,omitempty"`
}

// Full is executors.Full as it travels.
type Full struct {
	Limit string `json:"limit"`
	Bound int64  `json:"bound"`
	Where string `json:"where"`
}

// Result is what the worker's executor observed, and where the step's /out and logs are.
type Result struct {
	ExitCode   int           `json:"exit_code"`
	Signal     string        `json:"signal,omitempty"`
	TimedOut   bool          `json:"timed_out,omitempty"`
	OOMKilled  bool          `json:"oom_killed,omitempty"`
	Full       *Full         `json:"full,omitempty"` // the writable space's bound it reached
	Started    time.Time     `json:"started"`
	Finished   time.Time     `json:"finished"`
	CPU        time.Duration `json:"cpu_ns,omitempty"`
	PeakMemory int64         `json:"peak_memory_bytes,omitempty"`
	Out        Content       `json:"out"` // /out as a tree
	Stdout     Content       `json:"stdout"`
	Stderr     Content       `json:"stderr"`
	Executor   string        `json:"executor"`
	Isolation  string        `json:"isolation"`
	Worker     string        `json:"worker"`
	Attempt    int32         `json:"attempt"`
}

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/plan"
	"github.com/foundry-build/foundry/engine/state"
)

// The read-only tools over the project: each calls the code of the command of its name
// (validate: loadGraph; plan: planWithCache; status: statusOf; explain: explainNode; logs:
// nodeLogs; verify: verifySubject and verifySubjects; capabilities: capabilityRows) and
// returns a structured result. None takes a path, a key, a grant or a budget.

// addressProp is the input property naming a node by its graph address.
var addressProp = patternProp("A node address as plan and status show it, for example step.build or recipe.int-sort-go.step.build.", `^[a-z]+\.[^\x00-\x1f]+$`, 512)

func (s *mcpServer) addProjectTools() {
	addTool(s, &mcp.Tool{
		Name:         "validate",
		Description:  "Check the project's configuration: syntax, types, references, cycles. Runs nothing and writes nothing. The result says whether it is valid and lists every diagnostic with its file, line and column.",
		InputSchema:  inputObject(nil),
		OutputSchema: outputSchema[validateOut](),
		Annotations:  readOnly("Validate the configuration"),
	}, s.validate)
	addTool(s, &mcp.Tool{
		Name:        "plan",
		Description: "Say what apply would do, without running anything: counts, and every step, seed, recipe and capability with its status (run, cached, build, registry, missing, reconstruct, alternative) and the reason.",
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"targets": stringsProp("Restrict the plan to these nodes and what they need (as plan -target).", addressProp, 64),
		}),
		OutputSchema: outputSchema[planOut](),
		Annotations:  readOnly("Plan"),
	}, s.plan)
	addTool(s, &mcp.Tool{
		Name:        "status",
		Description: "List the project's recent applies, newest first, and for one of them (default the latest) every node with how it ended and every capability event (suites evaluated, candidates rejected, admissions, pins).",
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"run":   patternProp("A run ID from the list of runs; default the latest.", `^[0-9A-Za-z-]+$`, 64),
			"limit": intProp("How many recent runs to list (default 10).", 1, 100),
		}),
		OutputSchema: outputSchema[statusOut](),
		Annotations:  readOnly("Status of recent runs"),
	}, s.status)
	addTool(s, &mcp.Tool{
		Name:        "run_summary",
		Description: "Return the summary of one apply (default the latest), as foundry report shows it: every node settled with its outcome (executed, cached, built, settled, fetched, failed, skipped, interrupted), when and on which executor slot, what it needed and why it failed or was skipped; the critical path; the steps' cache keys and exit codes; and the capability events (suites evaluated, candidates rejected with their counterexamples, admissions, pins).",
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"run": patternProp("A run ID (see the status tool); default the latest.", `^[0-9A-Za-z-]+$`, 64),
		}),
		OutputSchema: outputSchema[runReport](),
		Annotations:  readOnly("Summary of a run"),
	}, s.runSummary)
	addTool(s, &mcp.Tool{
		Name:        "explain",
		Description: "Say why a step or check will run or is cached: its cache key, and every field of its definition that changed since it last completed, with the old and new values.",
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"node": addressProp,
		}, "node"),
		OutputSchema: outputSchema[plan.Explanation](),
		Annotations:  readOnly("Explain a step"),
	}, s.explain)
	addTool(s, &mcp.Tool{
		Name:        "logs",
		Description: fmt.Sprintf("Return what a step wrote to stdout and stderr the last time it ran, as recorded by the apply (at most the last %d KiB of each). Only a node's recorded logs: the node is looked up by its address among the nodes that ran, never as a path.", maxToolLog>>10),
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"node":   addressProp,
			"stream": enumProp("Which stream (default both).", "stdout", "stderr", "both"),
		}, "node"),
		OutputSchema: outputSchema[logsOut](),
		Annotations:  readOnly("Logs of a step"),
	}, s.logs)
	addTool(s, &mcp.Tool{
		Name:        "verify",
		Description: "Check signed evidence with the operator's trusted keys, as foundry verify does. Give capability: the admitted version the project's registry holds for it is verified along its admission chain (verification summary, sealed test result, provenance). Or give digest: an artifact Foundry built (a step output), verified against the project's attestations. Exactly one of the two.",
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"capability": patternProp("A capability of the project, by name (int-sort) or address (capability.int-sort).", `^(capability\.)?[A-Za-z_][A-Za-z0-9_-]*$`, 128),
			"digest":     patternProp("An artifact's digest, sha256:<64 hex>.", `^sha256:[0-9a-f]{64}$`, 71),
		}),
		OutputSchema: outputSchema[verifyOut](),
		Annotations:  readOnly("Verify evidence"),
	}, s.verify)
	addTool(s, &mcp.Tool{
		Name:        "capabilities",
		Description: "Search the project's capability contracts by name: each with its summary, contract digest, the admitted version the registry holds for it and whether its evidence verifies with the trusted keys. Only a verified, unquarantined version is used by plan and apply.",
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"name": patternProp("Part of a capability's name, matched without regard to case; default all.", `^[A-Za-z0-9_-]+$`, 128),
		}),
		OutputSchema: outputSchema[capabilitiesOut](),
		Annotations:  readOnly("Search capabilities"),
	}, s.capabilities)
}

type validateOut struct {
	Valid       bool             `json:"valid"`
	Nodes       int              `json:"nodes" jsonschema:"how many nodes the compiled graph has (0 when invalid)"`
	Diagnostics []jsonDiagnostic `json:"diagnostics"`
}

func (s *mcpServer) validate(ctx context.Context, _ struct{}) (validateOut, error) {
	env, _ := s.toolEnv()
	g, diags, _ := s.load(env)
	out := validateOut{Valid: g != nil, Diagnostics: toJSONDiagnostics(diags)}
	if g != nil {
		out.Nodes = len(g.Nodes)
	}
	return out, nil
}

type planIn struct {
	Targets []string `json:"targets,omitempty"`
}

type planOut struct {
	Project      string              `json:"project"`
	PlanDigest   string              `json:"plan_digest"`
	Summary      plan.Summary        `json:"summary"`
	Targets      []string            `json:"targets,omitempty"`
	Nodes        []planNodeOut       `json:"nodes"`
	Capabilities []planCapabilityOut `json:"capabilities"`
}

type planNodeOut struct {
	Address string `json:"address"`
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
}

type planCapabilityOut struct {
	Address        string `json:"address"`
	ContractDigest string `json:"contract_digest"`
	Status         string `json:"status"`
	Recipe         string `json:"recipe,omitempty" jsonschema:"the recipe that builds it, when it is built"`
	Pinned         string `json:"pinned,omitempty" jsonschema:"the admitted version it is pinned to, when it comes from the registry"`
	Reason         string `json:"reason,omitempty"`
	Registry       string `json:"registry,omitempty" jsonschema:"why the registry's version is not used, or is used all the same"`
	Reachable      bool   `json:"reachable"`
	Ready          bool   `json:"ready"`
}

func (s *mcpServer) plan(ctx context.Context, in planIn) (planOut, error) {
	env, _ := s.toolEnv()
	g, _, err := s.load(env)
	if err != nil {
		return planOut{}, err
	}
	p, err := planWithCache(s.cfg.dir, g, s.cfg.trust, plan.Selection{Targets: in.Targets})
	if err != nil {
		return planOut{}, err
	}
	out := planOut{Project: p.Project.Name, PlanDigest: string(p.Digest), Summary: p.Summary, Targets: p.Targets,
		Nodes: []planNodeOut{}, Capabilities: []planCapabilityOut{}}
	for _, n := range p.Nodes {
		out.Nodes = append(out.Nodes, planNodeOut{Address: n.Address, Kind: string(n.Kind), Status: n.Status, Reason: n.Reason})
	}
	for _, c := range p.Capabilities {
		pc := planCapabilityOut{Address: c.Address, ContractDigest: string(c.ContractDigest), Status: c.Status, Recipe: c.Recipe,
			Reason: c.Reason, Registry: c.Registry, Reachable: c.Reachable, Ready: c.Ready}
		if c.Pinned != nil {
			pc.Pinned = c.Pinned.Ref
		}
		out.Capabilities = append(out.Capabilities, pc)
	}
	return out, nil
}

type statusIn struct {
	Run   string `json:"run,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// statusOut is statusReport without what is about the operator's machine rather than the
// project (each run's command line, host and process ID).
type statusOut struct {
	Runs             []statusRun             `json:"runs"`
	Run              string                  `json:"run" jsonschema:"the run whose nodes are listed; empty when there are no runs"`
	Nodes            []state.Node            `json:"nodes"`
	CapabilityEvents []state.CapabilityEvent `json:"capability_events"`
}

type statusRun struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Started    string `json:"started"`
	Finished   string `json:"finished,omitempty" jsonschema:"empty while it runs"`
	PlanDigest string `json:"plan_digest"`
}

func (s *mcpServer) status(ctx context.Context, in statusIn) (statusOut, error) {
	ws, err := s.existingWorkspace()
	if err != nil {
		return statusOut{}, err
	}
	defer ws.Close()
	limit := in.Limit
	if limit == 0 {
		limit = 10
	}
	rep, err := statusOf(ctx, ws, in.Run, limit)
	if err != nil {
		return statusOut{}, err
	}
	out := statusOut{Runs: []statusRun{}, Run: rep.Run, Nodes: rep.Nodes, CapabilityEvents: rep.CapabilityEvents}
	if out.Nodes == nil {
		out.Nodes = []state.Node{}
	}
	for _, r := range rep.Runs {
		sr := statusRun{ID: r.ID, Status: string(r.Status), Started: r.Started.UTC().Format(timeFormat), PlanDigest: string(r.Plan)}
		if !r.Finished.IsZero() {
			sr.Finished = r.Finished.UTC().Format(timeFormat)
		}
		out.Runs = append(out.Runs, sr)
	}
	return out, nil
}

type runSummaryIn struct {
	Run string `json:"run,omitempty"`
}

func (s *mcpServer) runSummary(ctx context.Context, in runSummaryIn) (runReport, error) {
	ws, err := s.existingWorkspace()
	if err != nil {
		return runReport{}, err
	}
	defer ws.Close()
	rep, err := runReportOf(ctx, ws, in.Run, s.cfg.trust)
	if err != nil {
		return runReport{}, err
	}
	return *rep, nil
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

type nodeIn struct {
	Node string `json:"node"`
}

func (s *mcpServer) explain(ctx context.Context, in nodeIn) (*plan.Explanation, error) {
	env, _ := s.toolEnv()
	g, _, err := s.load(env)
	if err != nil {
		return nil, err
	}
	// explain reads what applies recorded; a project never applied has no state, and a
	// read-only tool does not create it.
	ws, err := s.existingWorkspace()
	if err != nil {
		return nil, err
	}
	ws.Close()
	return explainNode(ctx, s.cfg.dir, g, in.Node, s.cfg.trust, plan.Selection{})
}

// maxToolLog bounds each stream the logs tool returns: the tail is kept, where a failure
// shows.
const maxToolLog = 64 << 10

type logsIn struct {
	Node   string `json:"node"`
	Stream string `json:"stream,omitempty"`
}

type logsOut struct {
	Node            string `json:"node"`
	Run             string `json:"run" jsonschema:"the run of its last execution"`
	Status          string `json:"status"`
	Stdout          string `json:"stdout,omitempty"`
	Stderr          string `json:"stderr,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty" jsonschema:"only the end of stdout is returned"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty" jsonschema:"only the end of stderr is returned"`
}

func (s *mcpServer) logs(ctx context.Context, in logsIn) (logsOut, error) {
	ws, err := s.existingWorkspace()
	if err != nil {
		return logsOut{}, err
	}
	defer ws.Close()
	l, err := nodeLogs(ctx, ws, in.Node)
	if err != nil {
		return logsOut{}, err
	}
	out := logsOut{Node: in.Node, Run: l.Node.RunID, Status: string(l.Node.Status)}
	read := func(name string, d digest.Digest, text *string, cut *bool) error {
		if d == "" {
			return nil
		}
		b, err := logBytes(ws, in.Node, name, d)
		if err != nil {
			return err
		}
		if len(b) > maxToolLog {
			b, *cut = b[len(b)-maxToolLog:], true
		}
		*text = strings.ToValidUTF8(string(b), "\uFFFD")
		return nil
	}
	if in.Stream != "stderr" {
		if err := read("stdout", l.Stdout, &out.Stdout, &out.StdoutTruncated); err != nil {
			return logsOut{}, err
		}
	}
	if in.Stream != "stdout" {
		if err := read("stderr", l.Stderr, &out.Stderr, &out.StderrTruncated); err != nil {
			return logsOut{}, err
		}
	}
	return out, nil
}

package main

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/plan"
)

// The apply tool is served only when the operator started the server with -allow apply: that
// is the approval 'foundry apply' asks for on a terminal. It runs applyProject, the code of
// 'foundry apply', under the server's settings. Its only argument is which nodes to apply;
// grants, budgets, keys, variables and the executor are not arguments, and the input schema
// refuses any other property.

type applyIn struct {
	Targets []string `json:"targets,omitempty"`
}

type applyOut struct {
	Outcome  string         `json:"outcome" jsonschema:"complete, failed, interrupted or not_run (refused before anything ran: the report says why)"`
	ExitCode int            `json:"exit_code" jsonschema:"what foundry apply would have exited with"`
	RunID    string         `json:"run,omitempty"`
	Executed int            `json:"executed"`
	Cached   int            `json:"cached"`
	Built    int            `json:"built"`
	Missing  int            `json:"missing" jsonschema:"nodes the plan could not produce"`
	Failed   []applyFailure `json:"failed"`
	Skipped  []string       `json:"skipped" jsonschema:"nodes not run because something they need failed"`
	Report   string         `json:"report" jsonschema:"what foundry apply printed (at most its last 64 KiB)"`
}

type applyFailure struct {
	Node     string `json:"node"`
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

func (s *mcpServer) addApplyTool() {
	t := &mcp.Tool{
		Name: "apply",
		Description: "Plan the project and carry the plan out, auto-approved: each step runs in a sandbox, cached results are reused, " +
			"capabilities are built, evaluated on their sealed suites and admitted only if they pass, with signed evidence. " +
			"It runs under the operator's grants, budgets, keys and executor, which no argument can change. " +
			"A failed apply is a tool error whose result says what failed.",
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"targets": stringsProp("Apply only these nodes and what they need (as apply -target).", addressProp, 64),
		}),
		OutputSchema: outputSchema[applyOut](),
		// Not read-only: it runs the recipes' steps, writes the project's state, cache and
		// attestations, and publishes admitted capabilities. Destructive: an admission
		// moves the registry's contract tag to the new version. Not idempotent: each call
		// records a run, and a step that failed runs again. Open world: the registry may be
		// remote, and granted steps reach the hosts their grants name.
		Annotations: &mcp.ToolAnnotations{Title: "Apply", ReadOnlyHint: false, IdempotentHint: false,
			DestructiveHint: jsonschema.Ptr(true), OpenWorldHint: jsonschema.Ptr(true)},
	}
	mcp.AddTool(s.srv, t, func(ctx context.Context, _ *mcp.CallToolRequest, in applyIn) (*mcp.CallToolResult, applyOut, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		out, err := s.apply(ctx, in)
		if err != nil {
			return nil, applyOut{}, err
		}
		// An apply may have admitted a capability: its tool appears.
		s.refreshCapabilityTools(ctx)
		// A failed apply still has a structured result: the model needs what failed.
		return &mcp.CallToolResult{IsError: out.ExitCode != exitOK}, out, nil
	})
	s.tools = append(s.tools, t.Name)
}

func (s *mcpServer) apply(ctx context.Context, in applyIn) (applyOut, error) {
	env, buf := s.toolEnv()
	// The caches are saved once the apply has made the state directory, as by apply.
	g, diags, saveCaches := loadGraphUnsaved(env, s.cfg.dir, &s.cfg.vars, true)
	if g == nil {
		return applyOut{}, diagnosticsError(diags)
	}
	o, code := applyProject(ctx, env, applyRequest{
		dir: s.cfg.dir, g: g, sel: plan.Selection{Targets: in.Targets}, trust: s.cfg.trust,
		signingKey: s.cfg.signingKey, parallelism: s.cfg.parallelism, ex: &s.cfg.ex, grants: s.cfg.grants, saveCaches: saveCaches,
		events: func() (func(event.Event), func(), error) { return func(event.Event) {}, func() {}, nil },
	})
	out := applyOut{Outcome: "complete", ExitCode: code, Failed: []applyFailure{}, Skipped: []string{}}
	if o.plan != nil {
		out.Missing = o.plan.Summary.Missing
	}
	switch res := o.result; {
	case res == nil:
		out.Outcome = "not_run"
	default:
		out.RunID, out.Executed, out.Cached, out.Built = res.RunID, res.Executed, res.Cached, res.Built
		for _, f := range res.Failed {
			out.Failed = append(out.Failed, applyFailure{Node: f.Node, Error: f.Error(), ExitCode: f.ExitCode})
		}
		out.Skipped = append(out.Skipped, res.Skipped...)
		if interrupted(ctx) != nil || ctx.Err() != nil {
			out.Outcome = "interrupted"
		} else if code != exitOK {
			out.Outcome = "failed"
		}
	}
	r := buf.Bytes()
	if len(r) > maxToolLog {
		r = r[len(r)-maxToolLog:]
	}
	out.Report = string(r)
	return out, nil
}

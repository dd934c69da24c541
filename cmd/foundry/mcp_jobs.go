package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/foundry-build/foundry/engine/reconstruct"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
)

// The reconstruction tools (spec/mcp.md): a model acts as an untrusted builder of a job whose
// reconstruct block takes proposals from outside. jobs and job_brief read; propose, served
// only with -allow propose, sends a proposal into the job's loop exactly as
// `foundry jobs propose` does (reconstruct.SubmitProposal), charged to the same budget. A brief
// holds what a builder's /job holds, never a sealed case; a proposal becomes a candidate
// only through the package block and is admitted only on a sealed pass, by the apply that
// runs the round. None of these tools takes the server's lock: the apply that waits for a
// proposal may be an apply tool call in flight.

// jobProp names a job by its ID.
var jobProp = patternProp("A job ID as the jobs tool lists it, job-<16 hex>.", `^job-[0-9a-f]{16}$`, 20)

// maxProposalBytes bounds the files of one proposal sent over MCP; the job's scratch
// budget bounds what a round may hold, and is checked again when the round takes it.
const maxProposalBytes = 16 << 20

func (s *mcpServer) addJobTools() {
	mcp.AddTool(s.srv, &mcp.Tool{
		Name: "jobs",
		Description: "List the project's reconstruction jobs: each acquires a capability that has no admitted version and no recipe, round by round, from proposals judged by the evaluator. " +
			"For each: its status (open, admitted, exhausted, unresolved), the rounds so far, the budget and what it spent, and the round that waits for a proposal, if one does.",
		InputSchema:  inputObject(nil),
		OutputSchema: outputSchema[jobsOut](),
		Annotations:  readOnly("Reconstruction jobs"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, jobsOut, error) {
		out, err := s.jobs(ctx)
		return nil, out, err
	})
	mcp.AddTool(s.srv, &mcp.Tool{
		Name: "job_brief",
		Description: "Read the brief of a job's round that waits for a proposal: the files a builder would find at /job: contract.json, schemas/, cases/dev and cases/repair, " +
			"counterexamples/N.json (each earlier round's failure: input, expected, got) and round.json. Never a sealed case: those stay with the evaluator.",
		InputSchema:  inputObject(map[string]*jsonschema.Schema{"job": jobProp}, "job"),
		OutputSchema: outputSchema[briefOut](),
		Annotations:  readOnly("Brief of a job's round"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in jobIn) (*mcp.CallToolResult, briefOut, error) {
		out, err := s.brief(ctx, in.Job)
		return nil, out, err
	})
	s.tools = append(s.tools, "jobs", "job_brief")
}

func (s *mcpServer) addProposeTool() {
	file := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
		"path":       patternProp("Where the file is in the proposal, relative: out/tool for the output /out/tool.", `^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`, 256),
		"content":    &jsonschema.Schema{Type: "string", Description: "The file's text.", MaxLength: jsonschema.Ptr(maxProposalBytes)},
		"executable": &jsonschema.Schema{Type: "boolean", Description: "Whether the file is a program (mode 0755; else 0644)."},
	}, Required: []string{"path", "content"}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	mcp.AddTool(s.srv, &mcp.Tool{
		Name: "propose",
		Description: "Send a proposal for a job's round that waits for one: the files the job's proposals block names (see job_brief's contract and the job's outputs). " +
			"It is untrusted: the apply running the round packages it, evaluates it on the dev, repair and sealed cases, and admits it only on a sealed pass; a failure comes back as the next round's counterexample. " +
			"One proposal per round, charged to the job's budget; spend is what making it cost, in the operator's unit.",
		InputSchema: inputObject(map[string]*jsonschema.Schema{
			"job":   jobProp,
			"files": {Type: "array", Description: "The proposal's files.", Items: file, MinItems: jsonschema.Ptr(1), MaxItems: jsonschema.Ptr(256)},
			"spend": {Type: "number", Description: "What making the proposal cost (default 0).", Minimum: jsonschema.Ptr(0.0)},
		}, "job", "files"),
		OutputSchema: outputSchema[proposeOut](),
		// Not read-only: it records a proposal that an apply will evaluate. Not idempotent:
		// a round takes one proposal; the next call goes to the next round or is refused.
		// Not destructive: nothing recorded is changed or removed. Closed world: the project.
		Annotations: &mcp.ToolAnnotations{Title: "Propose a candidate", ReadOnlyHint: false, IdempotentHint: false,
			DestructiveHint: jsonschema.Ptr(false), OpenWorldHint: jsonschema.Ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in proposeIn) (*mcp.CallToolResult, proposeOut, error) {
		by := "an MCP client"
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
			by = p.ClientInfo.Name
		}
		out, err := s.propose(ctx, in, by)
		return nil, out, err
	})
	s.tools = append(s.tools, "propose")
}

type jobIn struct {
	Job string `json:"job"`
}

type jobsOut struct {
	Jobs []jobOut `json:"jobs"`
}

type jobOut struct {
	ID         string          `json:"id"`
	Capability string          `json:"capability"`
	Status     string          `json:"status"`
	Rounds     int             `json:"rounds"`
	Budget     state.JobBudget `json:"budget"`
	Used       state.Usage     `json:"used"`
	// WaitingRound is the round that waits for a proposal from outside (0: none does).
	WaitingRound int `json:"waiting_round" jsonschema:"the round that waits for a proposal now, 0 when none does"`
}

func (s *mcpServer) jobs(ctx context.Context) (jobsOut, error) {
	ws, err := s.existingWorkspace()
	if err != nil {
		return jobsOut{}, err
	}
	defer ws.Close()
	all, err := ws.State.Jobs(ctx)
	if err != nil {
		return jobsOut{}, err
	}
	out := jobsOut{Jobs: []jobOut{}}
	for _, j := range all {
		v, err := jobView(ctx, ws.State, j, false, "", 0)
		if err != nil {
			return jobsOut{}, err
		}
		n, _, _, err := ws.State.Waiting(ctx, j.ID, reconstruct.ExternalSource)
		if err != nil {
			return jobsOut{}, err
		}
		out.Jobs = append(out.Jobs, jobOut{ID: j.ID, Capability: "capability." + j.Capability, Status: string(j.Status), Rounds: v.Rounds,
			Budget: j.Budget, Used: v.Used, WaitingRound: n})
	}
	return out, nil
}

type briefOut struct {
	Job   string      `json:"job"`
	Round int         `json:"round"`
	Brief string      `json:"brief" jsonschema:"the digest of the brief's files"`
	Files []briefFile `json:"files"`
}

type briefFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (s *mcpServer) brief(ctx context.Context, job string) (briefOut, error) {
	ws, err := s.existingWorkspace()
	if err != nil {
		return briefOut{}, err
	}
	defer ws.Close()
	if err := s.ownJob(ctx, ws, job); err != nil {
		return briefOut{}, err
	}
	b, err := reconstruct.WaitingBrief(ctx, ws, job)
	if err != nil {
		return briefOut{}, err
	}
	out := briefOut{Job: b.Job, Round: b.Round, Brief: string(b.Tree), Files: []briefFile{}}
	for _, p := range slices.Sorted(maps.Keys(b.Files)) {
		out.Files = append(out.Files, briefFile{Path: p, Content: string(b.Files[p])})
	}
	return out, nil
}

type proposeIn struct {
	Job   string         `json:"job"`
	Files []proposedFile `json:"files"`
	Spend float64        `json:"spend,omitempty"`
}

type proposedFile struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	Executable bool   `json:"executable,omitempty"`
}

type proposeOut struct {
	Job   string `json:"job"`
	Round int    `json:"round" jsonschema:"the round it was sent for; the apply running it evaluates it now"`
}

func (s *mcpServer) propose(ctx context.Context, in proposeIn, by string) (proposeOut, error) {
	ws, err := s.existingWorkspace()
	if err != nil {
		return proposeOut{}, err
	}
	defer ws.Close()
	if err := s.ownJob(ctx, ws, in.Job); err != nil {
		return proposeOut{}, err
	}
	dir, err := os.MkdirTemp("", "foundry-proposal-")
	if err != nil {
		return proposeOut{}, err
	}
	defer os.RemoveAll(dir)
	total := 0
	for _, f := range in.Files {
		// The schema's pattern already keeps a path relative and free of "..": checked
		// again here, since it decides where a file is written.
		if clean := path.Clean(f.Path); clean != f.Path || strings.HasPrefix(clean, "../") || clean == ".." || path.IsAbs(clean) {
			return proposeOut{}, fmt.Errorf("file path %q: a clean relative path is required, such as out/tool", f.Path)
		}
		if total += len(f.Content); total > maxProposalBytes {
			return proposeOut{}, fmt.Errorf("the proposal's files are over %d bytes", maxProposalBytes)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return proposeOut{}, err
		}
		mode := os.FileMode(0o644)
		if f.Executable {
			mode = 0o755
		}
		if err := os.WriteFile(dst, []byte(f.Content), mode); err != nil {
			return proposeOut{}, err
		}
	}
	n, err := reconstruct.SubmitProposal(ctx, ws, in.Job, dir, "mcp", by, in.Spend)
	if err != nil {
		return proposeOut{}, err
	}
	return proposeOut{Job: in.Job, Round: n}, nil
}

// ownJob refuses a job that is not one of this project's.
func (s *mcpServer) ownJob(ctx context.Context, ws *workspace.Workspace, job string) error {
	if _, err := ws.State.Job(ctx, job); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("no job %s in this project (see the jobs tool)", job)
		}
		return err
	}
	return nil
}

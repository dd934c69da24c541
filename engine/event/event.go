// Package event holds Event, one progress event of an apply (spec/cli.md, --progress=json):
// what engine/run reports as it settles nodes, and engine/evaluate and engine/admit report
// through the function they are given. The run delivers events one at a time, and records
// the capability events in the state database for `foundry status`.
//
// Events say what happened; no decision is taken from them (invariant 9 of ARCHITECTURE.md).
package event

import (
	"time"

	"github.com/foundry-build/foundry/digest"
)

// Event is one progress event of an apply (spec/cli.md, --progress=json).
type Event struct {
	Time     time.Time     `json:"time"`
	Type     string        `json:"type"` // run_started, node_started, node_done, node_cached, node_failed, node_skipped, run_finished, and those of capabilities (spec/cli.md)
	Run      string        `json:"run,omitempty"`
	Node     string        `json:"node,omitempty"`
	Action   digest.Digest `json:"action,omitempty"`
	Elapsed  time.Duration `json:"elapsed_ns,omitempty"`
	ExitCode *int          `json:"exit_code,omitempty"`
	Message  string        `json:"message,omitempty"`
	Total    int           `json:"total,omitempty"`
	// Capabilities (run_started) counts the capabilities this run builds; their recipes'
	// steps are not in Total, since which recipes run depends on evaluation.
	Capabilities int `json:"capabilities,omitempty"`

	// Of a capability's events: the candidate's recipe, the suite evaluated or failed, its
	// outcome and case counts (suite_evaluated; a reused sealed pass has no counts), and
	// the reference admitted, pinned or refused.
	Recipe      string `json:"recipe,omitempty"`
	Suite       string `json:"suite,omitempty"`
	Passed      *bool  `json:"passed,omitempty"`
	Cases       *int   `json:"cases,omitempty"`
	CasesPassed *int   `json:"cases_passed,omitempty"`
	Ref         string `json:"ref,omitempty"`
	// Job is the reconstruction job of a reconstruct_* event.
	Job string `json:"job,omitempty"`
}

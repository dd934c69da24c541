package plan

import (
	"fmt"
	"strings"

	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/lang"
)

// Egress is, for a fixed-output step (network egress), each endpoint it reaches and whether
// the operator's grants allow it (spec/grants.md).
type Egress struct {
	Hosts  []EgressHost `json:"hosts"`
	Grants string       `json:"grants,omitempty"` // the grants file consulted; omitted when there was none
}

// EgressHost is one endpoint of a step's egress.
type EgressHost struct {
	Host    string `json:"host"`    // HOST:PORT, canonical
	Granted bool   `json:"granted"` // a grant "network" names it
}

// Granted reports whether every endpoint is granted.
func (e *Egress) Granted() bool {
	for _, h := range e.Hosts {
		if !h.Granted {
			return false
		}
	}
	return true
}

// Ungranted lists the endpoints no grant allows.
func (e *Egress) Ungranted() []string {
	var out []string
	for _, h := range e.Hosts {
		if !h.Granted {
			out = append(out, h.Host)
		}
	}
	return out
}

// markEgress shows each fixed-output step's endpoints, and marks needs-grant one that would
// run and reaches an endpoint no grant allows: the one place a step's egress is checked
// against the grants. A cached step needs no network, granted or not.
func markEgress(g *graph.Graph, byNum []*Node, grants *lang.Grants) {
	for _, k := range g.Index().Made {
		pn := byNum[k]
		n := g.Index().Nodes[k]
		if pn == nil || n.Step == nil || n.Step.Network != lang.NetworkEgress {
			continue
		}
		e := &Egress{Hosts: make([]EgressHost, len(n.Step.Egress))}
		if grants != nil {
			e.Grants = grants.File
		}
		for i, hp := range n.Step.Egress {
			e.Hosts[i] = EgressHost{Host: hp.String(), Granted: grants.AllowsNetwork(hp)}
		}
		pn.Egress = e
		if !e.Granted() && pn.Status == StatusRun {
			pn.Status = StatusNeedsGrant
			pn.Reason = fmt.Sprintf("no grant allows reaching %s: add it to a grant %q in the operator's grants file", strings.Join(e.Ungranted(), ", "), lang.NetworkGrantKind)
		}
	}
}

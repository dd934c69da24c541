package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/fetch"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/lang"
)

// Fetch is a source as the plan shows it (spec/plan-json.md): what pins it, where it is
// fetched from, which of those hosts a network grant allows, and the tree it made when it is
// stored.
type Fetch struct {
	Type    string   `json:"type"` // http, git or oci
	URLs    []string `json:"urls"` // in the order they are tried
	Pin     string   `json:"pin"`  // http: sha256:<hex> of the bytes; git: the commit id; oci: the manifest digest
	Archive string   `json:"archive,omitempty"`
	Strip   int      `json:"strip,omitempty"`
	// Tree is the tree the source made, when it is stored (status cached).
	Tree digest.Digest `json:"tree,omitempty"`
	// Hosts are the HOST:PORT the URLs reach, in order, each once; Granted those a network
	// grant allows; Grants the grants file consulted, omitted when there was none.
	Hosts   []string `json:"hosts"`
	Granted []string `json:"granted"`
	Grants  string   `json:"grants,omitempty"`
}

// markSources settles each source's status: cached when a record of it (under its node's
// digest) names a tree the store holds, else fetch when a network grant allows a host of
// one of its URLs, else needs-grant (apply refuses the plan, and fetches nothing).
func markSources(g *graph.Graph, byNum []*Node, opt Options) error {
	ix := g.Index()
	var sources []*graph.Node
	for _, k := range ix.Made {
		if n := ix.Nodes[k]; n.Kind == graph.KindSource && byNum[k] != nil {
			sources = append(sources, n)
		}
	}
	if len(sources) == 0 {
		return nil
	}
	stored := map[digest.Digest]digest.Digest{}
	if opt.Lookup != nil {
		keys := make([]digest.Digest, len(sources))
		for i, n := range sources {
			keys[i] = n.Digest
		}
		found, err := opt.Lookup(keys)
		if err != nil {
			return err
		}
		for d, e := range found {
			if t, ok := fetch.TreeOf(e.Result); ok && e.Hit {
				stored[d] = t
			}
		}
	}
	for _, n := range sources {
		pn, s := byNum[n.Num()], n.Source
		f := &Fetch{Type: s.Type, URLs: s.URLs, Pin: s.Pin, Strip: s.Strip, Hosts: []string{}, Granted: []string{}}
		if s.Type == lang.SourceHTTP {
			f.Archive = s.Archive
		}
		if opt.Grants != nil {
			f.Grants = opt.Grants.File
		}
		for _, u := range s.URLs {
			hp, err := lang.SourceEndpoint(s.Type, u)
			if err != nil || slices.Contains(f.Hosts, hp.String()) {
				continue // lang refused a URL without an endpoint
			}
			f.Hosts = append(f.Hosts, hp.String())
			if opt.Grants.AllowsNetwork(hp) {
				f.Granted = append(f.Granted, hp.String())
			}
		}
		pn.Fetch = f
		switch t, ok := stored[n.Digest]; {
		case ok:
			pn.Status, f.Tree = StatusCached, t
		case len(f.Granted) == 0:
			pn.Status = StatusNeedsGrant
			pn.Reason = fmt.Sprintf("no grant allows fetching from %s: add it to a grant %q in the operator's grants file", strings.Join(f.Hosts, " or "), lang.NetworkGrantKind)
		default:
			pn.Status = StatusFetch
			if len(f.Granted) < len(f.Hosts) {
				var not []string
				for _, h := range f.Hosts {
					if !slices.Contains(f.Granted, h) {
						not = append(not, h)
					}
				}
				pn.Reason = fmt.Sprintf("fetched from %s only: no grant allows %s", strings.Join(f.Granted, ", "), strings.Join(not, ", "))
			}
		}
	}
	return nil
}

// sourceTrees are the trees of the sources the plan found stored, by address.
func sourceTrees(p *Plan) map[string]digest.Digest {
	out := map[string]digest.Digest{}
	for _, n := range p.Nodes {
		if n.Kind == graph.KindSource && n.Status == StatusCached && n.Fetch != nil && n.Fetch.Tree != "" {
			out[n.Address] = n.Fetch.Tree
		}
	}
	return out
}

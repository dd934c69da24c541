package lang

import (
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/foundry-build/foundry/digest"
)

// Network policies of a step (spec/language.md §9, §9a).
const (
	NetworkNone   = "none"   // loopback only: the default
	NetworkEgress = "egress" // a fixed-output step: granted hosts through the broker
)

// decodeNetwork reads a step's network, egress and output_digest. A step asks for the
// network only with its outputs pinned in advance (Nix's fixed-output rule): egress names
// each endpoint it reaches, output_digest the tree digest its declared outputs must have.
func (l *loader) decodeNetwork(st *Step, b *hcl.Block, content *hcl.BodyContent, evalAttr func(string) (cty.Value, hcl.Range, bool)) {
	netRng := b.DefRange
	if v, rng, ok := evalAttr("network"); ok {
		if s, ok := l.str(v, rng, "network"); ok {
			st.Network, netRng = s, rng
			if s != NetworkNone && s != NetworkEgress {
				l.diags = append(l.diags, errorAt(rng, "Network not granted",
					"network = %q: a step has %q (loopback only, the default) or %q (a fixed-output step, which reaches the hosts it names in egress, each allowed by the operator's grant, through Foundry's broker, and pins its outputs with output_digest).", s, NetworkNone, NetworkEgress))
				return
			}
		}
	}
	egressAttr, digestAttr := content.Attributes["egress"], content.Attributes["output_digest"]
	if st.Network != NetworkEgress {
		for _, a := range []*hcl.Attribute{egressAttr, digestAttr} {
			if a != nil {
				l.diags = append(l.diags, errorAt(a.NameRange, "Egress without network", "%s belongs to a step with network = %q.", a.Name, NetworkEgress))
			}
		}
		return
	}
	if egressAttr == nil {
		l.diags = append(l.diags, errorAt(netRng, "Egress without hosts",
			"network = %q needs egress = [\"HOST:PORT\", …]: the endpoints the step reaches, each allowed by a grant \"network\" of the operator's grants file.", NetworkEgress))
	} else if v, rng, ok := evalAttr("egress"); ok {
		hosts := l.stringList(v, rng, "egress")
		for _, h := range hosts {
			hp, err := ParseHostPort(h)
			if err != nil {
				l.diags = append(l.diags, errorAt(rng, "Invalid egress host", "%v.", err))
				continue
			}
			if !slices.Contains(st.Egress, hp) {
				st.Egress = append(st.Egress, hp)
			}
		}
		slices.SortFunc(st.Egress, func(a, b HostPort) int { return strings.Compare(a.String(), b.String()) })
		if len(hosts) == 0 && v.IsKnown() && !v.IsNull() {
			l.diags = append(l.diags, errorAt(rng, "Egress without hosts", "egress names at least one HOST:PORT."))
		}
	}
	if digestAttr == nil {
		l.diags = append(l.diags, errorAt(netRng, "Network without output digest",
			"network = %q needs output_digest = \"sha256:…\": the tree digest of the step's declared outputs, fixed in advance, so that nothing downstream depends on what the network happened to say. On first use write any digest (sha256: and 64 zeros): apply fails and says the digest it got.", NetworkEgress))
	} else if v, rng, ok := evalAttr("output_digest"); ok {
		if s, ok := l.str(v, rng, "output_digest"); ok {
			d, err := digest.Parse(s)
			if err != nil {
				l.diags = append(l.diags, errorAt(rng, "Invalid output digest", "output_digest = %q: want \"sha256:\" and 64 lowercase hex digits.", s))
			}
			st.OutputDigest = d
		}
	}
	if len(st.Outputs) == 0 {
		l.diags = append(l.diags, errorAt(netRng, "Fixed output without outputs",
			"A step with network = %q declares the outputs its output_digest pins, for example outputs = [\"/out/src\"].", NetworkEgress))
	}
}

// checkEgressLimit refuses limits.egress on a step without the network.
func (l *loader) checkEgressLimit(st *Step, lb *hcl.Block) {
	if st.Limits.EgressBytes == 0 || st.Network == NetworkEgress {
		return
	}
	rng := lb.DefRange
	if attrs, _ := lb.Body.JustAttributes(); attrs["egress"] != nil {
		rng = attrs["egress"].NameRange
	}
	l.diags = append(l.diags, errorAt(rng, "Egress without network", "limits.egress bounds the broker of a step with network = %q.", NetworkEgress))
}

// refuseNetwork refuses the network to a step that never gets it (what is said of it in
// what): a check, a reconstruction's builder or build.
func (l *loader) refuseNetwork(st *Step, b *hcl.Block, what string) {
	if st.Network != NetworkEgress {
		return
	}
	rng := b.DefRange
	if attrs, _ := b.Body.JustAttributes(); attrs["network"] != nil {
		rng = attrs["network"].Expr.Range()
	}
	l.diags = append(l.diags, errorAt(rng, "Network not granted", "%s runs with loopback only: network = %q is for the steps of a project, recipe or product.", what, NetworkNone))
}

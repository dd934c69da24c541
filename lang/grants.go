package lang

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Destination schemes a product's deliver block may name (spec/language.md §10).
const (
	SchemeDir       = "dir"        // a directory: each release is a subdirectory named by its digest
	SchemeOCILayout = "oci-layout" // an OCI image layout: each release is an artifact in it
	SchemeOCI       = "oci"        // a registry repository: each release is an artifact in it
)

// Destination is where a product is delivered: a scheme and, for dir: and oci-layout:, an
// absolute, cleaned path; for oci:, the registry repository "host[:port]/repo" in the form
// the project's registry setting and registry.Open take.
type Destination struct {
	Scheme string
	Path   string
}

// String is the destination as grants and the plan name it: "SCHEME:PATH".
func (d Destination) String() string { return d.Scheme + ":" + d.Path }

// registryRepo is an oci: destination's repository: a host (with a dot, or localhost) and
// an optional port, then one or more lowercase path components as the distribution
// reference grammar has them; no tag, no digest, no scheme.
var registryRepo = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?|localhost|\[[0-9a-f:]+\])(:[0-9]{1,5})?((?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)+)$`)
})

// ParseDestination reads "dir:PATH", "oci-layout:PATH" or "oci:HOST[:PORT]/REPO". A
// relative PATH is resolved against base (the project directory for a deliver block); base
// "" refuses it. An oci: repository is taken exactly as written: lowercase, its host named
// (a dot, a port or localhost: a bare "name/repo" would silently mean Docker Hub), without
// a tag or digest (each release is found by its own digest).
func ParseDestination(s, base string) (Destination, error) {
	scheme, p, ok := strings.Cut(s, ":")
	if !ok || (scheme != SchemeDir && scheme != SchemeOCILayout && scheme != SchemeOCI) {
		return Destination{}, fmt.Errorf("%q is not a destination: want %s:PATH, %s:PATH or %s:HOST[:PORT]/REPO", s, SchemeDir, SchemeOCILayout, SchemeOCI)
	}
	if p == "" {
		return Destination{}, fmt.Errorf("%q names no path", s)
	}
	if scheme == SchemeOCI {
		if !registryRepo().MatchString(p) {
			return Destination{}, fmt.Errorf("%q is not a registry repository: want %s:HOST[:PORT]/REPO, lowercase, with a host that has a dot or a port (or is localhost), and no tag, digest or scheme", s, SchemeOCI)
		}
		return Destination{Scheme: scheme, Path: p}, nil
	}
	if strings.ContainsRune(p, 0) {
		return Destination{}, fmt.Errorf("%q: a path cannot hold a NUL byte", s)
	}
	if !filepath.IsAbs(p) {
		if base == "" {
			return Destination{}, fmt.Errorf("%q: the path must be absolute", s)
		}
		p = filepath.Join(base, p)
	}
	return Destination{Scheme: scheme, Path: filepath.Clean(p)}, nil
}

// Grants are an operator's grants (spec/grants.md): the authority for effects, kept in a
// file outside the recipes. Recipes request effects; only a grant allows one. The zero
// value (and nil) grants nothing.
type Grants struct {
	File    string        // where they were read from; "" when there was no file
	Deliver []Destination // destinations products may be delivered to, and under them
	Network []HostPort    // endpoints sources and egress steps may reach, exactly
}

// Grant kinds: the labels of grant blocks.
const (
	DeliverGrantKind = "deliver" // destinations products may be delivered to
	NetworkGrantKind = "network" // host:port pairs Foundry may fetch sources from and egress steps may reach
)

// AllowsDelivery reports whether a grant allows delivering to d: a deliver grant of the
// same scheme names d's path or a directory above it; for oci:, the same host and port and
// the same repository or one under it, compared by whole path components
// (oci:reg.example/app grants oci:reg.example/app/web, not oci:reg.example/app-evil nor
// oci:reg.example:5000/app).
func (g *Grants) AllowsDelivery(d Destination) bool {
	_, ok := g.DeliveryGrant(d)
	return ok
}

// DeliveryGrant returns the grant that allows delivering to d, as AllowsDelivery decides:
// of several, the one nearest d (the longest path). A dir: or oci-layout: destination is
// reached from its path without following links (engine/deliver), so the nearest grant is
// the directory the operator named for it.
func (g *Grants) DeliveryGrant(d Destination) (Destination, bool) {
	var best Destination
	found := false
	if g == nil {
		return best, false
	}
	for _, gd := range g.Deliver {
		if gd.Scheme == d.Scheme && (d.Path == gd.Path || strings.HasPrefix(d.Path, strings.TrimSuffix(gd.Path, "/")+"/")) {
			if !found || len(gd.Path) > len(best.Path) {
				best, found = gd, true
			}
		}
	}
	return best, found
}

// LoadGrants reads a grants file. A missing file is no grants, and no error, when optional
// is set (the default .foundry/grants.hcl); otherwise it is an error.
func LoadGrants(path string, optional bool) (*Grants, map[string]*hcl.File, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && optional {
		return &Grants{}, nil, nil
	}
	if err != nil {
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read grants", Detail: err.Error()}}
	}
	g, f, diags := ParseGrants(path, src)
	files := map[string]*hcl.File{path: f}
	return g, files, diags
}

// ParseGrants decodes the grants file src, read from path. Its only block is
// grant "deliver" { to = [DESTINATION, …] }, with absolute paths; anything else is an
// error, so that a misspelt grant is not silently no grant.
func ParseGrants(path string, src []byte) (*Grants, *hcl.File, hcl.Diagnostics) {
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, f, diags
	}
	g := &Grants{File: path}
	content, d := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "grant", LabelNames: []string{"kind"}}}})
	diags = append(diags, d...)
	for _, b := range content.Blocks {
		switch b.Labels[0] {
		case DeliverGrantKind:
			diags = append(diags, g.parseDeliver(b)...)
		case NetworkGrantKind:
			diags = append(diags, g.parseNetwork(b)...)
		default:
			diags = append(diags, errorAt(b.LabelRanges[0], "Unknown grant", "A grant is for %q (destinations products may be delivered to) or %q (hosts sources and egress steps may reach); %q is not a kind of grant.", DeliverGrantKind, NetworkGrantKind, b.Labels[0]))
		}
	}
	return g, f, diags
}

// grantList reads the required attribute name of a grant block, a list of strings (what,
// like example), and the range its diagnostics point at; anything else is an error.
func grantList(b *hcl.Block, name, what, example string) ([]string, hcl.Range, hcl.Diagnostics) {
	bc, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: name, Required: true}}})
	a := bc.Attributes[name]
	if a == nil {
		return nil, hcl.Range{}, diags
	}
	v, d := a.Expr.Value(nil)
	diags = append(diags, d...)
	rng := a.Expr.Range()
	if d.HasErrors() {
		return nil, rng, diags
	}
	if v.IsNull() || !(v.Type().IsListType() || v.Type().IsTupleType()) || !v.IsWhollyKnown() {
		return nil, rng, append(diags, errorAt(rng, "Invalid grant", "%s must be a list of %s, such as [%q].", name, what, example))
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			diags = append(diags, errorAt(rng, "Invalid grant", "Each element of %s is a string, such as %q.", name, example))
			continue
		}
		out = append(out, e.AsString())
	}
	return out, rng, diags
}

// parseNetwork reads grant "network" { hosts = ["HOST:PORT", …] }.
func (g *Grants) parseNetwork(b *hcl.Block) hcl.Diagnostics {
	hosts, rng, diags := grantList(b, "hosts", "HOST:PORT pairs", "downloads.example:443")
	for _, s := range hosts {
		hp, err := ParseHostPort(s)
		if err != nil {
			diags = append(diags, errorAt(rng, "Invalid grant", "%v.", err))
			continue
		}
		if !slices.Contains(g.Network, hp) {
			g.Network = append(g.Network, hp)
		}
	}
	return diags
}

// parseDeliver reads grant "deliver" { to = [DESTINATION, …] }.
func (g *Grants) parseDeliver(b *hcl.Block) hcl.Diagnostics {
	to, rng, diags := grantList(b, "to", "destinations", "dir:/srv/releases")
	for _, s := range to {
		dest, err := ParseDestination(s, "")
		if err != nil {
			diags = append(diags, errorAt(rng, "Invalid grant", "%v.", err))
			continue
		}
		if !slices.Contains(g.Deliver, dest) {
			g.Deliver = append(g.Deliver, dest)
		}
	}
	return diags
}

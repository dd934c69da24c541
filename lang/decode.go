package lang

import (
	"fmt"
	"maps"
	"math"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/internal/parallel"
)

func digestBytes(b []byte) digest.Digest { return digest.FromBytes(b) }

var seedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "image"}, {Name: "oci_layout"}, {Name: "tarball"},
		{Name: "env"}, {Name: "user"}, {Name: "workdir"}, {Name: "platform"},
		repetitionArgs[0], repetitionArgs[1], // decoded by instances
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "layer"}},
}

var layerSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "from"}, {Name: "files"}, {Name: "symlinks"}, {Name: "dir"}, {Name: "at"},
}}

// decodeSeed decodes block b as the seed (or instance of it) in.
func (l *loader) decodeSeed(b *hcl.Block, in instance, count bool) {
	s := &Seed{Name: in.name, Scope: l.prefix, Instance: in.of(b.Labels[0], count), DeclRange: b.DefRange, Platform: l.cfg.Project.Platform, Env: map[string]string{}}
	content, diags := l.content(b.Body, seedSchema)
	l.diags = append(l.diags, diags...)
	ctx := withInstance(l.baseContext(), in, count)
	l.optString(content, "image", ctx, &s.Image)
	l.optString(content, "user", ctx, &s.User)
	l.optString(content, "workdir", ctx, &s.Workdir)
	l.optString(content, "platform", ctx, &s.Platform)
	if a := content.Attributes["platform"]; a != nil {
		l.checkPlatform(s.Platform, a.Expr.Range())
	}
	if a := content.Attributes["env"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			s.Env = l.stringMap(v, a.Expr.Range(), "env")
		}
	}
	if a := content.Attributes["oci_layout"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			s.OCILayout = l.artifact(v, a.Expr.Range(), "oci_layout", false, ArtifactProjectDir, ArtifactHostDir)
		}
	}
	if a := content.Attributes["tarball"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			s.Tarball = l.artifact(v, a.Expr.Range(), "tarball", false, ArtifactHostFile)
		}
	}
	for _, lb := range content.Blocks {
		s.Layers = append(s.Layers, l.decodeLayer(lb, ctx))
	}
	sources := 0
	for _, set := range []bool{s.Image != "", s.OCILayout != nil, s.Tarball != nil, len(s.Layers) > 0} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Invalid seed",
			"seed %q must have exactly one source: layer blocks, image (a registry reference pinned by digest), oci_layout, or tarball.", s.Name))
	}
	if s.Image != "" {
		if _, dgst, ok := strings.Cut(s.Image, "@"); !ok || !strings.HasPrefix(dgst, "sha256:") || digest.Digest(dgst).Validate() != nil {
			rng := content.Attributes["image"].Expr.Range()
			l.diags = append(l.diags, errorAt(rng, "Unpinned image reference",
				"%q is not pinned by digest. Seeds are hashed, never resolved at run time: write host/repo@sha256:<64 hex digits>.", s.Image))
		}
	}
	l.cfg.Seeds[s.Name] = s
}

func (l *loader) decodeLayer(b *hcl.Block, ctx *hcl.EvalContext) *SeedLayer {
	ly := &SeedLayer{Range: b.DefRange}
	content, diags := l.content(b.Body, layerSchema)
	l.diags = append(l.diags, diags...)
	if a := content.Attributes["from"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			ly.From = l.artifact(v, a.Expr.Range(), "from", false, ArtifactSeed)
		}
	}
	if a := content.Attributes["files"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			ly.Files = l.artifactMap(v, a.Expr.Range(), "files", true, ArtifactHostFile)
			for p := range ly.Files {
				if !cleanAbs(p) {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid image path", "%q must be an absolute, clean path such as \"/bin/tool\".", p))
				}
			}
		}
	}
	if a := content.Attributes["symlinks"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			ly.Symlinks = l.stringMap(v, a.Expr.Range(), "symlinks")
			for p, target := range ly.Symlinks {
				if !cleanAbs(p) || target == "" {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid symlink", "%q = %q: the link is an absolute, clean image path and the target is not empty.", p, target))
				}
				if _, clash := ly.Files[p]; clash {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Symlink clashes with a file", "%q is both a file and a symlink in this layer.", p))
				}
			}
			if ly.Files == nil {
				ly.Files = map[string]*Artifact{}
			}
			if len(ly.Symlinks) == 0 {
				ly.Symlinks = nil // symlinks = {} and no symlinks mean the same layer
			}
		}
	}
	if a := content.Attributes["dir"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			ly.Dir = l.artifact(v, a.Expr.Range(), "dir", false, ArtifactHostDir, ArtifactProjectDir, ArtifactSource)
		}
		ly.At = "/"
		l.optString(content, "at", ctx, &ly.At)
		if !cleanAbs(ly.At) {
			rng := a.Expr.Range()
			if at := content.Attributes["at"]; at != nil {
				rng = at.Expr.Range()
			}
			l.diags = append(l.diags, errorAt(rng, "Invalid image path", "at = %q must be an absolute, clean path.", ly.At))
		}
	} else if a := content.Attributes["at"]; a != nil {
		l.diags = append(l.diags, errorf(a.NameRange.Ptr(), "Unexpected attribute", "at is only meaningful together with dir."))
	}
	n := 0
	for _, set := range []bool{ly.From != nil, ly.Files != nil, ly.Dir != nil} {
		if set {
			n++
		}
	}
	if n != 1 && !l.diags.HasErrors() {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Invalid layer", "A layer has exactly one of: from = seed.NAME, files = { PATH = host_file(...) } (with optional symlinks = { PATH = TARGET }), or dir = host_dir(...) with at = PATH."))
	}
	return ly
}

func cleanAbs(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p
}

// ValidArtifactPath reports whether p may be a key of an artifact tree's files (a package's,
// an accepted service's, a release's): an absolute, clean path, which names a place inside
// the tree assembled from them ("/../x" and "a/b" do not). The loader refuses any other
// key (checkArtifactPaths), and the engine checks again where it writes the tree.
func ValidArtifactPath(p string) bool { return cleanAbs(p) }

// checkArtifactPaths refuses, in key order, each key of files that is not a
// ValidArtifactPath; example is a key that would do.
func (l *loader) checkArtifactPaths(files map[string]*Artifact, rng hcl.Range, example string) {
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if !ValidArtifactPath(p) {
			l.diags = append(l.diags, errorf(rng.Ptr(), "Invalid artifact path", "%q must be an absolute, clean path such as %q: it names where the file goes in the tree.", p, example))
		}
	}
}

var capabilitySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "summary"}, {Name: "target"}, {Name: "effects"}, {Name: "equivalence"}, {Name: "unordered"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "interface", LabelNames: []string{"kind"}},
		{Type: "tolerance"},
		{Type: "suite", LabelNames: []string{"name"}},
		{Type: "reconstruct"},
	},
}

var equivalences = []string{"bytes", "json", "lines", "numeric"}
var suiteNames = []string{"dev", "repair", "sealed"}

func (l *loader) decodeCapability(b *hcl.Block) {
	c := &Capability{Name: b.Labels[0], DeclRange: b.DefRange, Target: l.cfg.Project.Platform, Equivalence: "bytes", Effects: []string{}, Suites: map[string]*Suite{}}
	content, diags := l.content(b.Body, capabilitySchema)
	l.diags = append(l.diags, diags...)
	ctx := l.baseContext()
	l.optString(content, "summary", ctx, &c.Summary)
	l.optString(content, "target", ctx, &c.Target)
	if a := content.Attributes["target"]; a != nil {
		l.checkPlatform(c.Target, a.Expr.Range())
	}
	if a := content.Attributes["effects"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			c.Effects = l.stringList(v, a.Expr.Range(), "effects")
			if c.Effects == nil {
				c.Effects = []string{} // effects = [] and no effects mean the same contract
			}
			sort.Strings(c.Effects)
		}
	}
	l.decodeEquivalence(content, ctx, &c.Equivalence)
	if a := content.Attributes["unordered"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() && v.IsKnown() {
			if v.Type() != cty.Bool || v.IsNull() {
				l.typeErr(a.Expr.Range(), "unordered", "a bool", v)
			} else if c.Unordered = v.True(); c.Unordered && c.Equivalence != "json" && c.Equivalence != "numeric" {
				l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Unexpected unordered",
					"unordered = true compares output arrays as collections, which needs equivalence = \"json\" or \"numeric\", not %q.", c.Equivalence))
			}
		}
	}
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "interface":
			if c.Interface != nil {
				l.diags = append(l.diags, errorf(blk.DefRange.Ptr(), "Duplicate interface", "A capability has one interface block; the first is at %s.", c.Interface.Range))
				continue
			}
			c.Interface = l.decodeInterface(blk, ctx)
		case "tolerance":
			c.Tolerance = l.decodeTolerance(blk, ctx)
		case "suite":
			s := l.decodeSuite(blk, ctx, c.Name)
			if prev := c.Suites[s.Name]; prev != nil {
				l.diags = append(l.diags, errorf(blk.DefRange.Ptr(), "Duplicate suite", "suite %q was already declared at %s.", s.Name, prev.Range))
				continue
			}
			c.Suites[s.Name] = s
		case "reconstruct":
			if c.Reconstruct != nil {
				l.diags = append(l.diags, errorf(blk.DefRange.Ptr(), "Duplicate reconstruct block", "A capability has one reconstruct block; the first is at %s.", c.Reconstruct.Range))
				continue
			}
			c.Reconstruct = l.decodeReconstruct(blk, c.Name)
		}
	}
	for _, name := range []string{"dev", "repair", "sealed"} {
		s := c.Suites[name]
		if s == nil || s.Reference() == "" {
			continue
		}
		ref, rng := s.Reference(), s.ExpectRange
		if s.Expect == "" {
			rng = s.Generate.ExpectRange
		}
		var r *Reference
		if c.Reconstruct != nil {
			r = c.Reconstruct.References[ref]
		}
		switch {
		case r == nil:
			l.diags = append(l.diags, errorf(rng.Ptr(), "Unknown reference", "expect = reference.%s: the capability's reconstruct block declares no reference %q.", ref, ref))
		case !r.Observe:
			l.diags = append(l.diags, errorf(rng.Ptr(), "Reference not observable", "expect = reference.%s takes expected outputs from running the reference, which its dossier (at %s) does not allow: it says observe = false.", ref, r.Range))
		case c.Interface == nil:
		case s.Expect == "" && c.Interface.Kind != "cli":
			l.diags = append(l.diags, errorf(rng.Ptr(), "Differential suite of a service", "generate { expect = reference.%s } compares a cli's outputs on generated inputs; a service suite expects a reference's trace of effects on its case files' requests with expect = reference.%s beside cases.", ref, ref))
		case s.Expect != "" && c.Interface.Kind != "service":
			l.diags = append(l.diags, errorf(rng.Ptr(), "Trace suite of a cli", "A suite's expect = reference.%s compares a service's trace of effects; a cli suite takes its expected outputs from a reference with generate { expect = reference.%s }.", ref, ref))
		case s.Expect != "" && s.Generate != nil:
			l.diags = append(l.diags, errorf(s.Generate.Range.Ptr(), "Generated service suite", "A service suite's cases are the case files' request sequences; it has no generate block."))
		}
	}
	if c.Interface == nil {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Missing interface", "capability %q needs an interface \"cli\" { ... } or interface \"service\" { ... } block.", c.Name))
	}
	if c.Tolerance != nil && c.Equivalence != "numeric" {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Unexpected tolerance", "A tolerance block applies only to equivalence = \"numeric\"."))
	}
	if c.Equivalence == "numeric" && c.Tolerance == nil {
		c.Tolerance = &Tolerance{}
	}
	l.cfg.Capabilities[c.Name] = c
}

// decodeEquivalence reads an equivalence attribute, one of equivalences, into dst.
func (l *loader) decodeEquivalence(content *hcl.BodyContent, ctx *hcl.EvalContext, dst *string) {
	l.optString(content, "equivalence", ctx, dst)
	if a := content.Attributes["equivalence"]; a != nil && !contains(equivalences, *dst) {
		l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid equivalence",
			"%q is not an equivalence relation; use one of %s.%s", *dst, quoteList(equivalences), didYouMean(*dst, equivalences)))
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func (l *loader) decodeInterface(b *hcl.Block, ctx *hcl.EvalContext) *Interface {
	it := &Interface{Kind: b.Labels[0], Range: b.DefRange, Errors: map[string]int{}}
	if it.Kind != "cli" && it.Kind != "service" {
		l.diags = append(l.diags, errorf(b.LabelRanges[0].Ptr(), "Invalid interface kind", "%q is not an interface kind; use \"cli\" or \"service\".%s", it.Kind, didYouMean(it.Kind, []string{"cli", "service"})))
	}
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: interfaceAttributes(it.Kind)})
	l.diags = append(l.diags, diags...)
	l.decodeInterfaceAttributes(it, content, ctx)
	return it
}

// interfaceAttributes are the attributes of an interface of kind: a capability's interface
// block, and a product's accept "service" block, which runs its service the same way.
func interfaceAttributes(kind string) []hcl.AttributeSchema {
	attrs := []hcl.AttributeSchema{{Name: "entrypoint", Required: true}, {Name: "input"}, {Name: "output"}, {Name: "errors"}}
	if kind == "service" {
		attrs = append(attrs, hcl.AttributeSchema{Name: "port", Required: true}, hcl.AttributeSchema{Name: "ready"})
	}
	return attrs
}

// decodeInterfaceAttributes reads the attributes of interfaceAttributes(it.Kind) from
// content into it.
func (l *loader) decodeInterfaceAttributes(it *Interface, content *hcl.BodyContent, ctx *hcl.EvalContext) {
	if a := content.Attributes["entrypoint"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			it.Entrypoint = l.stringList(v, a.Expr.Range(), "entrypoint")
			if len(it.Entrypoint) == 0 {
				l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Empty entrypoint", "entrypoint needs at least the program path."))
			}
		}
	}
	for _, name := range []string{"input", "output"} {
		a := content.Attributes[name]
		if a == nil {
			continue
		}
		v, d := l.eval(a.Expr, ctx, nil)
		if d.HasErrors() {
			continue
		}
		s, ok := l.str(v, a.Expr.Range(), name)
		if !ok {
			continue
		}
		canon, err := CompileSchema(name+" schema", []byte(s))
		if err != nil {
			l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid JSON Schema", "%v", err))
			continue
		}
		if name == "input" {
			it.InputSchema = string(canon)
		} else {
			it.OutputSchema = string(canon)
		}
	}
	if a := content.Attributes["errors"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() && v.IsKnown() {
			if v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
				l.typeErr(a.Expr.Range(), "errors", "a map of error names to exit codes", v)
			} else {
				for iter := v.ElementIterator(); iter.Next(); {
					k, e := iter.Element()
					n, ok := l.number(e, a.Expr.Range(), fmt.Sprintf("errors[%q]", k.AsString()))
					if ok && it.Kind == "service" && (n != math.Trunc(n) || n < 400 || n > 599) {
						l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid error status", "errors[%q] = %v: a service's errors are HTTP statuses from 400 to 599.", k.AsString(), n))
						continue
					}
					if ok && it.Kind != "service" && (n != math.Trunc(n) || n < 1 || n > 255) {
						l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid exit code", "errors[%q] = %v: error exit codes are integers from 1 to 255 (0 means success).", k.AsString(), n))
						continue
					}
					if ok {
						it.Errors[k.AsString()] = int(n)
					}
				}
			}
		}
	}
	if a := content.Attributes["ready"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if p, ok := l.str(v, a.Expr.Range(), "ready"); ok {
				if !ValidHTTPPath(p) {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid ready path", "ready = %q: the readiness check is an HTTP path starting with \"/\", without spaces or a fragment.", p))
				}
				it.Ready = p
			}
		}
	}
	if a := content.Attributes["port"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if n, ok := l.number(v, a.Expr.Range(), "port"); ok {
				if n != math.Trunc(n) || n < 1 || n > 65535 {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid port", "port = %v is not a TCP port (1-65535).", n))
				}
				it.Port = int(n)
			}
		}
	}
}

func (l *loader) decodeTolerance(b *hcl.Block, ctx *hcl.EvalContext) *Tolerance {
	t := &Tolerance{}
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "absolute"}, {Name: "relative"}, {Name: "nan_equal"}}})
	l.diags = append(l.diags, diags...)
	for name, dst := range map[string]*float64{"absolute": &t.Absolute, "relative": &t.Relative} {
		if a := content.Attributes[name]; a != nil {
			if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
				if n, ok := l.number(v, a.Expr.Range(), name); ok {
					if n < 0 {
						l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid tolerance", "%s tolerance must not be negative.", name))
					}
					*dst = n
				}
			}
		}
	}
	if a := content.Attributes["nan_equal"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() && v.IsKnown() {
			if v.Type() != cty.Bool || v.IsNull() {
				l.typeErr(a.Expr.Range(), "nan_equal", "a bool", v)
			} else {
				t.NaNEqual = v.True()
			}
		}
	}
	return t
}

func (l *loader) decodeSuite(b *hcl.Block, ctx *hcl.EvalContext, capName string) *Suite {
	s := &Suite{Name: b.Labels[0], Range: b.DefRange}
	if !contains(suiteNames, s.Name) {
		l.diags = append(l.diags, errorf(b.LabelRanges[0].Ptr(), "Invalid suite name", "%q is not a suite; use \"dev\", \"repair\" or \"sealed\".%s", s.Name, didYouMean(s.Name, suiteNames)))
	}
	s.Sealed = s.Name == "sealed"
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "cases"}, {Name: "expect"}}, Blocks: []hcl.BlockHeaderSchema{{Type: "generate"}}})
	l.diags = append(l.diags, diags...)
	if a := content.Attributes["expect"]; a != nil {
		s.Expect, s.ExpectRange = l.referenceExpect(a)
		if content.Attributes["cases"] == nil {
			l.diags = append(l.diags, errorf(a.Range.Ptr(), "Missing cases", "expect = reference.NAME compares traces on the requests of case files: give cases = \"GLOB\"."))
		}
	}
	for _, blk := range content.Blocks {
		if s.Generate != nil {
			l.diags = append(l.diags, errorf(blk.DefRange.Ptr(), "Duplicate generate block", "A suite has one generate block."))
			continue
		}
		s.Generate = l.decodeGenerate(blk, ctx, s)
	}
	if content.Attributes["cases"] == nil && s.Generate == nil {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Missing cases", "suite %q needs cases = \"GLOB\", a generate { count = N } block, or both.", s.Name))
	}
	if a := content.Attributes["cases"]; a != nil {
		recPath := "capability." + capName + ".suite." + s.Name
		s.Pattern, s.Files, _ = l.decodeCases(a, ctx, recPath, func(f string) {
			if s.Sealed {
				real := filepath.Join(l.in.dir, filepath.FromSlash(f))
				if rp, err := filepath.EvalSymlinks(real); err == nil {
					real = rp
				}
				l.sealed = append(l.sealed, sealedFile{path: f, real: real, capability: capName})
			}
		})
	}
	return s
}

// referenceExpect reads expect = reference.NAME: a reference of the reconstruct block,
// checked once the capability is decoded. It returns the name ("" when a is not one) and
// where it was written.
func (l *loader) referenceExpect(a *hcl.Attribute) (string, hcl.Range) {
	tr, d := hcl.AbsTraversalForExpr(a.Expr)
	if d.HasErrors() || len(tr) != 2 || tr.RootName() != "reference" {
		l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid expect", "expect names the reference whose outputs are expected, as reference.NAME (a reference block of the capability's reconstruct block)."))
		return "", a.Expr.Range()
	}
	if at, ok := tr[1].(hcl.TraverseAttr); ok {
		return at.Name, a.Expr.Range()
	}
	return "", a.Expr.Range()
}

// decodeGenerate reads a suite's generate block: count (1 to MaxGenerated) and, for a dev
// or repair suite only, the seed builders know.
func (l *loader) decodeGenerate(b *hcl.Block, ctx *hcl.EvalContext, s *Suite) *Generate {
	g := &Generate{Range: b.DefRange}
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "count", Required: true}, {Name: "seed"}, {Name: "expect"}}})
	l.diags = append(l.diags, diags...)
	if a := content.Attributes["expect"]; a != nil {
		g.Expect, g.ExpectRange = l.referenceExpect(a)
	}
	if a := content.Attributes["count"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if n, ok := l.number(v, a.Expr.Range(), "count"); ok {
				if n != float64(int(n)) || n < 1 || n > MaxGenerated {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid count", "count must be a whole number from 1 to %d.", MaxGenerated))
				} else {
					g.Count = int(n)
				}
			}
		}
	}
	l.optString(content, "seed", ctx, &g.Seed)
	switch a := content.Attributes["seed"]; {
	case s.Sealed && a != nil:
		l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Seed in a sealed suite",
			"The sealed suite's cases are generated from a fresh secret seed the evaluator draws for each candidate, revealed only in its signed result; a seed written here would let a builder compute them. Remove it."))
	case !s.Sealed && a == nil:
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Missing seed", "A %s suite's generated cases come from a seed builders know: give seed = \"…\".", s.Name))
	}
	return g
}

// decodeCases reads a cases attribute: a glob of case files under the project directory,
// which must match at least one, each read (calling each with it) and recorded together as
// one input of kind suite at recPath. It returns the pattern, the files matched and the
// digest recorded.
func (l *loader) decodeCases(a *hcl.Attribute, ctx *hcl.EvalContext, recPath string, each func(string)) (string, []string, digest.Digest) {
	v, d := l.eval(a.Expr, ctx, nil)
	if d.HasErrors() {
		return "", nil, ""
	}
	pat, ok := l.str(v, a.Expr.Range(), "cases")
	if !ok {
		return "", nil, ""
	}
	files, err := l.in.glob(".", pat, recPath)
	if err != nil {
		l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid cases pattern", "%v", err))
		return pat, nil, ""
	}
	if len(files) == 0 {
		l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "No case files", "The pattern %q matches no files in the project directory.", pat))
	}
	sum, errs := l.in.suiteDigest(files, each)
	for _, err := range errs {
		l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Cannot read case file", "%v", err))
	}
	l.in.record(InputRecord{Kind: "suite", Path: recPath, Digest: sum})
	return pat, files, sum
}

// suiteDigest reads a suite's case files and returns the digest recorded for the suite,
// calling each for every file read. Case files are read quietly and recorded as one digest
// per suite: the plan must notice a changed case without listing sealed file names and
// digests to builders. The errors are of the files that could not be read; the digest
// covers the others.
func (in *inputs) suiteDigest(files []string, each func(string)) (digest.Digest, []error) {
	quiet := in.quiet
	in.quiet = true
	defer func() { in.quiet = quiet }()
	var errs []error
	var sums []string
	for _, f := range files {
		data, _, err := in.readProjectFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sums = append(sums, f+"\x00"+string(digestBytes(data)))
		each(f)
	}
	return digestBytes([]byte(strings.Join(sums, "\n"))), errs
}

var stepSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "description"}, {Name: "image", Required: true}, {Name: "run", Required: true},
		{Name: "env"}, {Name: "workdir"}, {Name: "user"}, {Name: "platform"},
		{Name: "mounts"}, {Name: "outputs"}, {Name: "network"}, {Name: "egress"}, {Name: "output_digest"},
		{Name: "caches"},
		repetitionArgs[0], repetitionArgs[1], // decoded by instances
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "limits"}},
}

var limitsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "memory"}, {Name: "cpus"}, {Name: "pids"}, {Name: "time"}, {Name: "output"}, {Name: "egress"}, {Name: "disk"}, {Name: "inodes"},
}}

// reservedTargets are sandbox paths a mount may not cover.
var reservedTargets = []string{"/", "/out", "/tmp", "/proc", "/dev", "/sys"}

// parallelDecodeMin is the least number of steps per worker worth decoding in parallel.
const parallelDecodeMin = 256

// parallelDecode turns parallel decoding on; a test turns it off to compare.
var parallelDecode = true

// decodeSteps decodes every step of a scope into dst, and returns them in the scope's order.
// A large scope is decoded on every core: each worker decodes a contiguous run of the steps
// with a loader of its own (diagnostics, input records, evaluation context), and the
// workers' results are joined in step order, so the configuration and its diagnostics are
// exactly those of decoding the steps one by one.
func (l *loader) decodeSteps(s *stepScope, dst map[string]*Step) []*Step {
	// The names stay in s.steps (references are checked against them); the syntax trees go
	// as they are decoded, so that decoding a large project reuses their memory instead of
	// growing the heap.
	blocks := make([]*hcl.Block, len(s.order))
	for i, name := range s.order {
		st := s.steps[name]
		blocks[i], st.block = st.block, nil
	}
	steps := make([]*Step, len(s.order))
	l.forked(len(blocks), func(fl *loader, lo, hi int) {
		ctx := fl.baseContext()
		for i := lo; i < hi; i++ {
			st := s.steps[s.order[i]]
			steps[i] = fl.decodeStep(blocks[i], st.inst.name, withInstance(ctx, st.inst, st.count), s)
			steps[i].Instance = st.inst.of(blocks[i].Labels[0], st.count)
			blocks[i] = nil
		}
	})
	for i, name := range s.order {
		dst[name] = steps[i]
	}
	return steps
}

// forked calls fn on contiguous parts of [0, n), on every core when n is large. Each part
// but a lone one gets a fork of l, and the forks are joined in part order: the configuration
// and diagnostics are exactly those of doing the parts one after another on l.
func (l *loader) forked(n int, fn func(fl *loader, lo, hi int)) {
	least := parallelDecodeMin
	if !parallelDecode {
		least = n + 1
	}
	type part struct {
		lo int
		l  *loader
	}
	var parts []part
	var mu sync.Mutex
	parallel.Parts(n, least, func(lo, hi int) {
		if lo == 0 && hi == n {
			fn(l, lo, hi)
			return
		}
		fl := l.fork()
		fn(fl, lo, hi)
		mu.Lock()
		parts = append(parts, part{lo, fl})
		mu.Unlock()
	})
	slices.SortFunc(parts, func(a, b part) int { return a.lo - b.lo })
	for _, p := range parts {
		l.join(p.l)
	}
}

// fork returns a loader for decoding steps on another goroutine: it shares what decoding
// steps only reads and has its own diagnostics, input records and evaluation context.
func (l *loader) fork() *loader {
	return &loader{cfg: l.cfg, in: l.in.fork(), parser: l.parser, declared: l.declared, seedGroups: l.seedGroups, sealed: l.sealed, localsDone: l.localsDone, budget: l.budget}
}

// join adds what a fork found, as if l had done the fork's work after its own.
func (l *loader) join(f *loader) {
	l.diags = append(l.diags, f.diags...)
	l.in.join(f.in)
}

// decodeStep decodes block b as the step (or instance of it) name.
func (l *loader) decodeStep(b *hcl.Block, name string, ctx *hcl.EvalContext, scope *stepScope) *Step {
	st := &Step{
		Name: name, Kind: "step", Scope: scope.prefix, DeclRange: b.DefRange, Workdir: "/",
		Platform: l.cfg.Project.Platform, Network: "none", Env: map[string]string{},
		Mounts: map[string]*Artifact{}, Outputs: scope.outputsOf(name),
	}
	content, diags := l.content(b.Body, stepSchema)
	l.diags = append(l.diags, diags...)
	evalAttr := func(name string) (cty.Value, hcl.Range, bool) {
		a := content.Attributes[name]
		if a == nil {
			return cty.NilVal, hcl.Range{}, false
		}
		v, d := l.eval(a.Expr, ctx, scope)
		return v, a.Expr.Range(), !d.HasErrors()
	}
	if v, rng, ok := evalAttr("description"); ok {
		st.Description, _ = l.str(v, rng, "description")
	}
	if v, rng, ok := evalAttr("image"); ok {
		st.Image = l.artifact(v, rng, "image", false, ArtifactSeed)
	}
	if a := content.Attributes["run"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, scope); !d.HasErrors() {
			rng := a.Expr.Range()
			st.Run = l.stringList(v, rng, "run")
			if len(st.Run) == 0 && v.IsKnown() && !v.IsNull() && v.CanIterateElements() && v.LengthInt() == 0 {
				l.diags = append(l.diags, errorAt(rng, "Empty command", "run needs at least the program to execute, for example [\"sh\", \"-c\", \"echo hi > /out/hi\"]."))
			}
		}
	}
	if env, rng, ok := l.decodeEnv(content.Attributes["env"], ctx, scope); ok {
		st.Env = env
		for k := range st.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				l.diags = append(l.diags, errorAt(rng, "Invalid environment variable name", "%q cannot be an environment variable name.", k))
			}
		}
	}
	if v, rng, ok := evalAttr("workdir"); ok {
		if s, ok := l.str(v, rng, "workdir"); ok {
			st.Workdir = s
			if !cleanAbs(s) {
				l.diags = append(l.diags, errorAt(rng, "Invalid workdir", "workdir = %q must be an absolute, clean path.", s))
			}
		}
	}
	if v, rng, ok := evalAttr("user"); ok {
		if s, ok := l.str(v, rng, "user"); ok {
			st.User = s
			if !validUser(s) {
				l.diags = append(l.diags, errorAt(rng, "Invalid user", "user = %q must be numeric \"UID:GID\", for example \"1000:1000\".", s))
			}
		}
	}
	if v, rng, ok := evalAttr("platform"); ok {
		if s, ok := l.str(v, rng, "platform"); ok {
			st.Platform = s
			l.checkPlatform(s, rng)
		}
	}
	l.decodeNetwork(st, b, content, evalAttr)
	if mounts, rng, ok := l.decodeMounts(content.Attributes["mounts"], ctx, scope); ok {
		st.Mounts = mounts
		// check reports what is wrong with one mount, if report is set, and whether anything is.
		self := ""
		check := func(target string, a *Artifact, report bool) bool {
			if !cleanAbs(target) {
				if report {
					l.diags = append(l.diags, errorAt(rng, "Invalid mount path", "%q must be an absolute, clean sandbox path such as \"/src\".", target))
				}
				return true
			}
			bad := false
			for _, r := range reservedTargets {
				if target == r || (r != "/" && strings.HasPrefix(target, r+"/")) {
					if report {
						l.diags = append(l.diags, errorAt(rng, "Reserved mount path", "%q is reserved: / is the image, /out and /tmp are the step's writable directories, /proc, /dev and /sys belong to the runtime.", target))
					}
					bad = true
				}
			}
			if a.Kind == ArtifactStepOutput {
				if self == "" {
					self = scope.address(st.Name)
				}
				if a.Node == self {
					if report {
						l.diags = append(l.diags, errorAt(rng, "Step mounts its own output", "step %q cannot mount %s: it does not exist until the step has run.", st.Name, a))
					}
					bad = true
				}
			}
			return bad
		}
		// A diagnostic for each bad target, in target order, the same every time. Nearly
		// every step has none: the mounts are checked in the map's order first, without
		// sorting their targets.
		for target, a := range st.Mounts {
			if check(target, a, false) {
				for _, target := range slices.Sorted(maps.Keys(st.Mounts)) {
					check(target, st.Mounts[target], true)
				}
				break
			}
		}
	}
	l.decodeCaches(st, content.Attributes["caches"], ctx, scope)
	for _, lb := range content.Blocks {
		st.Limits = l.decodeLimits(lb, ctx)
		l.checkEgressLimit(st, lb)
	}
	if len(content.Blocks) > 1 {
		l.diags = append(l.diags, errorf(content.Blocks[1].DefRange.Ptr(), "Duplicate limits block", "A step has at most one limits block."))
	}
	return st
}

// mountKinds are what a step may mount, besides inline content.
var mountKinds = []ArtifactKind{ArtifactProjectDir, ArtifactStepOutput, ArtifactCapability, ArtifactSource}

// decodeMounts evaluates a step's mounts attribute, if present and without errors.
func (l *loader) decodeMounts(a *hcl.Attribute, ctx *hcl.EvalContext, scope *stepScope) (map[string]*Artifact, hcl.Range, bool) {
	if a == nil {
		return nil, hcl.Range{}, false
	}
	rng := a.Expr.Range()
	v, diags := l.eval(a.Expr, ctx, scope)
	if diags.HasErrors() {
		return nil, rng, false
	}
	return l.artifactMap(v, rng, "mounts", true, mountKinds...), rng, true
}

// decodeEnv evaluates a step's env attribute, if present and without errors.
func (l *loader) decodeEnv(a *hcl.Attribute, ctx *hcl.EvalContext, scope *stepScope) (map[string]string, hcl.Range, bool) {
	if a == nil {
		return nil, hcl.Range{}, false
	}
	rng := a.Expr.Range()
	v, diags := l.eval(a.Expr, ctx, scope)
	if diags.HasErrors() {
		return nil, rng, false
	}
	return l.stringMap(v, rng, "env"), rng, true
}

func validUser(s string) bool {
	u, g, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	_, e1 := strconv.ParseUint(u, 10, 32)
	_, e2 := strconv.ParseUint(g, 10, 32)
	return e1 == nil && e2 == nil
}

func (l *loader) decodeLimits(b *hcl.Block, ctx *hcl.EvalContext) Limits {
	var lim Limits
	content, diags := l.content(b.Body, limitsSchema)
	l.diags = append(l.diags, diags...)
	get := func(name string) (cty.Value, hcl.Range, bool) {
		a := content.Attributes[name]
		if a == nil {
			return cty.NilVal, hcl.Range{}, false
		}
		v, d := l.eval(a.Expr, ctx, nil)
		return v, a.Expr.Range(), !d.HasErrors()
	}
	for name, dst := range map[string]*int64{"memory": &lim.MemoryBytes, "output": &lim.OutputBytes, "egress": &lim.EgressBytes, "disk": &lim.DiskBytes} {
		if v, rng, ok := get(name); ok {
			if s, ok := l.str(v, rng, name); ok {
				n, err := ParseSize(s)
				if err != nil {
					l.diags = append(l.diags, errorAt(rng, "Invalid size", "%s = %q: %v", name, s, err))
				}
				*dst = n
			}
		}
	}
	if v, rng, ok := get("cpus"); ok {
		if n, ok := l.number(v, rng, "cpus"); ok {
			if n <= 0 || n > 1024 {
				l.diags = append(l.diags, errorAt(rng, "Invalid cpus", "cpus = %v must be a positive number of CPUs, for example 0.5 or 2.", n))
			}
			lim.CPUs = n
		}
	}
	if v, rng, ok := get("pids"); ok {
		if n, ok := l.number(v, rng, "pids"); ok {
			if n < 1 || n != math.Trunc(n) || n > 1<<22 {
				l.diags = append(l.diags, errorAt(rng, "Invalid pids", "pids = %v must be a positive integer.", n))
			}
			lim.Pids = int64(n)
		}
	}
	if v, rng, ok := get("inodes"); ok {
		if n, ok := l.number(v, rng, "inodes"); ok {
			if n < 1 || n != math.Trunc(n) || n > 1<<32 {
				l.diags = append(l.diags, errorAt(rng, "Invalid inodes", "inodes = %v must be a positive integer of at most 4294967296: the files, directories and links the step may make in /out and /tmp.", n))
			}
			lim.Inodes = int64(n)
		}
	}
	if v, rng, ok := get("time"); ok {
		lim.Time, _ = l.duration(v, rng, "time", "90s", "")
	}
	return lim
}

// ParseSize parses a byte size: an integer with an optional unit B, KiB, MiB, GiB, TiB
// (powers of 1024) or KB, MB, GB, TB (powers of 1000).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("a size is a number with an optional unit, for example \"512MiB\"")
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, err
	}
	units := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
	unit := strings.TrimSpace(s[i:])
	m, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB", unit)
	}
	if n > math.MaxInt64/m {
		return 0, fmt.Errorf("size overflows")
	}
	if n == 0 {
		return 0, fmt.Errorf("size must be positive")
	}
	return n * m, nil
}

var recipeSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "provides", Required: true}, {Name: "cost"}, {Name: "reproducible"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "step", LabelNames: []string{"name"}}, {Type: "package"}},
}

func (l *loader) decodeRecipe(b *hcl.Block) {
	r := &Recipe{Name: b.Labels[0], DeclRange: b.DefRange, Steps: map[string]*Step{}}
	content, diags := l.content(b.Body, recipeSchema)
	l.diags = append(l.diags, diags...)
	ctx := l.baseContext()
	if a := content.Attributes["provides"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			r.Provides = l.artifact(v, a.Expr.Range(), "provides", false, ArtifactCapability)
		}
	}
	if a := content.Attributes["cost"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if n, ok := l.number(v, a.Expr.Range(), "cost"); ok {
				if n < 0 || n != math.Trunc(n) {
					l.diags = append(l.diags, errorf(a.Expr.Range().Ptr(), "Invalid cost", "cost = %v must be a non-negative integer.", n))
				}
				r.Cost = int64(n)
			}
		}
	}
	if a := content.Attributes["reproducible"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			if b, err := convert.Convert(v, cty.Bool); err != nil || b.IsNull() || !b.IsKnown() {
				l.typeErr(a.Expr.Range(), "reproducible", "true or false", v)
			} else {
				r.Reproducible = b.True()
			}
		}
	}
	scope := newStepScope("recipe."+r.Name, 0)
	var pkgs []*hcl.Block
	for _, blk := range content.Blocks {
		if blk.Type == "step" {
			scope.add(l, blk)
		} else {
			pkgs = append(pkgs, blk)
		}
	}
	l.decodeSteps(scope, r.Steps)
	if len(pkgs) == 0 {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Missing package", "recipe %q needs a package { files = { ... } } block saying which outputs form the capability.", r.Name))
	}
	for i, pb := range pkgs {
		if i > 0 {
			l.diags = append(l.diags, errorf(pb.DefRange.Ptr(), "Duplicate package block", "A recipe has one package block."))
			continue
		}
		r.Package = l.decodePackage(pb, l.baseContext(), scope)
	}
	l.cfg.Recipes[r.Name] = r
}

func (l *loader) decodePackage(b *hcl.Block, ctx *hcl.EvalContext, scope *stepScope) *Package {
	p := &Package{Range: b.DefRange, Files: map[string]*Artifact{}}
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "base"}, {Name: "files", Required: true}}})
	l.diags = append(l.diags, diags...)
	if a := content.Attributes["base"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, scope); !d.HasErrors() {
			p.Base = l.artifact(v, a.Expr.Range(), "base", false, ArtifactSeed)
		}
	}
	if a := content.Attributes["files"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, scope); !d.HasErrors() {
			p.Files = l.artifactMap(v, a.Expr.Range(), "files", true, ArtifactStepOutput, ArtifactProjectDir, ArtifactSource)
			l.checkArtifactPaths(p.Files, a.Expr.Range(), "/bin/tool")
		}
	}
	return p
}

var reconstructSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "builder"}, {Type: "proposals"}, {Type: "build"}, {Type: "package"}, {Type: "budget"}, {Type: "reference", LabelNames: []string{"name"}}}}

// decodeReconstruct decodes a capability's reconstruct block: exactly one builder or
// proposals block, at most one build, one package, at most one budget.
func (l *loader) decodeReconstruct(b *hcl.Block, capName string) *Reconstruct {
	rc := &Reconstruct{Range: b.DefRange, Budget: DefaultReconstructBudget}
	content, diags := l.content(b.Body, reconstructSchema)
	l.diags = append(l.diags, diags...)
	seen := map[string]*hcl.Block{}
	for _, blk := range content.Blocks {
		if blk.Type == "reference" {
			r := l.decodeReference(blk)
			if rc.References == nil {
				rc.References = map[string]*Reference{}
			}
			if prev := rc.References[r.Name]; prev != nil {
				l.diags = append(l.diags, errorf(blk.DefRange.Ptr(), "Duplicate reference", "reference %q was already declared at %s.", r.Name, prev.Range))
				continue
			}
			rc.References[r.Name] = r
			continue
		}
		if prev := seen[blk.Type]; prev != nil {
			l.diags = append(l.diags, errorf(blk.DefRange.Ptr(), "Duplicate "+blk.Type+" block", "A reconstruct block has one %s block; the first is at %s.", blk.Type, prev.DefRange))
			continue
		}
		seen[blk.Type] = blk
	}
	switch bb, pb := seen["builder"], seen["proposals"]; {
	case bb != nil && pb != nil:
		l.diags = append(l.diags, errorf(pb.DefRange.Ptr(), "Builder and proposals", "A reconstruct block takes its proposals from a builder (at %s) or from outside (a proposals block), not both.", bb.DefRange))
	case bb != nil:
		rc.Builder = l.decodeReconstructStep(bb, capName)
	case pb != nil:
		rc.Proposals = l.decodeProposals(pb)
	default:
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Missing builder", "reconstruct needs a builder { image = seed.S, run = [...], outputs = [...] } block, the program that proposes candidates, or a proposals { outputs = [...] } block, for proposals sent from outside (foundry jobs propose, or the MCP propose tool)."))
	}
	if blk := seen["build"]; blk != nil {
		rc.Build = l.decodeReconstructStep(blk, capName)
	}
	if blk := seen["package"]; blk != nil {
		rc.Package = l.decodeProposalPackage(blk, rc, capName)
	} else {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Missing package", "reconstruct needs a package { base = seed.B, files = { \"/bin/tool\" = \"/out/tool\" } } block saying which of the builder's outputs (or, with a build block, the build's) form a candidate."))
	}
	if blk := seen["budget"]; blk != nil {
		rc.Budget = l.decodeBudget(blk)
	}
	return rc
}

// decodeReference decodes a reconstruct block's reference block: image (a seed, pinned by
// content), entrypoint, licence and origin (required: a dossier says where its bytes came
// from and under what terms), and the three rights, each false unless written.
func (l *loader) decodeReference(b *hcl.Block) *Reference {
	r := &Reference{Name: b.Labels[0], Range: b.DefRange}
	if !validName(r.Name) {
		l.diags = append(l.diags, errorf(b.LabelRanges[0].Ptr(), "Invalid reference name", "%q must start with a letter and hold only letters, digits, '_' and '-'.", r.Name))
	}
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "image", Required: true}, {Name: "entrypoint", Required: true}, {Name: "licence", Required: true}, {Name: "origin", Required: true},
		{Name: "inspect"}, {Name: "observe"}, {Name: "distribute"}}})
	l.diags = append(l.diags, diags...)
	ctx := l.baseContext()
	if a := content.Attributes["image"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			r.Image = l.artifact(v, a.Expr.Range(), "image", false, ArtifactSeed)
		}
	}
	if a := content.Attributes["entrypoint"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			r.Entrypoint = l.stringList(v, a.Expr.Range(), "entrypoint")
			if len(r.Entrypoint) == 0 {
				l.diags = append(l.diags, errorAt(a.Expr.Range(), "Empty entrypoint", "A reference's entrypoint is the command run with each input on stdin, for example [\"/bin/sort\", \"-n\"]."))
			}
		}
	}
	l.optString(content, "licence", ctx, &r.Licence)
	l.optString(content, "origin", ctx, &r.Origin)
	for _, right := range []struct {
		name string
		dst  *bool
	}{{"inspect", &r.Inspect}, {"observe", &r.Observe}, {"distribute", &r.Distribute}} {
		a := content.Attributes[right.name]
		if a == nil {
			continue
		}
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() && v.IsKnown() {
			if v.Type() != cty.Bool || v.IsNull() {
				l.typeErr(a.Expr.Range(), right.name, "a bool", v)
			} else {
				*right.dst = v.True()
			}
		}
	}
	return r
}

// decodeReconstructStep decodes a reconstruct's builder or build block as a step of its
// own scope, so that it gets every rule a step has (image, run, env, limits, outputs, no
// network, sealed reads refused), and then the rules both share: it mounts project
// directories, inline files and capabilities (tools it builds with) only, and not at /job
// or /proposal, where apply mounts the job and, for a build, the proposal.
func (l *loader) decodeReconstructStep(b *hcl.Block, capName string) *Step {
	scope := newStepScope("capability."+capName+".reconstruct", 1)
	in := instance{name: b.Type}
	scope.steps[in.name] = &scopeStep{outputs: l.declaredOutputs(b, in, false), inst: in}
	scope.order = []string{in.name}
	st := l.decodeStep(b, in.name, l.baseContext(), scope)
	st.Kind = b.Type
	l.refuseNetwork(st, b, "A "+b.Type+" of a reconstruction")
	if attr, _ := b.Body.JustAttributes(); attr["caches"] != nil {
		// A builder is a proposer from outside the project's trust: it must neither read
		// what the project's steps left in a cache nor leave anything there for them.
		l.diags = append(l.diags, errorAt(attr["caches"].NameRange, "Cache in a reconstruction", "A %s of a reconstruction mounts no cache: a cache volume belongs to the project's own steps, and a builder must neither read what they left there nor leave anything for them.", b.Type))
		st.Caches = nil
	}
	if len(st.Outputs) == 0 {
		what, writes := "Builder", "its proposal"
		if b.Type == "build" {
			what, writes = "Build", "what the candidate is made of"
		}
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), what+" without outputs", "A %s writes %s under /out: declare it, for example outputs = [\"/out/tool\"].", b.Type, writes))
	}
	for _, target := range slices.Sorted(maps.Keys(st.Mounts)) {
		a := st.Mounts[target]
		rng := b.DefRange
		if attr, _ := b.Body.JustAttributes(); attr["mounts"] != nil {
			rng = attr["mounts"].Expr.Range()
		}
		switch {
		case target == JobDir || strings.HasPrefix(target, JobDir+"/"):
			l.diags = append(l.diags, errorAt(rng, "Reserved mount path", "%q is reserved: apply mounts the job (contract, cases, counterexamples) at %s.", target, JobDir))
		case target == ProposalDir || strings.HasPrefix(target, ProposalDir+"/"):
			l.diags = append(l.diags, errorAt(rng, "Reserved mount path", "%q is reserved: apply mounts the proposal a build runs over at %s.", target, ProposalDir))
		case a.Kind != ArtifactProjectDir && a.Kind != ArtifactInline && a.Kind != ArtifactCapability:
			l.diags = append(l.diags, errorAt(rng, "Invalid "+b.Type+" mount", "A %s mounts project directories (dir(...)), inline files or capabilities only; %s is not one.", b.Type, a))
		}
	}
	return st
}

// JobDir is where a reconstruction's builder finds its job, read-only.
const JobDir = "/job"

// ProposalDir is where a reconstruction's build finds the proposal, read-only: a file the
// proposal holds at /out/P is at /proposal/P.
const ProposalDir = "/proposal"

// decodeProposals decodes a reconstruct's proposals block: the paths a proposal holds.
func (l *loader) decodeProposals(b *hcl.Block) *Proposals {
	p := &Proposals{Range: b.DefRange}
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "outputs", Required: true}}})
	l.diags = append(l.diags, diags...)
	a := content.Attributes["outputs"]
	if a == nil {
		return p
	}
	v, d := l.eval(a.Expr, l.baseContext(), nil)
	if d.HasErrors() {
		return p
	}
	p.Outputs = l.stringList(v, a.Expr.Range(), "outputs")
	for _, o := range p.Outputs {
		if !cleanAbs(o) || !strings.HasPrefix(o, "/out/") {
			l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid output path", "%q must be a clean path under /out, such as \"/out/tool\": where the file is in a proposal's tree.", o))
		}
	}
	if len(p.Outputs) == 0 {
		l.diags = append(l.diags, errorAt(a.Expr.Range(), "Empty outputs", "A proposal holds at least one file: name it, for example outputs = [\"/out/tool\"]."))
	}
	return p
}

// decodeProposalPackage decodes a reconstruct's package: files maps an image path to one
// of the files a proposal holds (rc.ProposalOutputs), written as its path ("/out/tool"),
// or, when rc has a build, to one of the build's outputs: a candidate is made one way,
// never of both.
func (l *loader) decodeProposalPackage(b *hcl.Block, rc *Reconstruct, capName string) *Package {
	p := &Package{Range: b.DefRange, Files: map[string]*Artifact{}}
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "base"}, {Name: "files", Required: true}}})
	l.diags = append(l.diags, diags...)
	ctx := l.baseContext()
	if a := content.Attributes["base"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() {
			p.Base = l.artifact(v, a.Expr.Range(), "base", false, ArtifactSeed)
		}
	}
	a := content.Attributes["files"]
	if a == nil {
		return p
	}
	v, d := l.eval(a.Expr, ctx, nil)
	if d.HasErrors() {
		return p
	}
	rng := a.Expr.Range()
	files := l.stringMap(v, rng, "files")
	for _, path := range slices.Sorted(maps.Keys(files)) {
		out := files[path]
		if !cleanAbs(path) {
			l.diags = append(l.diags, errorAt(rng, "Invalid artifact path", "%q must be an absolute, clean path such as \"/bin/tool\".", path))
			continue
		}
		if rc.Build != nil {
			if !slices.Contains(rc.Build.Outputs, out) {
				l.diags = append(l.diags, errorAt(rng, "Unknown build output", "%q = %q: with a build block, the package names the build's outputs, and the build declares no %q; it declares %s.", path, out, out, quoteList(rc.Build.Outputs)))
				continue
			}
			p.Files[path] = &Artifact{Kind: ArtifactStepOutput, Node: BuildAddress(capName), Path: out, Range: rng}
			continue
		}
		if outs := rc.ProposalOutputs(); (rc.Builder != nil || rc.Proposals != nil) && !slices.Contains(outs, out) {
			l.diags = append(l.diags, errorAt(rng, "Unknown builder output", "%q = %q: a proposal holds no %q; it holds %s.", path, out, out, quoteList(outs)))
			continue
		}
		p.Files[path] = &Artifact{Kind: ArtifactStepOutput, Node: BuilderAddress(capName), Path: out, Range: rng}
	}
	if len(p.Files) == 0 && len(files) == 0 {
		l.diags = append(l.diags, errorAt(rng, "Empty package", "files must name at least one of the builder's outputs (with a build block, the build's)."))
	}
	return p
}

// decodeBudget decodes a reconstruct's budget block; a field it does not write keeps
// DefaultReconstructBudget's.
func (l *loader) decodeBudget(b *hcl.Block) ReconstructBudget {
	bud := DefaultReconstructBudget
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "candidates"}, {Name: "probes"}, {Name: "wall"}, {Name: "scratch"}, {Name: "spend"}}})
	l.diags = append(l.diags, diags...)
	get := func(name string) (cty.Value, hcl.Range, bool) {
		a := content.Attributes[name]
		if a == nil {
			return cty.NilVal, hcl.Range{}, false
		}
		v, d := l.eval(a.Expr, l.baseContext(), nil)
		return v, a.Expr.Range(), !d.HasErrors()
	}
	count := func(name string, max int, dst *int) {
		if v, rng, ok := get(name); ok {
			if n, ok := l.number(v, rng, name); ok {
				if n < 1 || n > float64(max) || n != math.Trunc(n) {
					l.diags = append(l.diags, errorf(rng.Ptr(), "Invalid "+name, "%s = %v must be an integer from 1 to %d.", name, n, max))
				}
				*dst = int(n)
			}
		}
	}
	count("candidates", maxCandidates, &bud.Candidates)
	count("probes", maxProbes, &bud.Probes)
	if v, rng, ok := get("wall"); ok {
		bud.Wall, _ = l.duration(v, rng, "wall", "10m", ": the wall time of the job's rounds together")
	}
	if v, rng, ok := get("scratch"); ok {
		if s, ok := l.str(v, rng, "scratch"); ok {
			n, err := ParseSize(s)
			if err != nil {
				l.diags = append(l.diags, errorAt(rng, "Invalid size", "scratch = %q: %v", s, err))
			}
			bud.Scratch = n
		}
	}
	if v, rng, ok := get("spend"); ok {
		if n, ok := l.number(v, rng, "spend"); ok {
			if n < 0 || math.IsInf(n, 0) {
				l.diags = append(l.diags, errorf(rng.Ptr(), "Invalid spend", "spend = %v must be a number of at least 0: what the job's proposals may cost together.", n))
			}
			bud.Spend = n
		}
	}
	return bud
}

// maxCandidates bounds a budget's candidates: each is a builder run and an evaluation;
// maxProbes its probes, each a case run in a sandbox of its own.
const (
	maxCandidates = 100
	maxProbes     = 100_000
)

var productSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "summary"}, {Name: "requires"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "step", LabelNames: []string{"name"}},
		{Type: "check", LabelNames: []string{"name"}},
		{Type: "deliver"},
		{Type: "accept", LabelNames: []string{"kind"}},
	},
}

func (l *loader) decodeProduct(b *hcl.Block) {
	p := &Product{Name: b.Labels[0], DeclRange: b.DefRange, Steps: map[string]*Step{}, Checks: map[string]*Step{}}
	content, diags := l.content(b.Body, productSchema)
	l.diags = append(l.diags, diags...)
	ctx := l.baseContext()
	l.optString(content, "summary", ctx, &p.Summary)
	if a := content.Attributes["requires"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, nil); !d.HasErrors() && v.IsKnown() {
			if v.IsNull() || !(v.Type().IsListType() || v.Type().IsTupleType()) {
				l.typeErr(a.Expr.Range(), "requires", "a list of capabilities", v)
			} else {
				for it := v.ElementIterator(); it.Next(); {
					_, e := it.Element()
					if art := l.artifact(e, a.Expr.Range(), "requires elements", false, ArtifactCapability); art != nil {
						p.Requires = append(p.Requires, art)
					}
				}
			}
		}
	}
	scope := newStepScope("product."+p.Name, 0)
	var checks, delivers, accepts []*hcl.Block
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "step":
			scope.add(l, blk)
		case "check":
			if l.declare("product."+p.Name+".check."+blk.Labels[0], blk) {
				checks = append(checks, blk)
			}
		case "deliver":
			delivers = append(delivers, blk)
		case "accept":
			accepts = append(accepts, blk)
		}
	}
	l.decodeSteps(scope, p.Steps)
	for i, ab := range accepts {
		if i > 0 {
			l.diags = append(l.diags, errorf(ab.DefRange.Ptr(), "Duplicate accept block", "A product has one accept block; the first is at %s.", accepts[0].DefRange))
			continue
		}
		p.Accept = l.decodeAccept(ab, p.Name, scope)
	}
	sctx := l.baseContext()
	for _, cb := range checks {
		if attrs, _ := cb.Body.JustAttributes(); attrs["outputs"] != nil {
			l.diags = append(l.diags, errorf(attrs["outputs"].NameRange.Ptr(), "Check with outputs", "A check passes or fails by its exit code; it declares no outputs."))
		}
		insts, r := l.instances(cb)
		for _, in := range insts {
			chk := l.decodeStep(cb, in.name, withInstance(sctx, in, r != nil && r.count), scope)
			chk.Kind, chk.Instance = "check", in.of(cb.Labels[0], r != nil && r.count)
			l.refuseNetwork(chk, cb, "A check")
			// decodeStep takes outputs from the scope, where a same-named step may have put
			// its own: a check has none.
			chk.Outputs = nil
			p.Checks[chk.Name] = chk
		}
	}
	for i, db := range delivers {
		if i > 0 {
			l.diags = append(l.diags, errorf(db.DefRange.Ptr(), "Duplicate deliver block", "A product has one deliver block."))
			continue
		}
		d := &Delivery{Range: db.DefRange}
		dc, diags := l.content(db.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "to", Required: true}, {Name: "files", Required: true}, {Name: "start"}}})
		l.diags = append(l.diags, diags...)
		l.optString(dc, "to", sctx, &d.To)
		if a := dc.Attributes["to"]; a != nil && d.To != "" {
			dest, err := ParseDestination(d.To, l.cfg.Dir)
			if err != nil {
				l.diags = append(l.diags, errorAt(a.Expr.Range(), "Invalid destination", "%v. For example \"dir:/srv/releases/%s\"; the operator's grants file must allow it.", err, p.Name))
			}
			d.Dest = dest
		}
		if a := dc.Attributes["start"]; a != nil {
			if v, dd := l.eval(a.Expr, sctx, nil); !dd.HasErrors() {
				d.Start = l.stringList(v, a.Expr.Range(), "start")
				if len(d.Start) == 0 && v.IsKnown() && !v.IsNull() {
					l.diags = append(l.diags, errorAt(a.Expr.Range(), "Empty command", "start needs at least the program to run, or leave start out."))
				}
			}
		}
		if a := dc.Attributes["files"]; a != nil {
			if v, dd := l.eval(a.Expr, sctx, scope); !dd.HasErrors() {
				d.Files = l.artifactMap(v, a.Expr.Range(), "files", true, ArtifactStepOutput, ArtifactCapability, ArtifactProjectDir, ArtifactSource)
				l.checkArtifactPaths(d.Files, a.Expr.Range(), "/bin/app")
			}
		}
		l.checkDeliveredIsAccepted(p, d, dc)
		p.Deliver = d
	}
	l.cfg.Products[p.Name] = p
}

// checkDeliveredIsAccepted holds a delivery to what its product's acceptance ran on
// (spec/language.md §10): a product is delivered only after its acceptance passes, so it
// needs a check or an accept block. With an accept block, the release starts the way the
// service was accepted: start is the accepted entrypoint (and defaults to it); that the
// files are the accepted tree is checked by digest where both are assembled (engine/run
// deliverProduct). Without one, its checks are the acceptance: each delivered file must
// be mounted by one of them, the same artifact, so their passing results are about the
// files delivered.
func (l *loader) checkDeliveredIsAccepted(p *Product, d *Delivery, dc *hcl.BodyContent) {
	switch {
	case p.Accept == nil && len(p.Checks) == 0:
		l.diags = append(l.diags, errorf(d.Range.Ptr(), "Delivery without acceptance",
			"product %q is delivered only after its acceptance passes, and it has none: add a check block (a command that exits 0 on the files delivered) or an accept \"service\" block.", p.Name))
	case p.Accept != nil:
		ep := p.Accept.Interface.Entrypoint
		if d.Start == nil {
			d.Start = ep
		} else if a := dc.Attributes["start"]; a != nil && len(d.Start) > 0 && !slices.Equal(d.Start, ep) {
			l.diags = append(l.diags, errorAt(a.Expr.Range(), "Start differs from the accepted entrypoint",
				"start = %q, but the service was accepted as entrypoint = %q: the release starts the way it was accepted. Give both the same command (paths relative to the files' root, which is / in the sandbox), or leave start out.", d.Start, ep))
		}
	default:
		var checked []*Artifact
		for _, c := range p.Checks {
			for _, m := range c.Mounts {
				checked = append(checked, m)
			}
		}
		a := dc.Attributes["files"]
		for _, k := range slices.Sorted(maps.Keys(d.Files)) {
			f := d.Files[k]
			if a != nil && !slices.ContainsFunc(checked, f.Same) {
				l.diags = append(l.diags, errorAt(a.Expr.Range(), "Delivered file not checked",
					"files[%q] = %s is mounted by none of product %q's checks: without an accept block, the checks are its acceptance, and a release holds only what they ran on. Mount it in a check, or accept the product through an accept block.", k, f, p.Name))
			}
		}
	}
}

// checkSealed refuses every read of the configuration that reaches a sealed case file — a
// file() of one, a dir(), host_dir() or fileset() of a directory that contains one (in a
// mount, a seed layer, a package, anywhere), or a non-sealed suite whose pattern matches
// one. Sealed cases are for
// the evaluator only: a builder that saw them could fit its output to them. Paths are
// compared after resolving symlinks, so an alias does not get around the check.
func (l *loader) checkSealed(suites []*Suite) {
	if len(l.sealed) == 0 {
		return
	}
	for _, key := range sortedKeys(l.in.reads) {
		site := l.in.reads[key]
		for _, sf := range l.sealed {
			if site.real == sf.real || strings.HasPrefix(sf.real, site.real+string(filepath.Separator)) {
				rng := site.rng
				l.diags = append(l.diags, errorAt(rng, "Configuration reads sealed cases",
					"%s reaches %s, a sealed case of capability %q. Sealed cases are for the evaluator only; no step, seed or value may include them. Keep them in a directory nothing else reads.",
					site.what, sf.path, sf.capability))
				break
			}
		}
	}
	sealed := map[string]string{}
	for _, sf := range l.sealed {
		sealed[sf.path] = sf.capability
	}
	for _, s := range suites {
		if s.Sealed {
			continue
		}
		for _, f := range s.Files {
			if c, ok := sealed[f]; ok {
				rng := s.Range
				l.diags = append(l.diags, errorAt(rng, "Suite includes sealed cases",
					"suite %q matches %s, a sealed case of capability %q: builders see %s cases. Narrow its pattern.", s.Name, f, c, s.Name))
			}
		}
	}
}

// DeclaredSteps returns the top-level steps, in declaration order when the configuration
// came from Load (see EachStep).
func (c *Config) DeclaredSteps() []*Step {
	if len(c.stepOrder) == len(c.Steps) {
		return c.stepOrder
	}
	out := make([]*Step, 0, len(c.Steps))
	for _, s := range c.Steps {
		out = append(out, s)
	}
	return out
}

// SetDeclaredSteps makes steps, which must be the values of c.Steps, the order of
// DeclaredSteps and EachStep: for a configuration rebuilt from an encoding of one.
func (c *Config) SetDeclaredSteps(steps []*Step) { c.stepOrder = steps }

// EachStep calls fn with every step of the configuration (top-level, recipes', products'
// and their checks). A loaded configuration's top-level steps come first, in declaration
// order, which is nearly the order of their memory: a pass in the order of their map would
// take a cache miss for each. The rest come in no particular order.
func (c *Config) EachStep(fn func(*Step)) {
	if len(c.stepOrder) == len(c.Steps) {
		for _, s := range c.stepOrder {
			fn(s)
		}
	} else {
		for _, s := range c.Steps {
			fn(s)
		}
	}
	for _, r := range c.Recipes {
		for _, s := range r.Steps {
			fn(s)
		}
	}
	for _, p := range c.Products {
		for _, s := range p.Steps {
			fn(s)
		}
		for _, s := range p.Checks {
			fn(s)
		}
	}
}

// ValidHTTPPath reports whether p can be sent as an HTTP request target as written: an
// absolute path with an optional query, printable ASCII without spaces or a fragment.
func ValidHTTPPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

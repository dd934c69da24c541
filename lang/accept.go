package lang

import (
	"strings"

	"github.com/foundry-build/foundry/digest"
	"github.com/hashicorp/hcl/v2"
)

// Acceptance is a product's accept "service" block: the service the product assembles,
// run the way a service capability's candidate is (its image, the interface's entrypoint,
// port and readiness), with a persistent data volume, and the cases it must answer through
// that interface (spec/language.md §10, spec/capability-cases.md §9). Its responses are
// judged by Contract, as a capability's are.
type Acceptance struct {
	Kind  string    // "service", the only kind: a product's cli acceptance is a check
	Image *Artifact // the seed the service runs on
	// Files are laid over the image, as a package's: step outputs of the product,
	// dir() or inline text.
	Files map[string]*Artifact
	// Data is where the data volume is mounted read-write, "" for none: a directory of the
	// run's scratch, new for each case and kept across the case's restarts.
	Data        string
	Interface   *Interface // Kind "service": entrypoint, port, ready, schemas, errors
	Equivalence string
	Tolerance   *Tolerance
	Cases       *Suite        // Name "acceptance": the case files
	CasesDigest digest.Digest // of the case files' contents, as the load's suite input
	Range       hcl.Range
}

// SuiteAcceptance names a product's acceptance cases as a suite.
const SuiteAcceptance = "acceptance"

// AcceptanceAddress is the address of product's acceptance: what its cases are recorded
// and judged under.
func AcceptanceAddress(product string) string { return "product." + product + ".accept" }

// Contract is the contract an acceptance of product is judged by: its interface,
// equivalence and tolerance under the acceptance's address, as engine/verdict judges a
// service capability's responses.
func (a *Acceptance) Contract(product string) *Capability {
	return &Capability{Name: AcceptanceAddress(product), Interface: a.Interface, Equivalence: a.Equivalence,
		Tolerance: a.Tolerance, Effects: []string{}, Suites: map[string]*Suite{SuiteAcceptance: a.Cases}, DeclRange: a.Range}
}

// decodeAccept decodes a product's accept block. Its attributes are a service interface's
// (decoded by the same code as a capability's) plus image, files, data, equivalence and
// cases; a tolerance block qualifies numeric.
func (l *loader) decodeAccept(b *hcl.Block, product string, scope *stepScope) *Acceptance {
	ac := &Acceptance{Kind: b.Labels[0], Range: b.DefRange, Equivalence: "bytes", Files: map[string]*Artifact{}}
	if ac.Kind != "service" {
		l.diags = append(l.diags, errorf(b.LabelRanges[0].Ptr(), "Invalid acceptance kind",
			"%q is not an acceptance kind; use \"service\" (a product's command-line acceptance is a check block).%s", ac.Kind, didYouMean(ac.Kind, []string{"service"})))
		return ac
	}
	attrs := append(interfaceAttributes("service"),
		hcl.AttributeSchema{Name: "image", Required: true}, hcl.AttributeSchema{Name: "files"}, hcl.AttributeSchema{Name: "data"},
		hcl.AttributeSchema{Name: "equivalence"}, hcl.AttributeSchema{Name: "cases", Required: true})
	content, diags := l.content(b.Body, &hcl.BodySchema{Attributes: attrs, Blocks: []hcl.BlockHeaderSchema{{Type: "tolerance"}}})
	l.diags = append(l.diags, diags...)
	ctx := l.baseContext()
	ac.Interface = &Interface{Kind: "service", Range: b.DefRange, Errors: map[string]int{}}
	l.decodeInterfaceAttributes(ac.Interface, content, ctx)
	l.decodeEquivalence(content, ctx, &ac.Equivalence)
	for _, blk := range content.Blocks {
		if ac.Tolerance != nil {
			l.diags = append(l.diags, errorf(blk.DefRange.Ptr(), "Duplicate tolerance block", "An accept block has one tolerance block."))
			continue
		}
		ac.Tolerance = l.decodeTolerance(blk, ctx)
	}
	if ac.Tolerance != nil && ac.Equivalence != "numeric" {
		l.diags = append(l.diags, errorf(b.DefRange.Ptr(), "Unexpected tolerance", "A tolerance block applies only to equivalence = \"numeric\"."))
	}
	if ac.Equivalence == "numeric" && ac.Tolerance == nil {
		ac.Tolerance = &Tolerance{}
	}
	if a := content.Attributes["image"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, scope); !d.HasErrors() {
			ac.Image = l.artifact(v, a.Expr.Range(), "image", false, ArtifactSeed)
		}
	}
	if a := content.Attributes["files"]; a != nil {
		if v, d := l.eval(a.Expr, ctx, scope); !d.HasErrors() {
			ac.Files = l.artifactMap(v, a.Expr.Range(), "files", true, ArtifactStepOutput, ArtifactProjectDir, ArtifactSource)
			l.checkArtifactPaths(ac.Files, a.Expr.Range(), "/app/server")
		}
	}
	l.optString(content, "data", ctx, &ac.Data)
	if a := content.Attributes["data"]; a != nil {
		l.checkDataPath(ac, a.Expr.Range())
	}
	ac.Cases = &Suite{Name: SuiteAcceptance, Range: b.DefRange}
	if a := content.Attributes["cases"]; a != nil {
		ac.Cases.Pattern, ac.Cases.Files, ac.CasesDigest = l.decodeCases(a, ctx, AcceptanceAddress(product), func(string) {})
	}
	return ac
}

// checkDataPath refuses a data volume that is not an absolute, clean path, that is one of
// the sandbox's reserved paths, or that would hide files laid over the image.
func (l *loader) checkDataPath(ac *Acceptance, rng hcl.Range) {
	d := ac.Data
	if !cleanAbs(d) {
		l.diags = append(l.diags, errorf(rng.Ptr(), "Invalid data path", "data = %q must be an absolute, clean sandbox path such as \"/data\".", d))
		return
	}
	for _, r := range reservedTargets {
		if d == r || (r != "/" && strings.HasPrefix(d, r+"/")) {
			l.diags = append(l.diags, errorf(rng.Ptr(), "Invalid data path", "data = %q is reserved: / is the image, /out and /tmp are the sandbox's own, /proc, /dev and /sys belong to the runtime.", d))
			return
		}
	}
	for p := range ac.Files {
		if p == d || strings.HasPrefix(p, d+"/") || strings.HasPrefix(d, p+"/") {
			l.diags = append(l.diags, errorf(rng.Ptr(), "Invalid data path", "data = %q overlaps files[%q]: the volume would hide it, or it the volume.", d, p))
			return
		}
	}
}

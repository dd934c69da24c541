package lang

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/foundry-build/foundry/digest"
)

// ArtifactKind says what content an Artifact stands for.
type ArtifactKind string

const (
	ArtifactProjectFile ArtifactKind = "project_file" // a file inside the project directory
	ArtifactProjectDir  ArtifactKind = "project_dir"  // a directory inside the project directory
	ArtifactHostFile    ArtifactKind = "host_file"    // a host file, by absolute path
	ArtifactHostDir     ArtifactKind = "host_dir"     // a host directory, by absolute path
	ArtifactInline      ArtifactKind = "inline"       // a string written in the configuration
	ArtifactSeed        ArtifactKind = "seed"         // the image of a seed block
	ArtifactCapability  ArtifactKind = "capability"   // the packaged files of a capability
	ArtifactStepOutput  ArtifactKind = "step_output"  // a declared output of a step
	ArtifactSource      ArtifactKind = "source"       // the tree of a source block, fetched by Foundry
)

// Artifact is the value of a reference or of an input function: content the engine can
// address. Kinds read at evaluation time (files, directories, inline text) carry their
// Digest; the others name the node that produces them, and the engine supplies the digest.
type Artifact struct {
	Kind   ArtifactKind
	Path   string // project-relative path, absolute host path, or step output path
	Node   string // producing node address: seed.x, capability.x, step.y, recipe.r.step.y
	IsDir  bool
	Digest digest.Digest
	Mode   uint32 // 0755 or 0644 for files
	Inline []byte // ArtifactInline only
	Range  hcl.Range
}

func (a *Artifact) String() string {
	switch a.Kind {
	case ArtifactSeed, ArtifactCapability, ArtifactSource:
		return a.Node
	case ArtifactStepOutput:
		return a.Node + ".output[" + strconv.Quote(a.Path) + "]" // as %q, a plan's hot path
	case ArtifactInline:
		return fmt.Sprintf("inline(%d bytes)", len(a.Inline))
	default:
		return fmt.Sprintf("%s(%q)", a.Kind, a.Path)
	}
}

// Same reports whether b refers to the same content as a: the same kind, node and path, and
// for inline text the same bytes.
func (a *Artifact) Same(b *Artifact) bool {
	return a.Kind == b.Kind && a.Node == b.Node && a.Path == b.Path && bytes.Equal(a.Inline, b.Inline)
}

// ArtifactType is the cty capsule type of Artifact values.
var ArtifactType = cty.CapsuleWithOps("artifact", reflect.TypeOf(Artifact{}), &cty.CapsuleOps{
	GoString:     func(v interface{}) string { return v.(*Artifact).String() },
	TypeGoString: func(reflect.Type) string { return "lang.ArtifactType" },
	RawEquals: func(a, b interface{}) bool {
		x, y := a.(*Artifact), b.(*Artifact)
		return x.Kind == y.Kind && x.Path == y.Path && x.Node == y.Node && x.Digest == y.Digest
	},
})

func artifactVal(a *Artifact) cty.Value { return cty.CapsuleVal(ArtifactType, a) }

// asArtifact returns the Artifact inside v, or nil when v is not one.
func asArtifact(v cty.Value) *Artifact {
	if v.IsNull() || !v.IsKnown() || !v.Type().Equals(ArtifactType) {
		return nil
	}
	return v.EncapsulatedValue().(*Artifact)
}

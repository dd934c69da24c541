package evaluate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
)

// DossierDependency is the name, in a signed test result's configuration, of the frozen
// reference dossier its differential cases took their expected outputs from: its digest is
// the dossier's (spec/capability.md §5b).
const DossierDependency = provenance.ConfigReferenceDossier

// A Disagreement is a reference and the contract disagreeing: the reference failed on an
// input the contract calls valid (it crashed, or printed what the equivalence cannot
// compare), or its output on a hand-written case is not what the case expects. The job (or
// the apply) stops: the evaluator cannot say which of the two is wrong.
type Disagreement struct {
	Reference string
	Case      string // the case file, or the generated input
	Why       string
}

func (d *Disagreement) Error() string {
	return fmt.Sprintf("reference and contract disagree: reference %s on case %s: %s", d.Reference, d.Case, d.Why)
}

// DossierEntry is one reference of a dossier as frozen: its image pinned by digest, how it
// runs, where it came from, and the rights granted over it.
type DossierEntry struct {
	Name       string   `json:"name"`
	Image      string   `json:"image"`
	Entrypoint []string `json:"entrypoint"`
	Licence    string   `json:"licence"`
	Origin     string   `json:"origin"`
	Inspect    bool     `json:"inspect"`
	Observe    bool     `json:"observe"`
	Distribute bool     `json:"distribute"`
}

// Dossier is a capability's reference dossier frozen for a job or an evaluation: every
// reference with its image's digest, and the digest of them all (what the job, each signed
// test result and the admission record).
type Dossier struct {
	Digest     digest.Digest  `json:"digest"`
	References []DossierEntry `json:"references"`
	images     map[string]executors.Image
}

// DossierOf freezes capability capb's reference dossier, each reference's image as images
// has it built; nil when its reconstruct block names no reference.
func DossierOf(capb *lang.Capability, images func(addr string) (executors.Image, bool)) (*Dossier, error) {
	rc := capb.Reconstruct
	if rc == nil || len(rc.References) == 0 {
		return nil, nil
	}
	d := &Dossier{images: map[string]executors.Image{}}
	for _, name := range slices.Sorted(maps.Keys(rc.References)) {
		r := rc.References[name]
		if r.Image == nil {
			return nil, fmt.Errorf("reference %s has no image", name)
		}
		var img executors.Image
		ok := images != nil
		if ok {
			img, ok = images(r.Image.Node)
		}
		if !ok {
			return nil, fmt.Errorf("reference %s: image %s is not built", name, r.Image.Node)
		}
		d.images[name] = img
		d.References = append(d.References, DossierEntry{Name: name, Image: img.Digest, Entrypoint: r.Entrypoint,
			Licence: r.Licence, Origin: r.Origin, Inspect: r.Inspect, Observe: r.Observe, Distribute: r.Distribute})
	}
	var err error
	d.Digest, _, err = digest.Of(d.References)
	return d, err
}

// Dependency records the dossier in a signed test result's configuration.
func (d *Dossier) Dependency() provenance.Dependency {
	return provenance.Dependency{Name: DossierDependency, URI: "foundry:reference-dossier?references=" + strings.Join(d.names(), ","), Digest: string(d.Digest)}
}

func (d *Dossier) names() []string {
	var out []string
	for _, r := range d.References {
		out = append(out, r.Name)
	}
	return out
}

// referenceRuns remembers, for one Evaluator, the hand-written cases already found to agree
// with a dossier's references: each is checked once per run, not once per candidate.
type referenceRuns struct {
	mu     sync.Mutex
	agreed map[string]bool
}

// runReference runs reference name of dossier d once on in, in a fresh evaluation sandbox
// of its own (never the candidate's), and returns what it observed.
func (ev *Evaluator) runReference(ctx context.Context, capb *lang.Capability, d *Dossier, name string, in []byte) (verdict.Observation, error) {
	r := capb.Reconstruct.References[name]
	o, err := ev.sandbox().RunCLI(ctx, "reference "+name+" of capability."+capb.Name, r.Entrypoint, d.images[name], append(slices.Clip(in), '\n'))
	if errors.Is(err, executors.ErrNotStarted) {
		return o, &Disagreement{Reference: name, Case: abbreviate(string(in), 80), Why: "its entrypoint could not be started: " + err.Error()}
	}
	return o, err
}

// Observe runs reference name of dossier d once on in, a builder's oracle request (one
// input, as a generated case's is given), exactly as a differential case's expected output
// is taken: in a fresh evaluation sandbox of its own, never with a candidate. A reference
// the dossier does not hold, or whose rights do not include observe, is not run. Charging
// the run as a probe is the caller's (engine/reconstruct).
func (ev *Evaluator) Observe(ctx context.Context, capb *lang.Capability, d *Dossier, name string, in []byte) (verdict.Observation, error) {
	if d == nil || !slices.ContainsFunc(d.References, func(r DossierEntry) bool { return r.Name == name && r.Observe }) {
		return verdict.Observation{}, fmt.Errorf("reference %s: the dossier does not allow observing it (observe = false, or no such reference)", name)
	}
	return ev.runReference(ctx, capb, d, name, in)
}

// referenceExpectation is what reference name expects of in: its output, or the declared
// error it exits with; a run that can be neither is a Disagreement naming what (the case).
func (ev *Evaluator) referenceExpectation(ctx context.Context, capb *lang.Capability, d *Dossier, name, what string, in []byte) (verdict.Expectation, error) {
	o, err := ev.runReference(ctx, capb, d, name, in)
	if err != nil {
		var dis *Disagreement
		if errors.As(err, &dis) {
			dis.Case = what
		}
		return verdict.Expectation{}, err
	}
	e, why := verdict.ExpectationOf(capb, o)
	if why != "" {
		return e, &Disagreement{Reference: name, Case: what, Why: fmt.Sprintf("on input %s the reference %s", abbreviate(string(in), 120), why)}
	}
	return e, nil
}

// differential gives each case of cases generated for a reference (suiteCase.ref) the
// reference's output as its expectation, running the reference once per case. The cases
// are copied: a suite's cases are shared by nothing else, but a generated case's
// expectation belongs to this evaluation's dossier.
func (ev *Evaluator) differential(ctx context.Context, capb *lang.Capability, d *Dossier, cases []suiteCase) ([]suiteCase, error) {
	out := slices.Clone(cases)
	for i, sc := range out {
		if sc.ref == "" {
			continue
		}
		if d == nil {
			return nil, fmt.Errorf("capability %s: case %s expects reference %s, and there is no dossier", capb.Name, sc.name, sc.ref)
		}
		what := sc.c.Name
		if strings.HasPrefix(what, "sha256:") {
			what = "a generated sealed case " + digest.Digest(what).Short()
		}
		if len(sc.c.Requests) > 0 {
			// A service case (a file: what names it): the candidate's trace of effects
			// must be the reference's.
			c, err := ev.referenceTrace(ctx, capb, d, sc.ref, what, sc.c)
			if err != nil {
				return nil, err
			}
			out[i].c = c
			continue
		}
		e, err := ev.referenceExpectation(ctx, capb, d, sc.ref, what, sc.c.Input)
		if err != nil {
			return nil, err
		}
		c := *sc.c
		c.Expect = e
		out[i].c = &c
	}
	return out, nil
}

// checkReferences runs each reference that some suite expects outputs from on every
// hand-written cli case (dev, repair and sealed), and returns a Disagreement for the first
// whose output the case does not accept: a reference the contract's own cases refute cannot
// judge candidates. names gives a sealed case's file (the operator's to see). Each case is
// checked once per Evaluator and dossier.
func (ev *Evaluator) checkReferences(ctx context.Context, capb *lang.Capability, d *Dossier, su *suites) error {
	refs := map[string]bool{}
	for _, s := range capb.Suites {
		if s.Generate != nil && s.Generate.Expect != "" {
			refs[s.Generate.Expect] = true // a trace suite's cases have no expectations to check
		}
	}
	if d == nil || len(refs) == 0 || capb.Interface.Kind != "cli" {
		return nil
	}
	ev.refs.mu.Lock()
	defer ev.refs.mu.Unlock()
	if ev.refs.agreed == nil {
		ev.refs.agreed = map[string]bool{}
	}
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		for _, sc := range slices.Concat(su.dev, su.repair, su.sealed) {
			if sc.ref != "" || sc.c.Expect.Contract || len(sc.c.Requests) > 0 {
				continue // generated: it has no hand-written expectation
			}
			key := string(d.Digest) + " " + name + " " + string(sc.digest)
			if ev.refs.agreed[key] {
				continue
			}
			what := sc.c.Name
			if f := su.names[sc.digest]; f != "" {
				what = f
			}
			o, err := ev.runReference(ctx, capb, d, name, sc.c.Input)
			if err != nil {
				var dis *Disagreement
				if errors.As(err, &dis) {
					dis.Case = what
				}
				return err
			}
			if v := verdict.Judge(capb, sc.c, o); !v.Pass {
				return &Disagreement{Reference: name, Case: what, Why: "the reference " + v.Describe()}
			}
			ev.refs.agreed[key] = true
		}
	}
	return nil
}

// refuseDistribution refuses a candidate (its package tree) that holds a file
// byte-identical to a file of a reference whose dossier says distribute = false: its bytes
// must not reach a candidate. Empty files are no one's. The candidate's base image, a seed
// the operator chose, is not the candidate's own.
func (ev *Evaluator) refuseDistribution(capb *lang.Capability, d *Dossier, tree digest.Digest) (*Rejection, error) {
	if d == nil {
		return nil, nil
	}
	var cand *digest.Manifest
	for _, r := range d.References {
		if r.Distribute {
			continue
		}
		img := d.images[r.Name]
		if img.Rootfs == "" {
			return nil, fmt.Errorf("reference %s: its image %s has no unpacked root to compare candidates with", r.Name, img.Digest)
		}
		man, _, err := digest.Dir(img.Rootfs)
		if err != nil {
			return nil, fmt.Errorf("reference %s: reading its files: %w", r.Name, err)
		}
		files := map[digest.Digest]string{}
		for _, e := range man.Entries {
			if e.Type == "file" && e.Size > 0 {
				files[e.Digest] = e.Path
			}
		}
		if cand == nil {
			if cand, err = ev.Workspace.Store.ReadManifest(tree); err != nil {
				return nil, err
			}
		}
		for _, e := range cand.Entries {
			if p, ok := files[e.Digest]; ok && e.Type == "file" && e.Size > 0 {
				return &Rejection{Refused: true, Reason: fmt.Sprintf("its file /%s is byte-identical to /%s of reference %s, whose dossier does not allow distributing its bytes (distribute = false; licence %s)",
					strings.TrimPrefix(e.Path, "/"), strings.TrimPrefix(p, "/"), r.Name, r.Licence)}, nil
			}
		}
	}
	return nil, nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// AdmissionPolicyURI names the admission rules Foundry applies (spec/capability.md): dev
// and repair suites pass, then the sealed suite passes on its one evaluation.
const AdmissionPolicyURI = "https://foundry.dev/policy/admission/v1"

// admit publishes an evaluated candidate to the project registry with its evidence and
// returns the reference and manifest digest it was published as. The publish is an external
// effect: it goes through the outbox with a deterministic ID. The outbox row is an index,
// never a fact to repeat: the reference returned is the one this publish wrote and signed.
func (r *runner) admit(ctx context.Context, n *graph.Node, recipe string, tree digest.Digest, tests [][]byte) (string, digest.Digest, error) {
	if r.opt.Registry == nil {
		return "", "", errors.New("no registry is configured to publish admitted capabilities to")
	}
	var inputs []provenance.Attestation
	var provEnvs [][]byte
	for a, nr := range r.snapshot() {
		if !strings.HasPrefix(a, recipe+".step.") || nr.step == nil {
			continue
		}
		for _, d := range nr.step.Attestations {
			b, err := r.ws.Store.Get(d)
			if err != nil {
				return "", "", fmt.Errorf("provenance of %s: %w", a, err)
			}
			inputs = append(inputs, provenance.Attestation{Source: a, Envelope: b})
			provEnvs = append(provEnvs, b)
		}
	}
	for _, env := range tests {
		inputs = append(inputs, provenance.Attestation{Source: "evaluation", Envelope: env})
	}
	dest := r.opt.Registry.String()
	id, err := state.EffectID(r.g.Config.Project.Name, string(tree), n.Address, "publish", dest)
	if err != nil {
		return "", "", err
	}
	eff, _, err := r.ws.State.EffectIntent(ctx, state.Effect{ID: id, RunID: r.runID, Address: n.Address, Kind: "publish", Destination: dest})
	if err != nil {
		return "", "", err
	}
	switch eff.Status {
	case state.EffectSucceeded:
		// An earlier apply recorded this publish, yet the plan found no admitted version:
		// the registry lost it, or its evidence no longer binds it. Publishing is idempotent
		// (content-addressed; attaching adds what is missing), so it is published again.
		m, err := r.publish(ctx, n, recipe, tree, provEnvs, tests, inputs)
		if err != nil {
			return "", "", err
		}
		return dest + "@" + string(m), m, nil
	case state.EffectUnknown:
		// An apply that died after dispatching this publish left its outcome unknown. The
		// reconciliation of a publish is to publish again, for the same reason.
		why := fmt.Sprintf("reconciled by run %s: run %s died after dispatching it; publishing is idempotent, so it is published again", r.runID, eff.RunID)
		if err := r.ws.State.ResolveEffect(ctx, id, state.EffectFailed, why); err != nil {
			return "", "", err
		}
		r.emit(event.Event{Type: "effect_reconciled", Node: n.Address, Recipe: recipe, Message: fmt.Sprintf("the publish to %s that run %s dispatched has an unknown outcome; publishing is idempotent, so it is published again", dest, eff.RunID)})
	}
	if err := r.ws.State.EffectDispatching(ctx, id, r.runID); err != nil {
		return "", "", err
	}
	r.fault(FaultAfterDispatch, n.Address)
	m, err := r.publish(ctx, n, recipe, tree, provEnvs, tests, inputs)
	if err != nil {
		r.ws.State.EffectFinished(context.WithoutCancel(ctx), id, state.EffectFailed, err.Error())
		return "", "", err
	}
	ref := dest + "@" + string(m)
	if err := r.ws.State.EffectFinished(ctx, id, state.EffectSucceeded, ref); err != nil {
		return "", "", err
	}
	return ref, m, nil
}

// resourceURI is the URI a verification summary names the published manifest by: the
// layout's own "oci-layout:PATH@DIGEST", or "oci://HOST/REPO@DIGEST" for a registry.
func resourceURI(s registry.Store, m digest.Digest) string {
	ref := s.String() + "@" + string(m)
	if strings.HasPrefix(ref, registry.LayoutScheme) {
		return ref
	}
	return "oci://" + ref
}

// publish stores the capability artifact, untagged; mints the verification summary that
// binds its contract, its manifest and its tree (over the candidate's provenance and test
// results, inputs); attaches every attestation; and only then points the contract tag at it,
// so that the tag never names a manifest without its evidence. Every step is idempotent
// (content-addressed), which is what lets a dispatched-but-unknown publish be reconciled by
// publishing again.
func (r *runner) publish(ctx context.Context, n *graph.Node, recipe string, tree digest.Digest, prov, tests [][]byte, inputs []provenance.Attestation) (digest.Digest, error) {
	m, err := registry.Publish(ctx, r.opt.Registry, r.ws.Store, registry.Capability{
		Contract: n.Definition, Tree: tree, Name: n.Capability.Name, Version: tree.Hex()[:12],
		Target: n.Capability.Target,
	})
	if err != nil {
		return "", err
	}
	pub, err := provenance.NewVerifier("signing key "+r.opt.Signer.KeyID(), r.opt.Signer.PublicKey())
	if err != nil {
		return "", err
	}
	policy := digest.FromBytes([]byte(AdmissionPolicyURI + "\ndev and repair pass; sealed passes on its one evaluation\n"))
	vsa, err := r.att.Sign(provenance.NewVerificationSummary(&provenance.Admission{
		Subject:        provenance.Artifact{Name: n.Capability.Name, Digest: string(tree)},
		ContractDigest: string(n.Digest),
		Manifest:       string(m),
		ResourceURI:    resourceURI(r.opt.Registry, m),
		TimeVerified:   time.Now(),
		Policy:         provenance.PolicyRef{URI: AdmissionPolicyURI, Digest: string(policy)},
		Inputs:         inputs,
		Keys:           []*provenance.Verifier{pub},
	}))
	if err != nil {
		return "", err
	}
	// The packaging itself is an action Foundry observed (on the host, unsandboxed): its
	// provenance names the published manifest and the tree, with the step outputs it was
	// assembled from as dependencies.
	if pkg, err := r.packageProvenance(n, recipe, tree, m); err != nil {
		return "", fmt.Errorf("provenance of the package: %w", err)
	} else if pkg != nil {
		prov = append(prov, pkg)
	}
	for _, group := range []struct {
		envs  [][]byte
		ptype string
	}{{prov, provenance.PredicateSLSAProvenance}, {tests, provenance.PredicateTestResult}, {[][]byte{vsa}, provenance.PredicateVSA}} {
		for _, env := range group.envs {
			if _, err := registry.Attach(ctx, r.opt.Registry, m, env, group.ptype); err != nil {
				return "", err
			}
		}
	}
	if err := r.opt.Registry.Tag(ctx, ContractTag(n.Digest), m); err != nil {
		return "", err
	}
	return m, nil
}

// ContractTag is the registry tag under which the latest admitted version of a contract is
// published; plans resolve it to a digest once and pin that.
func ContractTag(contract digest.Digest) string { return "contract-" + contract.Hex() }

// pullAdmitted fetches the pinned admitted version, verifying its attestations with the
// trusted keys before anything is written, and stores its files as a tree.
func (r *runner) pullAdmitted(ctx context.Context, n *graph.Node, pin *Admitted) (digest.Digest, error) {
	if r.opt.Registry == nil {
		return "", errors.New("no registry is configured")
	}
	dest := filepath.Join(r.scratch, "pull-"+workspace.NewID())
	pulled, err := registry.Pull(ctx, r.opt.Registry, string(pin.Digest), dest, registry.PullOptions{
		Keys: r.opt.TrustedKeys, Quarantine: r.ws.State, Contract: n.Digest,
		Policy: provenance.Policy{PredicateTypes: []string{provenance.PredicateVSA}},
	})
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dest)
	tree, _, err := r.ws.Store.PutDir(dest)
	if err != nil {
		return "", err
	}
	if tree != pulled.Tree || (pin.Tree != "" && tree != pin.Tree) {
		return "", fmt.Errorf("pulled files hash to %s; the evidence binds %s and the plan pinned %s", tree, pulled.Tree, pin.Tree)
	}
	return tree, nil
}

// packageProvenance mints and signs the provenance of assembling and publishing a
// capability artifact: subjects are the manifest and the tree; dependencies are the base
// image and every packaged step output, by digest, with its producer. It returns nil when
// the package has no base image to name as its environment.
func (r *runner) packageProvenance(n *graph.Node, recipe string, tree, manifest digest.Digest) ([]byte, error) {
	snap := r.snapshot()
	pkgNode := r.g.Nodes[recipe+".package"]
	if pkgNode == nil || pkgNode.Package.Base == nil {
		return nil, nil
	}
	base := snap[pkgNode.Package.Base.Node]
	if base == nil {
		return nil, nil
	}
	e := &provenance.Execution{
		InvocationID: fmt.Sprintf("%s/%s/publish", r.runID, n.Address),
		Executor:     "packager", Isolation: provenance.IsolationNone,
		Versions:     map[string]string{"foundry": r.opt.Version},
		Step:         pkgNode.Definition,
		ActionDigest: string(pkgNode.Digest), Platform: n.Capability.Target,
		Network: provenance.Network{Mode: executors.NetworkNone},
		Image:   provenance.Dependency{Name: "image", URI: "foundry:" + pkgNode.Package.Base.Node, Digest: base.image.Digest},
		Outputs: []provenance.Artifact{
			{Name: "manifest", Digest: string(manifest), MediaType: "application/vnd.oci.image.manifest.v1+json"},
			{Name: "files", Digest: string(tree)},
		},
		StartedOn: time.Now(), FinishedOn: time.Now(),
	}
	for _, path := range slices.Sorted(maps.Keys(pkgNode.Package.Files)) {
		a := pkgNode.Package.Files[path]
		if a.Kind != lang.ArtifactStepOutput {
			continue
		}
		o, producer, err := r.recordedOutput(a)
		if err != nil {
			return nil, err
		}
		e.Inputs = append(e.Inputs, provenance.Dependency{Name: path, URI: "foundry:" + a.Node + "#" + a.Path,
			Digest: string(o.Digest), Producer: string(producer)})
	}
	return r.att.Sign(provenance.NewProvenance(e))
}

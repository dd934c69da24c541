package admit

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
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/graph"
	"github.com/foundry-build/foundry/engine/outbox"
	"github.com/foundry-build/foundry/engine/workspace"
	"github.com/foundry-build/foundry/executors"
	"github.com/foundry-build/foundry/lang"
	"github.com/foundry-build/foundry/provenance"
	"github.com/foundry-build/foundry/registry"
)

// PolicyURI names the admission rules Foundry applies (spec/capability.md): dev and
// repair suites pass, then the sealed suite passes on its one evaluation.
const PolicyURI = "https://foundry.dev/policy/admission/v1"

// Fault points of a publish (engine/run's FaultInjector), with the capability's address,
// besides the outbox's FaultBeforeDispatch.
const (
	// FaultAfterDispatch: the publish's dispatch is recorded in the outbox; nothing is
	// published yet.
	FaultAfterDispatch = outbox.FaultAfterDispatch
	// FaultAfterCommit: the manifest and all its attestations are in the registry; the
	// contract tag does not name it yet, so no plan pins it.
	FaultAfterCommit = outbox.FaultAfterCommit
	// FaultBeforeRecord: the contract tag names it (a plan pins it); the outbox does not
	// say the publish succeeded yet.
	FaultBeforeRecord = outbox.FaultBeforeRecord
)

// An Admitter admits, in one run, the candidates that passed evaluation, and pulls the
// admitted versions the plan pinned. It takes from the run only what it is given here.
type Admitter struct {
	Workspace *workspace.Workspace
	// Attester signs the verification summary and the package's provenance.
	Attester *workspace.Attester
	Graph    *graph.Graph
	// Registry is where admitted capabilities are published and pinned versions pulled
	// from; TrustedKeys verify what is pulled.
	Registry    registry.Store
	TrustedKeys []*provenance.Verifier
	Version     string                   // this Foundry's, recorded in the package's provenance
	RunID       string                   // the run's, which names the publish effects it records
	Scratch     string                   // the run's scratch directory, where a pull is unpacked
	Emit        func(event.Event)        // effect_reconciled
	Fault       func(point, node string) // called at the fault points above; may be nil
}

// Candidate is a recipe's build that passed evaluation, as the run hands it to admission.
type Candidate struct {
	Recipe string
	Tree   digest.Digest   // the package's files
	Base   executors.Image // the image the package's base names; zero when it has none
	// Steps are the results of the recipe's steps, by address: the provenance of each is an
	// input of the verification summary.
	Steps map[string]*cache.Result
	// Output is the recorded output that a step output the package holds refers to, with
	// its producer's action digest.
	Output func(*lang.Artifact) (*cache.Output, digest.Digest, error)
	Tests  [][]byte // the signed test results of its evaluation
	Ref    string   // the reference it was admitted as, once it was
	// Evidence says what its sealed evaluation proved (evaluate.Result.Evidence), shown
	// with its admission; "" when not known.
	Evidence string
	// Dossier is the digest of the reference dossier its evaluation was judged under
	// (evaluate.Result.Dossier); "" without one.
	Dossier digest.Digest
}

// Admit publishes c, a candidate of capability n that passed evaluation, to the project
// registry with its evidence, and returns the reference and manifest digest it was published
// as. The publish is an external effect: it goes through the outbox with a deterministic
// ID. The outbox row is an index, never a fact to repeat: the reference returned is the one
// this publish wrote and signed, or the one it is found as in the registry by digest.
func (ad *Admitter) Admit(ctx context.Context, n *graph.Node, c *Candidate) (string, digest.Digest, error) {
	recipe, tree, tests := c.Recipe, c.Tree, c.Tests
	if ad.Registry == nil {
		return "", "", errors.New("no registry is configured to publish admitted capabilities to")
	}
	var inputs []provenance.Attestation
	var provEnvs [][]byte
	for a, res := range c.Steps {
		for _, d := range res.Attestations {
			b, err := ad.Workspace.Store.Get(d)
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
	var m digest.Digest
	e := ad.publishEffect(n, tree, recipe, &m)
	e.Perform = func(ctx context.Context) (string, error) {
		var err error
		if m, err = ad.publish(ctx, n, c, provEnvs, inputs); err != nil {
			return "", err
		}
		return ad.Registry.String() + "@" + string(m), nil
	}
	ref, err := ad.outbox().Do(ctx, e)
	if err != nil {
		return "", "", err
	}
	// The reference returned is the one this publish wrote or found, never a row's result.
	return ref, m, nil
}

func (ad *Admitter) outbox() *outbox.Outbox {
	return &outbox.Outbox{State: ad.Workspace.State, RunID: ad.RunID, Fault: ad.Fault}
}

// publishEffect is the outbox effect of publishing tree as capability n (recipe's
// candidate, "" for a pinned version), with how it is found in the registry and without
// its Perform. Found, *m is the manifest it was found as.
func (ad *Admitter) publishEffect(n *graph.Node, tree digest.Digest, recipe string, m *digest.Digest) *outbox.Effect {
	return &outbox.Effect{
		Project: ad.Graph.Config.Project.Name, Revision: string(tree), Address: n.Address, Kind: "publish", Destination: ad.Registry.String(),
		// A publish recorded as succeeded (the registry lost it, or its evidence no longer
		// binds it), or whose outcome a crash lost, is looked for in the registry by digest;
		// what is not there is published again, idempotently (publish reuses what an
		// earlier, cut-short publish of the same manifest attached).
		Find: func(ctx context.Context) (string, bool, error) {
			adm, why, err := ad.findPublished(ctx, n, tree)
			if err != nil || adm == nil {
				return why, false, err
			}
			*m = adm.Digest
			return adm.Ref, true, nil
		},
		Reconciled: func(msg string) {
			ad.Emit(event.Event{Type: "effect_reconciled", Node: n.Address, Recipe: recipe, Message: msg})
		},
	}
}

// findPublished looks in the registry for tree published as capability n, as a plan pins:
// the contract tag must name a manifest whose verified evidence binds n's contract and
// exactly tree (Lookup). Not there, it returns nil and why; it is an error only when the
// registry cannot be read, so that the publish's outcome cannot be told.
func (ad *Admitter) findPublished(ctx context.Context, n *graph.Node, tree digest.Digest) (*Admitted, string, error) {
	dest, tag := ad.Registry.String(), ContractTag(n.Digest)
	if _, err := ad.Registry.Resolve(ctx, tag); errors.Is(err, registry.ErrNotFound) {
		return nil, fmt.Sprintf("%s does not tag %s, so it is published again", dest, tag), nil
	} else if err != nil {
		return nil, "", fmt.Errorf("the registry %s cannot be read: %w", dest, err)
	}
	adm, why, err := Lookup(ctx, ad.Registry, ad.TrustedKeys, ad.Workspace.State, n)
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("the registry %s cannot be read: %w", dest, err)
	case adm == nil:
		return nil, why + ", so it is published again", nil
	case adm.Tree != tree:
		return nil, fmt.Sprintf("%s names %s, another version (files %s), so this one is published again", tag, adm.Ref, adm.Tree), nil
	}
	return adm, "", nil
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
func (ad *Admitter) publish(ctx context.Context, n *graph.Node, c *Candidate, prov [][]byte, inputs []provenance.Attestation) (digest.Digest, error) {
	tree, tests := c.Tree, c.Tests
	m, err := registry.Publish(ctx, ad.Registry, ad.Workspace.Store, registry.Capability{
		Contract: n.Definition, Tree: tree, Name: n.Capability.Name, Version: tree.Hex()[:12],
		Target: n.Capability.Target,
	})
	if err != nil {
		return "", err
	}
	pub, err := provenance.NewVerifier("signing key "+ad.Attester.Signer.KeyID(), ad.Attester.Signer.PublicKey())
	if err != nil {
		return "", err
	}
	// What an earlier publish of this manifest, cut short by a crash, attached is reused:
	// performed again, a publish adds no second summary or packaging provenance that
	// differs from the first only in its time.
	prior, err := signedReferrers(ctx, ad.Registry, m, tree, pub)
	if err != nil {
		return "", err
	}
	vsa := prior[provenance.PredicateVSA]
	policy := digest.FromBytes([]byte(PolicyURI + "\ndev and repair pass; sealed passes on its one evaluation\n"))
	if vsa == nil {
		vsa, err = ad.Attester.Sign(provenance.NewVerificationSummary(&provenance.Admission{
			Subject:        provenance.Artifact{Name: n.Capability.Name, Digest: string(tree)},
			ContractDigest: string(n.Digest),
			Manifest:       string(m),
			ResourceURI:    resourceURI(ad.Registry, m),
			TimeVerified:   time.Now(),
			Policy:         provenance.PolicyRef{URI: PolicyURI, Digest: string(policy)},
			Inputs:         inputs,
			Keys:           []*provenance.Verifier{pub},
			Evidence:       c.Evidence,
			Dossier:        string(c.Dossier),
		}))
		if err != nil {
			return "", err
		}
	}
	// The packaging itself is an action Foundry observed (on the host, unsandboxed): its
	// provenance names the published manifest and the tree, with the step outputs it was
	// assembled from as dependencies.
	if pkg := prior[provenance.PredicateSLSAProvenance]; pkg != nil {
		prov = append(prov, pkg)
	} else if pkg, err := ad.packageProvenance(n, c, m); err != nil {
		return "", fmt.Errorf("provenance of the package: %w", err)
	} else if pkg != nil {
		prov = append(prov, pkg)
	}
	for _, group := range []struct {
		envs  [][]byte
		ptype string
	}{{prov, provenance.PredicateSLSAProvenance}, {tests, provenance.PredicateTestResult}, {[][]byte{vsa}, provenance.PredicateVSA}} {
		for _, env := range group.envs {
			if _, err := registry.Attach(ctx, ad.Registry, m, env, group.ptype); err != nil {
				return "", err
			}
		}
	}
	ad.fault(FaultAfterCommit, n.Address)
	if err := ad.Registry.Tag(ctx, ContractTag(n.Digest), m); err != nil {
		return "", err
	}
	ad.fault(FaultBeforeRecord, n.Address)
	return m, nil
}

func (ad *Admitter) fault(point, node string) {
	if ad.Fault != nil {
		ad.Fault(point, node)
	}
}

// signedReferrers returns, by predicateType, the first attestation attached to manifest m
// that key signed about both m and tree: what a publish of m made (its verification
// summary, its packaging provenance), never a step's provenance or a test result, which
// name only their own subjects. Referrers that do not verify are not its own, and ignored.
func signedReferrers(ctx context.Context, s registry.Store, m, tree digest.Digest, key *provenance.Verifier) (map[string][]byte, error) {
	atts, _, err := registry.Referrers(ctx, s, m)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, a := range atts {
		pt, subjects, err := provenance.SignedSubjects(a.Envelope, []*provenance.Verifier{key})
		if err != nil || out[pt] != nil || !slices.Contains(subjects, string(m)) || !slices.Contains(subjects, string(tree)) {
			continue
		}
		out[pt] = a.Envelope
	}
	return out, nil
}

// ContractTag is the registry tag under which the latest admitted version of a contract is
// published; plans resolve it to a digest once and pin that.
func ContractTag(contract digest.Digest) string { return "contract-" + contract.Hex() }

// Pull fetches pin, the admitted version of capability n the plan pinned, verifying its
// attestations with the trusted keys before anything is written, and stores its files as a
// tree.
func (ad *Admitter) Pull(ctx context.Context, n *graph.Node, pin *Admitted) (digest.Digest, error) {
	if ad.Registry == nil {
		return "", errors.New("no registry is configured")
	}
	tree, _, err := PullPinned(ctx, ad.Workspace, ad.Registry, ad.TrustedKeys, ad.Scratch, n.Digest, pin)
	if err != nil {
		return "", err
	}
	// A publish of this version whose outcome a killed apply lost after it tagged it is
	// settled now, by looking (the plan found it admitted): else the next plans would pin it
	// and no Admit would ever come to reconcile it. A registry that cannot tell leaves it
	// unknown; the pin itself stands on its evidence.
	var m digest.Digest
	var unknown *outbox.UnknownError
	if _, err := ad.outbox().Reconcile(ctx, ad.publishEffect(n, tree, "", &m)); err != nil && !errors.As(err, &unknown) {
		return "", fmt.Errorf("settling the publish of %s that a killed apply left unknown: %w", pin.Ref, err)
	}
	return tree, nil
}

// PullPinned fetches pin, an admitted version of the capability whose contract digest is
// contract, from registry s by its digest, as a plan's pin is pulled: the contract must be
// that one, nothing it names quarantined (ws's state), and a verification summary signed
// by one of keys must bind contract, manifest and the tree recomputed from the layers,
// before anything is kept. Its files are unpacked under scratch, stored in ws's content
// store as a tree, and the tree digest returned, with what the pull found (the contract's
// canonical JSON among it).
func PullPinned(ctx context.Context, ws *workspace.Workspace, s registry.Store, keys []*provenance.Verifier, scratch string, contract digest.Digest, pin *Admitted) (digest.Digest, *registry.Pulled, error) {
	dest := filepath.Join(scratch, "pull-"+workspace.NewID())
	pulled, err := registry.Pull(ctx, s, string(pin.Digest), dest, registry.PullOptions{
		Keys: keys, Quarantine: ws.State, Contract: contract,
		Policy: provenance.Policy{PredicateTypes: []string{provenance.PredicateVSA}},
	})
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dest)
	tree, _, err := ws.Store.PutDir(dest)
	if err != nil {
		return "", nil, err
	}
	if tree != pulled.Tree || (pin.Tree != "" && tree != pin.Tree) {
		return "", nil, fmt.Errorf("pulled files hash to %s; the evidence binds %s and the pin names %s", tree, pulled.Tree, pin.Tree)
	}
	return tree, pulled, nil
}

// packageProvenance mints and signs the provenance of assembling and publishing a
// capability artifact: subjects are the manifest and the tree; dependencies are the base
// image and every packaged step output, by digest, with its producer. It returns nil when
// the package has no base image to name as its environment.
func (ad *Admitter) packageProvenance(n *graph.Node, c *Candidate, manifest digest.Digest) ([]byte, error) {
	pkgNode := ad.Graph.Nodes[c.Recipe+".package"]
	if pkgNode == nil || pkgNode.Package.Base == nil {
		return nil, nil
	}
	e := &provenance.Execution{
		InvocationID: fmt.Sprintf("%s/%s/publish", ad.RunID, n.Address),
		Executor:     "packager", Isolation: provenance.IsolationNone,
		Versions:     map[string]string{"foundry": ad.Version},
		Step:         pkgNode.Definition,
		ActionDigest: string(pkgNode.Digest), Platform: n.Capability.Target,
		Network: provenance.Network{Mode: executors.NetworkNone},
		Image:   provenance.Dependency{Name: "image", URI: "foundry:" + pkgNode.Package.Base.Node, Digest: c.Base.Digest},
		Outputs: []provenance.Artifact{
			{Name: "manifest", Digest: string(manifest), MediaType: "application/vnd.oci.image.manifest.v1+json"},
			{Name: "files", Digest: string(c.Tree)},
		},
		StartedOn: time.Now(), FinishedOn: time.Now(),
	}
	for _, path := range slices.Sorted(maps.Keys(pkgNode.Package.Files)) {
		a := pkgNode.Package.Files[path]
		if a.Kind != lang.ArtifactStepOutput {
			continue
		}
		o, producer, err := c.Output(a)
		if err != nil {
			return nil, err
		}
		e.Inputs = append(e.Inputs, provenance.Dependency{Name: path, URI: "foundry:" + a.Node + "#" + a.Path,
			Digest: string(o.Digest), Producer: string(producer)})
	}
	return ad.Attester.Sign(provenance.NewProvenance(e))
}

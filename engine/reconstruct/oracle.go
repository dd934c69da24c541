package reconstruct

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/cache"
	"github.com/foundry-build/foundry/engine/evaluate"
	"github.com/foundry-build/foundry/engine/event"
	"github.com/foundry-build/foundry/engine/state"
	"github.com/foundry-build/foundry/lang"
)

// answer is one line of the next round's /job/oracle/round-N.jsonl: a request round N's
// builder wrote under lang.OracleDir, and what the reference answered, or why the request
// was refused (not run, not charged).
type answer struct {
	Request     string        `json:"request"` // its path, /out/oracle/REFERENCE/ID.json
	Reference   string        `json:"reference,omitempty"`
	InputDigest digest.Digest `json:"input_digest,omitempty"` // of the input as the reference got it (compact JSON)
	Output      *string       `json:"output,omitempty"`       // the reference's stdout
	Stderr      string        `json:"stderr,omitempty"`
	Exit        *int          `json:"exit,omitempty"`
	TimedOut    bool          `json:"timed_out,omitempty"`
	OOMKilled   bool          `json:"oom_killed,omitempty"`
	Error       string        `json:"error,omitempty"` // the reference could not be started (charged: it was tried)
	Refused     string        `json:"refused,omitempty"`

	in []byte // the input, as the reference gets it; nil for a refused request
}

// oracle answers the requests the round's builder wrote under lang.OracleDir (collected
// only for a capability with a reference dossier): each one a reference whose dossier
// allows observe is asked is run once, on its input, in the reference's own sandbox
// (Evaluator.Observe, as a differential case's expected output is taken), and charged as a
// probe. Requests past the probes the job has left, for a reference that does not allow
// observe, or that are no request (not REFERENCE/ID.json holding one JSON value) are refused:
// not run, not charged, and recorded with why. The answers and the charge are recorded
// together (state.ChargeOracle); the next round's /job holds the answers. A round whose
// oracle part was charged by an earlier apply does not ask again; one that apply died in
// asks again, and what the dead apply reserved stays spent, as an evaluation's does.
func (rd *round) oracle(ctx context.Context) (done bool, err error) {
	if rd.prior.Oracle != nil || rd.proposal == nil {
		return false, nil
	}
	out := rd.proposal.Result.Output(lang.OracleDir)
	if out == nil {
		return false, nil
	}
	start := time.Now()
	answers, err := rd.requests(out)
	if err != nil {
		return false, fmt.Errorf("%s: the builder's oracle requests: %w", rd.label(), err)
	}
	b := rd.state.Budget
	left := max(b.Probes-rd.rep.Used.Probes, 0)
	var run []int // the requests to run, in order
	for i := range answers {
		switch {
		case answers[i].Refused != "":
		case len(run) >= left:
			answers[i].Refused = fmt.Sprintf("over the probe budget: %d of %d probe(s) were left when the round's %d request(s) were asked", left, b.Probes, len(answers))
		default:
			run = append(run, i)
		}
	}
	var u state.Usage
	if len(run) > 0 {
		eres, err := rd.db().Reserve(context.WithoutCancel(ctx), rd.state.ID, rd.num,
			state.Reservation{Part: state.PartOracle, Wall: rd.wallLeft(rd.rep.Used), Probes: len(run), At: start})
		if err != nil {
			return false, err
		}
		for _, i := range run {
			a := &answers[i]
			o, err := rd.rc.Evaluator.Observe(ctx, rd.n.Capability, rd.dossier, a.Reference, a.in)
			var dis *evaluate.Disagreement
			switch {
			case ctx.Err() != nil:
				// The reservation stays open: the apply that resumes the round counts it as spent.
				return false, fmt.Errorf("stopped: %w", context.Cause(ctx))
			case errors.As(err, &dis):
				a.Error = dis.Why
			case err != nil:
				return false, fmt.Errorf("%s: asking reference %s (%s): %w", rd.label(), a.Reference, a.Request, err)
			default:
				stdout, exit := string(o.Stdout), o.ExitCode
				a.Output, a.Exit, a.Stderr, a.TimedOut, a.OOMKilled = &stdout, &exit, string(o.Stderr), o.TimedOut, o.OOMKilled
			}
			rd.rc.fault(FaultOracleAsking, rd.n.Address)
		}
		u = state.Usage{Wall: time.Since(start), Probes: len(run)}
		if eres.At.Before(start) {
			u = u.Add(eres.Spent(start)) // what the apply that died in it spent stays spent
		}
	}
	var lines []byte
	for _, a := range answers {
		line, err := json.Marshal(a)
		if err != nil {
			return false, err
		}
		lines = append(append(lines, line...), '\n')
	}
	d, err := rd.rc.Workspace.Store.PutBytes(lines)
	if err != nil {
		return false, err
	}
	o := state.Oracle{Asked: len(answers), Answered: len(run), Refused: len(answers) - len(run), Answers: d}
	rd.rep.Used = rd.rep.Used.Add(u)
	rd.rc.wall.Add(int64(u.Wall))
	if err := rd.db().ChargeOracle(context.WithoutCancel(ctx), rd.state.ID, rd.num, u, o); err != nil {
		return false, err
	}
	rd.rc.fault(FaultRoundAsked, rd.n.Address)
	rd.rc.emit(event.Event{Type: "reconstruct_round", Node: rd.n.Address, Recipe: rd.label(), Job: rd.state.ID,
		Message: fmt.Sprintf("round %d: the builder asked the oracle %d request(s): %d answered (charged as probes), %d refused; the next round reads the answers at %s/oracle/round-%d.jsonl",
			rd.num, o.Asked, o.Answered, o.Refused, lang.JobDir, rd.num)})
	return false, nil
}

// requests reads the builder's oracle requests, out (its lang.OracleDir), in path order:
// each an answer to fill, refused already when it cannot be asked, else holding the input
// as the reference gets it (compact JSON, as a generated case's input is).
func (rd *round) requests(out *cache.Output) ([]answer, error) {
	if out.Kind != cache.Tree {
		return []answer{{Request: lang.OracleDir, Refused: "not a request: requests are files " + lang.OracleDir + "/REFERENCE/ID.json"}}, nil
	}
	ws := rd.rc.Workspace
	man, err := ws.Store.ReadManifest(out.Digest)
	if err != nil {
		return nil, err
	}
	var answers []answer
	for _, e := range man.Entries {
		if e.Type != digest.TypeFile {
			continue
		}
		p := strings.TrimPrefix(path.Clean("/"+e.Path), "/")
		a := answer{Request: lang.OracleDir + "/" + p}
		ref, id, ok := strings.Cut(p, "/")
		var entry *evaluate.DossierEntry
		if rd.dossier != nil {
			if i := slices.IndexFunc(rd.dossier.References, func(r evaluate.DossierEntry) bool { return r.Name == ref }); i >= 0 {
				entry = &rd.dossier.References[i]
			}
		}
		switch {
		case !ok || strings.Contains(id, "/") || !strings.HasSuffix(id, ".json"):
			a.Refused = "not a request: requests are files " + lang.OracleDir + "/REFERENCE/ID.json"
		case entry == nil:
			a.Refused = fmt.Sprintf("the reference dossier has no reference %q", ref)
		case !entry.Observe:
			a.Reference = ref
			a.Refused = fmt.Sprintf("reference %s may not be observed: its dossier says observe = false", ref)
		default:
			a.Reference = ref
			b, err := ws.Store.Get(e.Digest)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.Request, err)
			}
			var in bytes.Buffer
			if err := json.Compact(&in, b); err != nil {
				a.Refused = "not a request: its content is not one JSON value: " + err.Error()
				break
			}
			a.in = in.Bytes()
			a.InputDigest = digest.FromBytes(in.Bytes())
		}
		answers = append(answers, a)
	}
	slices.SortStableFunc(answers, func(x, y answer) int { return strings.Compare(x.Request, y.Request) })
	return answers, nil
}

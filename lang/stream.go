package lang

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/foundry-build/foundry/internal/hclfast"
	"github.com/foundry-build/foundry/internal/hugeheap"
	"github.com/foundry-build/foundry/internal/parallel"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A streamed load parses and decodes the top-level steps piece by piece, so that the syntax
// trees of a piece are garbage as soon as its steps are decoded, instead of all living until
// every file is parsed.
//
// Why: the trees take ~30 bytes per byte of configuration, three times what the decoded
// steps take. Holding them all made a 100k-step project peak at 1.4 GiB, and decoding read
// each tree long after it was built, when it had left the processor's caches.
//
// A step refers to other steps, which may come later in the files. In the stream a step is
// decoded in an open scope (see stepScope): step.NAME.output["PATH"] evaluates to its
// artifact, whose value needs nothing of step NAME, and the reference is noted; the notes are
// checked once every step is known. Pieces that hold anything but steps (variables, locals,
// seeds, capabilities, recipes, products) are parsed and their other blocks decoded first,
// the classic way; their steps are then decoded in the open scope too.
//
// A streamed load succeeds only when nothing at all is reported: no parse or decode
// diagnostic, no bad or unusual reference to a step, no duplicate. Otherwise Load gives it
// up and loads the classic way from the start, so that a project with errors gets exactly
// the classic diagnostics, in the classic order. The configuration of a project without
// errors is the same either way (TestStreamedLoadSameAsClassic).

// streamLoad turns streamed loading on; the equivalence test turns it off to compare.
var streamLoad = true

// streamHeapPerSourceByte and streamTouchPerSourceByte are heapPerSourceByte and
// touchPerSourceByte for a streamed load, which never holds every tree: planning 10k and
// 100k steps streamed peaked at 108-116 and 940 MiB (classic: 155 MiB and 1.43 GiB). It
// reserves the classic load's address space all the same (see loader.reserve).
//
// The stream's first collection waits until the heap fills the touched memory (Reserve
// puts it off), and later ones until it reaches streamHeapPerSourceByte (hugeheap.Hold):
// the trees of the pieces decoded are garbage by then, and the live heap grows slowly.
// With 100k steps the stream ran one collection, at ~680 MB, and the heap reached ~760 MB
// when it ended, when the hold's release ran one more. The touch is a trade: less
// collects sooner, more faults in memory that a virtual machine's host may have taken
// back. Of 24, 28, 32 and 36 bytes, 28 planned 100k steps fastest and with the least
// memory (full benchmarks, alternated: 1.79-2.18 s and 940 MiB, against 1.94-2.28 s and
// 1,150 MiB with 36).
const (
	streamHeapPerSourceByte  = 48
	streamTouchPerSourceByte = 28
)

// streamChunk is how many pieces a worker of the stream takes at a time: enough that a
// chunk's fork of the loader costs little, few enough that the cores finish together.
const streamChunk = 32

// streamPiece is a piece of a configuration file in a streamed load.
type streamPiece struct {
	*piece
	rel string
	// steps is set for a piece that looks like it holds only steps (see stepsOnly): it is
	// parsed and decoded in the stream. The blocks of any other piece are in blocks. Either
	// way, the piece's steps are then in decoded, in order, with nil in the place of each
	// held one.
	steps   bool
	decoded []*Step
	blocks  []*hcl.Block
	// held are the steps of the piece that refer to steps in a way that needs every step
	// (see stepScope.open), with their outputs; they are decoded as the classic load does,
	// once every step is known.
	held []*scopeStep
}

// stepsOnly reports whether src looks like step blocks alone: every line that starts with a
// letter starts with "step". A guess, which the stream checks once the piece is parsed.
func stepsOnly(src []byte) bool {
	for i := 0; i < len(src); {
		c := src[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') {
			if len(src)-i < 5 || string(src[i:i+5]) != "step " && string(src[i:i+5]) != "step\"" {
				return false
			}
		}
		nl := bytes.IndexByte(src[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	return true
}

// stream loads the files streaming their steps. It reports whether it succeeded; when it
// did not, l is to be thrown away.
func (l *loader) stream(files []sourceFile, opts Options) bool {
	var ps, streamed []*streamPiece
	var others []pieceJob
	for i := range files {
		f := &files[i]
		for k := range f.pieces {
			sp := &streamPiece{piece: &f.pieces[k], rel: f.rel, steps: stepsOnly(f.pieces[k].src)}
			ps = append(ps, sp)
			if sp.steps {
				streamed = append(streamed, sp)
			} else {
				others = append(others, pieceJob{sp.piece, sp.rel})
			}
		}
		// The parser keeps only the text, for rendering diagnostics.
		l.parser.AddFile(f.rel, &hcl.File{Bytes: f.src})
	}

	// What steps may refer to besides steps, decoded first.
	parsePieces(others)
	byType := map[string][]*hcl.Block{}
	for _, sp := range ps {
		if sp.steps {
			continue
		}
		if !sp.clean {
			return false
		}
		content, diags := sp.body.Content(rootSchema)
		if len(diags) > 0 {
			return false
		}
		sp.blocks = content.Blocks
		for _, b := range sp.blocks {
			if len(b.Labels) == 1 && !l.declare(b.Type+"."+b.Labels[0], b) {
				return false
			}
			byType[b.Type] = append(byType[b.Type], b)
		}
	}
	if !l.decodeGlobals(byType, opts) || len(l.diags) > 0 {
		return false
	}

	// The steps among other blocks, already parsed, are decoded here the way the stream
	// decodes the others.
	scope := &stepScope{steps: make(map[string]*scopeStep, 1), open: true}
	ctx := l.baseContext()
	for _, sp := range ps {
		for _, b := range sp.blocks {
			if b.Type == "step" {
				l.streamBlock(sp, b, ctx, scope)
			}
		}
	}
	if len(l.diags) > 0 {
		return false
	}
	// The trees of a piece are garbage once it is decoded, and the heap grows little:
	// collections wait for the heap to reach what a stream takes (see hugeheap.Hold).
	hold := hugeheap.NewHold(sourceSize(files) * streamHeapPerSourceByte)
	refs, ok := l.streamSteps(streamed, scope.refs, hold)
	if !ok {
		return false
	}

	// Every step is known now. A step declared twice, or whose name is not an identifier,
	// gives the stream up: taking the names here is what declare does for other blocks.
	// Steps are not recorded in l.declared, which only references to seeds and capabilities
	// read, and which every evaluation context goes through (baseContext).
	n := 0
	for _, sp := range ps {
		n += len(sp.decoded)
	}
	l.cfg.Steps = make(map[string]*Step, n)
	order := make([]*Step, 0, n) // Config.stepOrder, with nil for the held steps until decoded
	held := map[string]*scopeStep{}
	unusable := func(name string) bool { // a name the stream cannot take
		return !validName(name) || held[name] != nil || l.cfg.Steps[name] != nil
	}
	var deferred []*hcl.Block
	for _, sp := range ps {
		h := 0
		for _, st := range sp.decoded {
			if st == nil {
				hs := sp.held[h]
				h++
				name := hs.block.Labels[0]
				if unusable(name) {
					return false
				}
				held[name] = hs
				deferred = append(deferred, hs.block)
				order = append(order, nil)
				continue
			}
			if unusable(st.Name) {
				return false
			}
			l.cfg.Steps[st.Name] = st
			order = append(order, st)
		}
	}
	// The references the stream noted, on every core: 340k of them with 100k steps, each a
	// lookup among every step.
	var bad atomic.Bool
	parallel.Parts(len(refs), 1<<12, func(lo, hi int) {
		for _, ref := range refs[lo:hi] {
			var outputs []string
			if st := l.cfg.Steps[ref.name]; st != nil {
				outputs = st.Outputs
			} else if st := held[ref.name]; st != nil {
				outputs = st.outputs
			}
			if !slices.Contains(outputs, ref.path) {
				bad.Store(true)
				return
			}
		}
	})
	if bad.Load() {
		return false
	}
	// Held steps are decoded as the classic load does, in a scope of every step.
	l.deferred = len(deferred)
	if len(deferred) > 0 {
		top := newStepScope("", len(l.cfg.Steps)+len(held))
		for name, st := range l.cfg.Steps {
			top.steps[name] = &scopeStep{outputs: st.Outputs}
		}
		for name, st := range held {
			top.steps[name] = st
		}
		ctx := l.baseContext()
		for _, b := range deferred {
			l.cfg.Steps[b.Labels[0]] = l.decodeStep(b, ctx, top)
		}
		k := 0
		for i := range order {
			if order[i] == nil {
				order[i] = l.cfg.Steps[deferred[k].Labels[0]]
				k++
			}
		}
	}
	l.cfg.stepOrder = order
	l.decodeRest(byType)
	// Unlike the classic load, the stream ends without a forced collection: it never holds
	// every tree, so the heap's goal is not set by garbage, and the collection cost more
	// than it saved (planning 10k steps: 209-274 ms without it, 226-310 ms with it,
	// alternated; peak 128-136 MiB against 124-127).
	return len(l.diags) == 0
}

// streamSteps parses and decodes the pieces on every core, a chunk at a time, each chunk
// with a fork of l and an open scope; the forks are joined in chunk order. The notes of the
// scopes are returned after refs, in no particular order (each is checked on its own). It
// reports whether every piece held only steps and decoded without a diagnostic. The
// workers renew hold, which it releases when they are done.
func (l *loader) streamSteps(ps []*streamPiece, refs []stepRef, hold *hugeheap.Hold) ([]stepRef, bool) {
	forks := make([]*loader, (len(ps)+streamChunk-1)/streamChunk)
	workers := min(runtime.GOMAXPROCS(0), len(forks))
	// Each worker notes references in one list across its chunks: a list per chunk,
	// appended to and then joined, copied 340k references many times over for 100k steps.
	noted := make([][]stepRef, workers)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var nodes hclfast.Nodes // the trees of this worker's pieces, decoded in turn
			for !failed.Load() {
				c := int(next.Add(1) - 1)
				if c >= len(forks) {
					return
				}
				fl := l.fork()
				scope := &stepScope{steps: make(map[string]*scopeStep, 1), open: true, refs: noted[w]}
				ok := fl.streamChunk(ps[c*streamChunk:min((c+1)*streamChunk, len(ps))], scope, hold, &nodes)
				noted[w] = scope.refs
				if !ok {
					failed.Store(true)
					return
				}
				forks[c] = fl
			}
		}()
	}
	wg.Wait()
	hold.Release()
	if failed.Load() {
		return nil, false
	}
	for _, fl := range forks {
		l.join(fl)
	}
	n := len(refs)
	for _, r := range noted {
		n += len(r)
	}
	refs = slices.Grow(refs, n-len(refs))
	for _, r := range noted {
		refs = append(refs, r...)
	}
	return refs, true
}

// streamChunk parses and decodes the steps of the pieces in scope, an open scope that holds
// only the step being decoded (its outputs are its own). A step whose decoding the scope
// refused is held, and what decoding it reported and noted is dropped: decoding it again
// once every step is known reports it again (functions' records are memoized per load).
func (l *loader) streamChunk(ps []*streamPiece, scope *stepScope, hold *hugeheap.Hold, nodes *hclfast.Nodes) bool {
	ctx := l.baseContext()
	for _, sp := range ps {
		sp.parse(sp.rel, nodes)
		if !sp.clean || !onlySteps(sp.body) {
			return false
		}
		sp.decoded = make([]*Step, 0, len(sp.body.Blocks))
		for _, sb := range sp.body.Blocks {
			l.streamBlock(sp, sb.AsHCLBlock(), ctx, scope)
		}
		sp.body, sp.file = nil, nil // the trees are garbage now, but for held steps'
		if len(l.diags) > 0 {
			return false
		}
		hold.Renew()
	}
	return true
}

// streamBlock decodes b, a step of sp, in scope, an open scope, into sp.decoded; or, when
// the scope refused it, holds it in sp.held (nil in sp.decoded keeps its place), and drops
// what decoding it reported and noted.
func (l *loader) streamBlock(sp *streamPiece, b *hcl.Block, ctx *hcl.EvalContext, scope *stepScope) {
	cur := &scopeStep{block: b, outputs: l.declaredOutputs(b)}
	clear(scope.steps)
	scope.steps[b.Labels[0]] = cur
	diags, refs := len(l.diags), len(scope.refs)
	scope.refused = false
	st := l.decodeStep(b, ctx, scope)
	if scope.refused {
		l.diags, scope.refs = l.diags[:diags], scope.refs[:refs]
		sp.held = append(sp.held, cur)
		sp.decoded = append(sp.decoded, nil) // its place
		return
	}
	sp.decoded = append(sp.decoded, st)
}

// onlySteps reports whether body holds step blocks with one label and nothing else.
func onlySteps(body *hclsyntax.Body) bool {
	if len(body.Attributes) > 0 {
		return false
	}
	for _, b := range body.Blocks {
		if b.Type != "step" || len(b.Labels) != 1 {
			return false
		}
	}
	return true
}

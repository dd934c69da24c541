// Package hclfast parses the common part of HCL's native syntax straight into the syntax tree
// of hclsyntax, the same tree that hclsyntax.ParseConfig builds, node for node and range for
// range, and declines everything else.
//
// Why: hclsyntax first lexes its whole input into a slice of 96-byte tokens (a Ragel machine
// that also counts grapheme clusters for every column) and then parses the slice. For a file
// of a hundred steps it takes about six times as long as this parser and allocates seven
// times as much (BenchmarkHCLSyntax, BenchmarkParse), and parsing was most of the time of
// planning a large project. This parser reads bytes once, keeps one token of look-ahead and
// allocates little more than the tree.
//
// The contract is strict, and tested by comparing the two parsers on generated and fuzzed
// input: when Parse returns a body, hclsyntax.ParseConfig on the same input returns no
// diagnostic and a deeply equal body. Anything outside the subset (operators, conditionals,
// for expressions, splats, heredocs, template directives, "~" strip markers, \u escapes,
// non-ASCII text outside strings and line comments, carriage returns, control characters,
// top-level attributes) and any syntax error makes Parse decline, and the caller parses with hclsyntax, which also gives
// the exact diagnostics.
package hclfast

import (
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Parse parses src, configuration text that starts at pos of the file named filename, as
// hclsyntax.ParseConfig would, and returns its top-level body, or false when src holds
// anything outside the subset this parser knows, top-level attributes included.
func Parse(src []byte, filename string, pos hcl.Pos) (body *hclsyntax.Body, ok bool) {
	return new(Nodes).Parse(src, filename, pos)
}

// Nodes holds the nodes of the most common kinds for the trees of the parses made with it,
// allocated a slab at a time (see slab). Its zero value is ready to use; it must not be used
// by two goroutines at once.
type Nodes struct {
	literals   slab[literalTemplate]
	attributes slab[hclsyntax.Attribute]
	keys       slab[hclsyntax.ObjectConsKeyExpr]
	scopes     slab[hclsyntax.ScopeTraversalExpr]
	traversers slab[[4]hcl.Traverser] // a scope traversal's list: room for step.NAME.output["PATH"]
	blocks     slab[hclsyntax.Block]
	bodies     slab[hclsyntax.Body]
}

// Parse is Parse, with the trees' nodes from n: the trees of the pieces a goroutine parses
// one after another share slabs, which a parse of a few blocks alone would fill little.
func (n *Nodes) Parse(src []byte, filename string, pos hcl.Pos) (body *hclsyntax.Body, ok bool) {
	nonASCII := false
	for _, c := range src {
		// hclsyntax counts a column per grapheme cluster, which for printable ASCII, tabs
		// and line feeds is one per byte; other text is allowed only where it is counted
		// cluster by cluster (see literal).
		if c == 0x7f || (c < 0x20 && c != '\n' && c != '\t') {
			return nil, false
		}
		nonASCII = nonASCII || c >= 0x80
	}
	if nonASCII && !utf8.Valid(src) {
		return nil, false
	}
	p := &parser{src: src, filename: filename, line: pos.Line, lineStart: pos.Byte - pos.Column + 1, base: pos.Byte, Nodes: n}
	defer func() {
		// A decline deep in an expression unwinds to here; the tree built so far is dropped.
		if r := recover(); r != nil {
			if r != errDecline {
				panic(r)
			}
			body, ok = nil, false
		}
	}()
	return p.topBody(), true
}

// declined is the panic value that unwinds a parse that met something outside the subset.
type declined struct{}

var errDecline any = declined{}

func decline() { panic(errDecline) }

type kind uint8

const (
	kEOF     kind = iota
	kNewline      // a line feed, or a # or // comment that ends with one
	kIdent
	kNumber
	kOQuote
	kOBrace
	kCBrace
	kOBrack
	kCBrack
	kOParen
	kCParen
	kComma
	kDot
	kEqual
	kColon
	kOther // anything else: operators, "...", "::", "=>", heredocs, "~}", bad bytes
)

// single is the kind of the tokens that are one byte whatever follows; kEOF for others.
var single = [256]kind{'"': kOQuote, '{': kOBrace, '}': kCBrace, '[': kOBrack, ']': kCBrack, '(': kOParen, ')': kCParen, ',': kComma}

type token struct {
	kind       kind
	start, end int // byte offsets in src
	rng        hcl.Range
}

// parser reads src once. Positions: base is the file offset of src[0]; line and lineStart
// (a file offset, so that a first line not starting at column 1 works) describe the line
// that the lexer's offset i is on.
type parser struct {
	src       []byte
	filename  string
	base      int
	i         int
	line      int
	lineStart int

	// look-ahead: the token at offset peekAt read in newline mode peekNL, and the lexer
	// state after it.
	peeked                  bool
	peekAt                  int
	peekNL                  bool
	next                    token
	nextI, nextLine, nextLS int

	prev    hcl.Range // the range of the last token read, as hclsyntax's PrevRange
	scratch []byte    // reused for the text of string literals
	escEnd  int       // where the last escape sequence in a string literal ended

	*Nodes // where the nodes of the most common kinds come from
}

// slab hands out the elements of arrays allocated a few at a time. The nodes of a tree live
// and die together, as a piece's tree does once its blocks are decoded, and so do the trees
// of the pieces one goroutine parses and decodes in turn; a slab of them costs one
// allocation where there was one per node (loading 100k steps made ~150 allocations per
// step). Slabs double from 4 nodes to 64, so that a small parse wastes little. A node kept
// after its tree keeps its slab.
type slab[T any] struct {
	free []T
	size int
}

func (s *slab[T]) new() *T {
	if len(s.free) == 0 {
		s.size = min(max(2*s.size, 4), 64)
		s.free = make([]T, s.size)
	}
	e := &s.free[0]
	s.free = s.free[1:]
	return e
}

func (p *parser) pos(i int) hcl.Pos {
	return hcl.Pos{Line: p.line, Column: p.base + i - p.lineStart + 1, Byte: p.base + i}
}

// newline records that the line feed at offset i has been passed.
func (p *parser) newline(i int) {
	p.line++
	p.lineStart = p.base + i + 1
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isIdentPart(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '-'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex reads the next token from offset p.i. With nl false, line feeds and comments are
// skipped as hclsyntax's peeker skips them inside brackets; with nl true a line feed, or a
// line comment ending in one, is a kNewline token.
func (p *parser) lex(nl bool) token {
	src := p.src
	for {
		i := p.i
		if i >= len(src) {
			at := p.pos(i)
			return token{kind: kEOF, start: i, end: i, rng: hcl.Range{Filename: p.filename, Start: at, End: at}}
		}
		c := src[i]
		switch {
		case c == ' ' || c == '\t':
			p.i++
			continue
		case c == '\n':
			start := p.pos(i)
			p.i++
			p.newline(i)
			if !nl {
				continue
			}
			return token{kind: kNewline, start: i, end: i + 1, rng: hcl.Range{Filename: p.filename, Start: start, End: p.pos(i + 1)}}
		case c == '#' || c == '/' && i+1 < len(src) && src[i+1] == '/':
			start := p.pos(i)
			j := i
			for j < len(src) && src[j] != '\n' {
				j++
			}
			if j == len(src) { // a comment that ends the input has no line feed: skipped
				if !ascii(src[i:j]) {
					decline() // the end's column would count its clusters
				}
				p.i = j
				continue
			}
			p.i = j + 1
			p.newline(j)
			if !nl {
				continue
			}
			// hclsyntax turns such a comment into a newline token with the comment's range.
			return token{kind: kNewline, start: i, end: j + 1, rng: hcl.Range{Filename: p.filename, Start: start, End: p.pos(j + 1)}}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := i + 2
			for {
				if j+1 >= len(src) {
					decline() // unterminated
				}
				if src[j] == '*' && src[j+1] == '/' {
					break
				}
				if src[j] == '\n' {
					p.newline(j)
				}
				if src[j] >= 0x80 {
					decline() // columns after it would count its clusters
				}
				j++
			}
			p.i = j + 2
			continue
		}
		start := p.pos(i)
		k, end := kOther, i+1
		switch {
		case isIdentStart(c):
			k = kIdent
			for end < len(src) && isIdentPart(src[end]) {
				end++
			}
		case isDigit(c):
			k, end = kNumber, numberEnd(src, i)
		case single[c] != kEOF:
			k = single[c]
		case c == '.':
			if !(end < len(src) && src[end] == '.') { // ".." and "..." are not attribute access
				k = kDot
			}
		case c == '=':
			if !(end < len(src) && (src[end] == '=' || src[end] == '>')) { // "==", "=>"
				k = kEqual
			}
		case c == ':':
			if !(end < len(src) && src[end] == ':') { // "::"
				k = kColon
			}
		}
		p.i = end
		at := start
		at.Column += end - i
		at.Byte += end - i
		return token{kind: k, start: i, end: end, rng: hcl.Range{Filename: p.filename, Start: start, End: at}}
	}
}

// numberEnd returns the end of the number literal at src[i], a digit, as hclsyntax's
// scanner delimits it: digit (digit | "." | [eE][+-]?digit)*, not ending in ".".
func numberEnd(src []byte, i int) int {
	end := i + 1
	j := end
	for j < len(src) {
		switch c := src[j]; {
		case isDigit(c):
			j++
			end = j
		case c == '.':
			j++
		case c == 'e' || c == 'E':
			k := j + 1
			if k < len(src) && (src[k] == '+' || src[k] == '-') {
				k++
			}
			if k < len(src) && isDigit(src[k]) {
				j = k + 1
				end = j
				continue
			}
			return end
		default:
			return end
		}
	}
	return end
}

func (p *parser) peek(nl bool) token {
	if p.peeked && p.peekAt == p.i && p.peekNL == nl {
		return p.next
	}
	i, line, ls := p.i, p.line, p.lineStart
	t := p.lex(nl)
	p.peeked, p.peekAt, p.peekNL, p.next = true, i, nl, t
	p.nextI, p.nextLine, p.nextLS = p.i, p.line, p.lineStart
	p.i, p.line, p.lineStart = i, line, ls
	return t
}

func (p *parser) read(nl bool) token {
	t := p.peek(nl)
	p.i, p.line, p.lineStart = p.nextI, p.nextLine, p.nextLS
	p.peeked = false
	p.prev = t.rng
	return t
}

// expect reads a token of kind k or declines.
func (p *parser) expect(nl bool, k kind) token {
	t := p.read(nl)
	if t.kind != k {
		decline()
	}
	return t
}

func (p *parser) text(t token) string { return string(p.src[t.start:t.end]) }

// name returns an identifier's text, shared for the words configuration repeats in every
// block (the map lookup does not allocate; the strings are immutable).
func (p *parser) name(t token) string {
	if s, ok := common[string(p.src[t.start:t.end])]; ok {
		return s
	}
	return p.text(t)
}

var common = func() map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(`step seed image run mounts outputs output env workdir user platform
		network limits memory cpus pids time description layer files symlinks dir file host_file
		host_dir fileset var local capability recipe product package project variable locals
		default type deliver from to requires provides check interface suite cases sealed
		brief cost base at tarball oci_layout true false null`) {
		m[w] = w
	}
	return m
}()

// topBody is hclsyntax's ParseBody(TokenEOF), for blocks only.
func (p *parser) topBody() *hclsyntax.Body {
	startRange := p.peek(true).rng
	blocks := hclsyntax.Blocks{}
	for {
		t := p.peek(true)
		switch t.kind {
		case kEOF:
			return &hclsyntax.Body{
				Attributes: hclsyntax.Attributes{},
				Blocks:     blocks,
				SrcRange:   hcl.RangeBetween(startRange, t.rng),
				EndRange:   hcl.Range{Filename: t.rng.Filename, Start: t.rng.End, End: t.rng.End},
			}
		case kNewline:
			p.read(true)
		case kIdent:
			ident := p.read(true)
			if p.peek(true).kind == kEqual {
				decline() // a top-level attribute
			}
			blocks = append(blocks, p.block(ident))
		default:
			decline()
		}
	}
}

// body is hclsyntax's ParseBody(TokenCBrace), after the opening brace.
func (p *parser) body(open token) *hclsyntax.Body {
	attrs := hclsyntax.Attributes{}
	blocks := hclsyntax.Blocks{}
	for {
		t := p.peek(true)
		switch t.kind {
		case kCBrace:
			p.read(true)
			b := p.bodies.new()
			*b = hclsyntax.Body{
				Attributes: attrs,
				Blocks:     blocks,
				SrcRange:   hcl.RangeBetween(open.rng, t.rng),
				EndRange:   hcl.Range{Filename: t.rng.Filename, Start: t.rng.End, End: t.rng.End},
			}
			return b
		case kNewline:
			p.read(true)
		case kIdent:
			ident := p.read(true)
			switch p.peek(true).kind {
			case kEqual:
				a := p.attribute(ident, false)
				if _, dup := attrs[a.Name]; dup {
					decline()
				}
				attrs[a.Name] = a
			case kOQuote, kOBrace, kIdent:
				blocks = append(blocks, p.block(ident))
			default:
				decline()
			}
		default:
			decline()
		}
	}
}

// attribute is hclsyntax's finishParsingBodyAttribute, after the name.
func (p *parser) attribute(ident token, singleLine bool) *hclsyntax.Attribute {
	eq := p.expect(true, kEqual)
	expr := p.expr(true)
	end := p.prev
	if !singleLine {
		switch p.peek(true).kind {
		case kNewline:
			p.read(true)
		case kEOF:
		default:
			decline()
		}
	}
	a := p.attributes.new()
	*a = hclsyntax.Attribute{
		Name:        p.name(ident),
		Expr:        expr,
		SrcRange:    hcl.RangeBetween(ident.rng, end),
		NameRange:   ident.rng,
		EqualsRange: eq.rng,
	}
	return a
}

// block is hclsyntax's finishParsingBodyBlock, after the type.
func (p *parser) block(ident token) *hclsyntax.Block {
	var labels []string
	var labelRanges []hcl.Range
	var open token
header:
	for {
		t := p.read(true)
		switch t.kind {
		case kOBrace:
			open = t
			break header
		case kOQuote:
			s, rng := p.label(t)
			labels = append(labels, s)
			labelRanges = append(labelRanges, rng)
		case kIdent:
			labels = append(labels, p.name(t))
			labelRanges = append(labelRanges, t.rng)
		default:
			decline()
		}
	}
	var body *hclsyntax.Body
	switch p.peek(true).kind {
	case kNewline, kCBrace:
		body = p.body(open)
	default:
		// The one-line form, name { attr = value }.
		name := p.expect(true, kIdent)
		if p.peek(true).kind != kEqual {
			decline()
		}
		a := p.attribute(name, true)
		p.expect(true, kCBrace)
		body = &hclsyntax.Body{
			Attributes: hclsyntax.Attributes{a.Name: a},
			SrcRange:   a.SrcRange,
			EndRange:   hcl.Range{Filename: a.SrcRange.Filename, Start: a.SrcRange.End, End: a.SrcRange.End},
		}
	}
	closeRange := p.prev
	switch p.peek(true).kind {
	case kNewline, kEOF:
		p.read(true)
	default:
		decline()
	}
	b := p.blocks.new()
	*b = hclsyntax.Block{
		Type:            p.name(ident),
		Labels:          labels,
		Body:            body,
		TypeRange:       ident.rng,
		LabelRanges:     labelRanges,
		OpenBraceRange:  open.rng,
		CloseBraceRange: closeRange,
	}
	return b
}

// expr parses an expression that has no operators: a term and its traversals. Whatever
// follows is left to the caller, which declines unless it is the token it expects, so an
// operator or "?" there (which hclsyntax would make part of the expression) declines.
func (p *parser) expr(nl bool) hclsyntax.Expression {
	return p.traversals(p.term(nl), nl)
}

func (p *parser) term(nl bool) hclsyntax.Expression {
	t := p.read(nl)
	switch t.kind {
	case kNumber:
		v, err := cty.ParseNumberVal(p.text(t))
		if err != nil {
			decline()
		}
		return &hclsyntax.LiteralValueExpr{Val: v, SrcRange: t.rng}
	case kIdent:
		if p.peek(nl).kind == kOParen {
			return p.call(t)
		}
		switch name := p.name(t); name {
		case "true":
			return &hclsyntax.LiteralValueExpr{Val: cty.True, SrcRange: t.rng}
		case "false":
			return &hclsyntax.LiteralValueExpr{Val: cty.False, SrcRange: t.rng}
		case "null":
			return &hclsyntax.LiteralValueExpr{Val: cty.NullVal(cty.DynamicPseudoType), SrcRange: t.rng}
		default:
			// Room for the usual step.NAME.output["PATH"], which grew the list three times.
			tr := hcl.Traversal(p.traversers.new()[:1])
			tr[0] = hcl.TraverseRoot{Name: name, SrcRange: t.rng}
			e := p.scopes.new()
			*e = hclsyntax.ScopeTraversalExpr{Traversal: tr, SrcRange: t.rng}
			return e
		}
	case kOQuote:
		return p.template(t)
	case kOParen:
		e := p.expr(false)
		closing := p.expect(false, kCParen)
		return &hclsyntax.ParenthesesExpr{Expression: e, SrcRange: hcl.RangeBetween(t.rng, closing.rng)}
	case kOBrack:
		return p.tuple(t)
	case kOBrace:
		return p.object(t)
	}
	decline()
	return nil
}

func (p *parser) isFor() bool {
	t := p.peek(false)
	return t.kind == kIdent && string(p.src[t.start:t.end]) == "for"
}

// traversals is hclsyntax's parseExpressionTraversals without splats and legacy ".0"
// indexes.
func (p *parser) traversals(from hclsyntax.Expression, nl bool) hclsyntax.Expression {
	ret := from
	for {
		switch p.peek(nl).kind {
		case kDot:
			dot := p.read(nl)
			name := p.read(nl)
			if name.kind != kIdent {
				decline()
			}
			rng := hcl.RangeBetween(dot.rng, name.rng)
			ret = makeRelativeTraversal(ret, hcl.TraverseAttr{Name: p.name(name), SrcRange: rng}, rng)
		case kOBrack:
			open := p.read(nl)
			key := p.expr(false)
			closing := p.expect(false, kCBrack)
			rng := hcl.RangeBetween(open.rng, closing.rng)
			if lit, ok := key.(*hclsyntax.LiteralValueExpr); ok {
				ret = makeRelativeTraversal(ret, hcl.TraverseIndex{Key: lit.Val, SrcRange: rng}, rng)
			} else if tmpl, ok := key.(*hclsyntax.TemplateExpr); ok && tmpl.IsStringLiteral() {
				// hclsyntax takes the template's Value, which for its one literal part is
				// that part's string (already normalized), without Value's machinery.
				v := tmpl.Parts[0].(*hclsyntax.LiteralValueExpr).Val
				ret = makeRelativeTraversal(ret, hcl.TraverseIndex{Key: v, SrcRange: rng}, rng)
			} else {
				ret = &hclsyntax.IndexExpr{
					Collection:   ret,
					Key:          key,
					SrcRange:     hcl.RangeBetween(from.Range(), rng),
					OpenRange:    open.rng,
					BracketRange: rng,
				}
			}
		default:
			return ret
		}
	}
}

// makeRelativeTraversal is hclsyntax's: it extends a traversal in place, or starts one.
func makeRelativeTraversal(expr hclsyntax.Expression, next hcl.Traverser, rng hcl.Range) hclsyntax.Expression {
	switch e := expr.(type) {
	case *hclsyntax.ScopeTraversalExpr:
		e.Traversal = append(e.Traversal, next)
		e.SrcRange = hcl.RangeBetween(e.SrcRange, rng)
		return e
	case *hclsyntax.RelativeTraversalExpr:
		e.Traversal = append(e.Traversal, next)
		e.SrcRange = hcl.RangeBetween(e.SrcRange, rng)
		return e
	default:
		return &hclsyntax.RelativeTraversalExpr{Source: expr, Traversal: hcl.Traversal{next}, SrcRange: hcl.RangeBetween(expr.Range(), rng)}
	}
}

// call is hclsyntax's finishParsingFunctionCall without "::" names and "..." expansion.
func (p *parser) call(name token) hclsyntax.Expression {
	open := p.expect(false, kOParen)
	args, closing := p.list(kCParen)
	return &hclsyntax.FunctionCallExpr{
		Name:            p.name(name),
		Args:            args,
		NameRange:       name.rng,
		OpenParenRange:  open.rng,
		CloseParenRange: closing.rng,
	}
}

func (p *parser) tuple(open token) hclsyntax.Expression {
	if p.isFor() {
		decline()
	}
	exprs, closing := p.list(kCBrack)
	return &hclsyntax.TupleConsExpr{Exprs: exprs, SrcRange: hcl.RangeBetween(open.rng, closing.rng), OpenRange: open.rng}
}

// list reads comma-separated expressions, a trailing comma allowed, up to and including
// the closer, as hclsyntax reads arguments and tuple items (line feeds ignored). The
// slice is nil when there are none, as hclsyntax's is.
func (p *parser) list(closer kind) ([]hclsyntax.Expression, token) {
	var exprs []hclsyntax.Expression
	for {
		if p.peek(false).kind == closer {
			return exprs, p.read(false)
		}
		if exprs == nil {
			exprs = make([]hclsyntax.Expression, 0, 4) // one allocation for most lists
		}
		exprs = append(exprs, p.expr(false))
		sep := p.read(false)
		if sep.kind == closer {
			return exprs, sep
		}
		if sep.kind != kComma {
			decline()
		}
	}
}

func (p *parser) object(open token) hclsyntax.Expression {
	if p.isFor() {
		decline()
	}
	var items []hclsyntax.ObjectConsItem
	var closing token
	for {
		t := p.peek(true)
		if t.kind == kNewline {
			p.read(true)
			continue
		}
		if t.kind == kCBrace {
			closing = p.read(true)
			break
		}
		key := p.keys.new()
		key.ForceNonLiteral = t.kind == kOParen
		key.Wrapped = p.expr(true)
		if sep := p.read(true); sep.kind != kEqual && sep.kind != kColon {
			decline()
		}
		if items == nil {
			items = make([]hclsyntax.ObjectConsItem, 0, 4) // one allocation for most objects
		}
		items = append(items, hclsyntax.ObjectConsItem{KeyExpr: key, ValueExpr: p.expr(true)})
		sep := p.read(true)
		if sep.kind == kCBrace {
			closing = sep
			break
		}
		if sep.kind != kComma && sep.kind != kNewline {
			decline()
		}
	}
	return &hclsyntax.ObjectConsExpr{Items: items, SrcRange: hcl.RangeBetween(open.rng, closing.rng), OpenRange: open.rng}
}

// template parses a quoted template after its opening quote: literal text with the
// escapes \n \r \t \" \\ $${ %%{, and ${ } interpolations.
func (p *parser) template(open token) hclsyntax.Expression {
	var parts []hclsyntax.Expression
	var one *literalTemplate // where the first part went, when it is literal text
	interps := 0
	lit := p.scratch[:0]
	litStart := -1
	var litPos hcl.Pos
	literal := func(val cty.Value, rng hcl.Range) {
		if len(parts) > 0 {
			parts = append(parts, &hclsyntax.LiteralValueExpr{Val: val, SrcRange: rng})
			return
		}
		one = p.literals.new()
		one.lit = hclsyntax.LiteralValueExpr{Val: val, SrcRange: rng}
		one.parts[0] = &one.lit
		parts = one.parts[:]
	}
	flush := func() {
		if litStart < 0 || litStart == p.i { // no literal text since the last part
			litStart = -1
			return
		}
		literal(cty.StringVal(string(lit)), hcl.Range{Filename: p.filename, Start: litPos, End: p.pos(p.i)})
		lit, litStart = lit[:0], -1
	}
	src := p.src
	for {
		i := p.i
		if litStart < 0 {
			litStart, litPos = i, p.pos(i)
		}
		var n int
		lit, n = p.literal(lit)
		if n > 0 {
			continue
		}
		if src[i] == '"' {
			flush()
			if len(parts) == 0 { // hclsyntax gives "" one empty literal, after the closing quote
				at := p.pos(i + 1)
				literal(cty.StringVal(""), hcl.Range{Filename: p.filename, Start: at, End: at})
			}
			p.scratch = lit[:0]
			rng := hcl.RangeBetween(open.rng, p.closeQuote())
			if len(parts) == 1 && interps == 1 {
				return &hclsyntax.TemplateWrapExpr{Wrapped: parts[0], SrcRange: rng}
			}
			if one != nil && len(parts) == 1 {
				one.tmpl = hclsyntax.TemplateExpr{Parts: parts, SrcRange: rng}
				return &one.tmpl
			}
			return &hclsyntax.TemplateExpr{Parts: parts, SrcRange: rng}
		}
		// "${", as literal declined everything else
		if i+2 < len(src) && src[i+2] == '~' {
			decline()
		}
		flush()
		p.i += 2
		parts = append(parts, p.expr(false))
		interps++
		p.expect(false, kCBrace)
	}
}

// literalTemplate is a quoted string without interpolations, the most common expression
// (argv, mount paths, output paths), in one place instead of three: the template, its list
// of parts and its one literal part. hclsyntax's tree is the same.
type literalTemplate struct {
	tmpl  hclsyntax.TemplateExpr
	parts [1]hclsyntax.Expression
	lit   hclsyntax.LiteralValueExpr
}

// label parses a block label after its opening quote: literal text only.
func (p *parser) label(open token) (string, hcl.Range) {
	lit := p.scratch[:0]
	for {
		var n int
		lit, n = p.literal(lit)
		if n > 0 {
			continue
		}
		if p.src[p.i] != '"' {
			decline() // "${"
		}
		p.scratch = lit[:0]
		return string(lit), hcl.RangeBetween(open.rng, p.closeQuote())
	}
}

// closeQuote reads the closing quote at p.i and returns its range.
func (p *parser) closeQuote() hcl.Range {
	at := p.pos(p.i)
	p.i++
	end := at
	end.Column++
	end.Byte++
	p.prev = hcl.Range{Filename: p.filename, Start: at, End: end}
	return p.prev
}

// clusters accounts for the text src[i:j] of a literal, which holds non-ASCII characters:
// hclsyntax counts its columns by grapheme cluster, within the token that holds it. A token
// of literal text starts after the opening quote, an interpolation, "$", "%", "$${" or
// "%%{", as the run does; but it also holds escapes, so a cluster could span an escape and
// the run next to it. Such a run is declined.
func (p *parser) clusters(i, j int) {
	src := p.src
	if i == p.escEnd && src[i] >= 0x80 || j < len(src) && src[j] == '\\' && src[j-1] >= 0x80 {
		decline()
	}
	n := 0
	for b := src[i:j]; len(b) > 0; n++ {
		adv, _, err := scanGraphemeClusters(b, true)
		if err != nil || adv == 0 {
			decline()
		}
		b = b[adv:]
	}
	// Columns are computed from byte offsets: move the line's start so that the run counts
	// n columns, not j-i.
	p.lineStart += (j - i) - n
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// literal appends to lit the text of the literal sequence at p.i in a quoted string and
// returns the number of bytes read; 0 when p.i is at the closing quote or at "${". It
// declines at the end of the input or line, on template directives and on the escapes it
// does not handle.
func (p *parser) literal(lit []byte) ([]byte, int) {
	src, i := p.src, p.i
	j := i
	for j < len(src) {
		if c := src[j]; c == '"' || c == '\\' || c == '$' || c == '%' || c == '\n' {
			break
		}
		j++
	}
	if j > i {
		if !ascii(src[i:j]) {
			p.clusters(i, j)
		}
		p.i = j
		return append(lit, src[i:j]...), j - i
	}
	if i >= len(src) || src[i] == '\n' {
		decline()
	}
	next := byte(0)
	if i+1 < len(src) {
		next = src[i+1]
	}
	var s string
	c := src[i]
	switch c {
	case '"':
		return lit, 0
	case '\\':
		switch next {
		case 'n':
			s = "\n"
		case 'r':
			s = "\r"
		case 't':
			s = "\t"
		case '"':
			s = "\""
		case '\\':
			s = "\\"
		default:
			decline()
		}
		p.i += 2
		p.escEnd = p.i
		return append(lit, s...), 2
	case '%':
		if next == '{' {
			decline() // a template directive
		}
	case '$':
		if next == '{' {
			return lit, 0
		}
	}
	if next == c && i+2 < len(src) && src[i+2] == '{' { // "$${" or "%%{"
		p.i += 3
		return append(lit, c, '{'), 3
	}
	p.i++
	return append(lit, c), 1
}

package lang

import (
	"bytes"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Configuration files are parsed with hclsyntax.ParseConfig, with the same result as parsing
// each file whole, but block by block where they can be.
//
// Why: hclsyntax lexes a whole file into one token slice before parsing, growing it by
// append; for a file of a hundred steps that slice is reallocated and copied dozens of
// times. Parsing top-level blocks on their own keeps every token slice small, and lets the
// pieces of one large file be parsed on several cores.
//
// A cut is the start of a line that follows a line holding only "}". Such a point is either
// a real top-level boundary or lies inside something still open (a block, a heredoc, a
// /* comment */, brackets); in the latter case the piece before it does not parse cleanly.
// So when every piece parses without any diagnostic and holds no top-level attribute, the
// pieces are exactly the file's top-level blocks, with the same ranges (each piece is parsed
// from its true position). Otherwise the whole file is parsed as one, so diagnostics are
// exactly hclsyntax's.

// minPiece is the least size of a piece, so that a file of many tiny blocks is not parsed
// in a thousand calls.
const minPiece = 512

// piece is a run of whole lines of a configuration file, parsed from its position.
type piece struct {
	src   []byte
	pos   hcl.Pos
	file  *hcl.File
	diags hcl.Diagnostics
	body  *hclsyntax.Body
	clean bool // parsed without diagnostics and without top-level attributes
}

// cutPieces cuts src after lines that are exactly "}" (or "}\r") and are followed by more
// text, into pieces of at least the given size.
func cutPieces(src []byte, least int) []piece {
	var ps []piece
	start, pos := 0, hcl.InitialPos
	cut := func(end int) {
		ps = append(ps, piece{src: src[start:end], pos: pos})
		pos.Byte += end - start
		pos.Line += bytes.Count(src[start:end], []byte{'\n'})
		start = end
	}
	for i := 0; i < len(src); {
		nl := bytes.IndexByte(src[i:], '\n')
		if nl < 0 {
			break
		}
		line := src[i : i+nl]
		i += nl + 1
		closing := (len(line) == 1 && line[0] == '}') || (len(line) == 2 && line[0] == '}' && line[1] == '\r')
		if closing && i-start >= least && i < len(src) {
			cut(i)
		}
	}
	cut(len(src))
	return ps
}

// parse parses the piece from its position in the file, and rewrites its expressions to be
// evaluated under b.
func (p *piece) parse(filename string, b *budget) {
	p.file, p.diags = hclsyntax.ParseConfig(p.src, filename, p.pos)
	if len(p.diags) > 0 || p.file == nil {
		return
	}
	p.body = p.file.Body.(*hclsyntax.Body)
	p.clean = len(p.body.Attributes) == 0
	b.rewriteBody(p.body, "")
}

// joinPieces returns the file made of the parsed pieces, or parses src whole when one of
// them did not parse cleanly (and rewrites it for b, as piece.parse does).
func joinPieces(src []byte, filename string, ps []piece, b *budget) (*hcl.File, hcl.Diagnostics) {
	if len(ps) == 1 { // the piece is the file, parsed from its start
		return ps[0].file, ps[0].diags
	}
	body := &hclsyntax.Body{Attributes: hclsyntax.Attributes{}}
	for _, p := range ps {
		if !p.clean {
			f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
			if len(diags) == 0 && f != nil {
				b.rewriteBody(f.Body.(*hclsyntax.Body), "")
			}
			return f, diags
		}
		body.Blocks = append(body.Blocks, p.body.Blocks...)
		body.EndRange = p.body.EndRange
	}
	body.SrcRange = hcl.Range{Filename: filename, Start: hcl.InitialPos, End: body.EndRange.End}
	return &hcl.File{Body: body, Bytes: src}, nil
}

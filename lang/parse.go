package lang

import (
	"bytes"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// parseConfig parses one configuration file like hclsyntax.ParseConfig, with the same
// result, but block by block where it can.
//
// Why: hclsyntax lexes a whole file into one token slice before parsing, growing it by
// append; for a file of a hundred steps that slice reaches ~1 MB and is reallocated and
// copied dozens of times, which made lexing a third of the time of planning 10k steps.
// Parsing each top-level block on its own keeps every token slice small.
//
// A split point is the start of a line that follows a line holding only "}". Such a
// point is either a real top-level boundary or lies inside something still open (a block,
// a heredoc, a /* comment */, brackets); in the latter case the piece before it does not
// parse cleanly. So when every piece parses without any diagnostic and holds no top-level
// attribute, the pieces are exactly the file's top-level blocks, with the same ranges (each
// piece is parsed from its true position). Otherwise the whole file is parsed as one, so
// diagnostics are exactly hclsyntax's.
func parseConfig(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	return parsePieces(src, filename, 512)
}

// parsePieces is parseConfig with pieces of at least minPiece bytes, so that a file of many
// tiny blocks is not parsed in a thousand calls.
func parsePieces(src []byte, filename string, minPiece int) (*hcl.File, hcl.Diagnostics) {
	pieces := splitTopLevel(src, minPiece)
	if len(pieces) < 2 {
		return hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	}
	body := &hclsyntax.Body{Attributes: hclsyntax.Attributes{}}
	pos := hcl.InitialPos
	for _, p := range pieces {
		f, diags := hclsyntax.ParseConfig(p, filename, pos)
		if len(diags) > 0 || f == nil {
			return hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
		}
		b := f.Body.(*hclsyntax.Body)
		if len(b.Attributes) > 0 {
			return hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
		}
		body.Blocks = append(body.Blocks, b.Blocks...)
		body.EndRange = b.EndRange
		pos.Byte += len(p)
		pos.Line += bytes.Count(p, []byte{'\n'})
	}
	body.SrcRange = hcl.Range{Filename: filename, Start: hcl.InitialPos, End: body.EndRange.End}
	return &hcl.File{Body: body, Bytes: src}, nil
}

// splitTopLevel cuts src after lines that are exactly "}" (or "}\r") and are followed by more
// text, into pieces of at least minPiece bytes.
func splitTopLevel(src []byte, minPiece int) [][]byte {
	var pieces [][]byte
	start := 0
	for i := 0; i < len(src); {
		nl := bytes.IndexByte(src[i:], '\n')
		if nl < 0 {
			break
		}
		line := src[i : i+nl]
		i += nl + 1
		if (len(line) == 1 && line[0] == '}') || (len(line) == 2 && line[0] == '}' && line[1] == '\r') {
			if i-start >= minPiece && i < len(src) {
				pieces = append(pieces, src[start:i])
				start = i
			}
		}
	}
	return append(pieces, src[start:])
}

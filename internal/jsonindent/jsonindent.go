// Package jsonindent writes values as indented JSON, byte for byte as encoding/json's
// Encoder with SetIndent("", indent) does, in a fraction of the time.
//
// The Encoder indents by running its JSON scanner over the compact text a byte at a time,
// into a second buffer as large as the output, which for a large plan is most of the time
// of writing it. Text that json.Marshal made needs no scanner: it has no space
// outside strings, so tracking strings is enough to tell punctuation from text, and the
// indented text can stream to the writer.
package jsonindent

import (
	"bufio"
	"encoding/json"
	"io"
)

// Encode writes v to w as json.NewEncoder(w) with SetIndent("", indent) would: marshalled
// (HTML characters escaped), indented, and ended with a newline. As there, an empty indent
// writes v compact.
func Encode(w io.Writer, v any, indent string) error {
	src, err := json.Marshal(v)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if indent == "" {
		bw.Write(src)
	} else {
		write(bw, src, indent)
	}
	bw.WriteByte('\n')
	return bw.Flush()
}

// write writes src, compact JSON as json.Marshal makes it, indented as encoding/json
// indents: a newline and the indentation after an opening bracket, after a comma and
// before a closing bracket, a space after a colon, and an empty object or array kept as {}
// or []. Runs of text between those places are written whole.
func write(w *bufio.Writer, src []byte, indent string) {
	depth, start := 0, 0
	inString, escaped, opened := false, false, false
	newline := func() {
		w.WriteByte('\n')
		for range depth {
			w.WriteString(indent)
		}
	}
	for i, c := range src {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if opened && c != '}' && c != ']' {
			// The first member or element of a non-empty object or array.
			opened = false
			w.Write(src[start:i])
			depth++
			newline()
			start = i
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			opened = true
		case ',':
			w.Write(src[start : i+1])
			newline()
			start = i + 1
		case ':':
			w.Write(src[start : i+1])
			w.WriteByte(' ')
			start = i + 1
		case '}', ']':
			if opened {
				opened = false // {} or []
				continue
			}
			w.Write(src[start:i])
			depth--
			newline()
			start = i
		}
	}
	w.Write(src[start:])
}

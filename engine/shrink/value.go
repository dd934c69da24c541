package shrink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
)

// kind is the JSON type of a node.
type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

// node is one JSON value as the shrinker sees it: object members in the order written, and
// numbers by their literal (never rounded to a double, so 9223372036854775807 stays itself).
// Nodes are never changed once built: a reduction makes a new node and shares the rest.
type node struct {
	kind    kind
	b       bool
	lit     string // a number's literal
	s       string // a string's value
	elems   []*node
	members []member
}

type member struct {
	key string
	val *node
}

// maxDepth bounds nesting, as strict case parsing does.
const maxDepth = 1000

// maxExponent bounds a number literal's exponent: arithmetic on 1e1000000000 would take
// gigabytes, and no number a case can hold (a double, or one that underflows to 0) needs more.
const maxExponent = 400

// parse reads exactly one JSON value from b (surrounding whitespace allowed).
func parse(b []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return n, nil
}

func parseValue(dec *json.Decoder, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &node{kind: kNull}, nil
	case bool:
		return &node{kind: kBool, b: t}, nil
	case json.Number:
		if _, err := rat(string(t)); err != nil {
			return nil, err
		}
		return &node{kind: kNumber, lit: string(t)}, nil
	case string:
		return &node{kind: kString, s: t}, nil
	case json.Delim:
		switch t {
		case '[':
			n := &node{kind: kArray}
			for dec.More() {
				e, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, e)
			}
			_, err := dec.Token() // ]
			return n, err
		case '{':
			n := &node{kind: kObject}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.members = append(n.members, member{key: k.(string), val: v})
			}
			_, err := dec.Token() // }
			return n, err
		}
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

// rat is the exact value of a JSON number literal.
func rat(lit string) (*big.Rat, error) {
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		if err != nil || e > maxExponent || e < -maxExponent {
			return nil, fmt.Errorf("number %s: exponent out of range", lit)
		}
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return nil, fmt.Errorf("number %s: not a number", lit)
	}
	return r, nil
}

// encode writes n as compact JSON: members in order, numbers by their literal, strings
// without HTML escaping.
func encode(n *node) []byte {
	var buf bytes.Buffer
	write(&buf, n)
	return buf.Bytes()
}

func write(buf *bytes.Buffer, n *node) {
	switch n.kind {
	case kNull:
		buf.WriteString("null")
	case kBool:
		buf.WriteString(strconv.FormatBool(n.b))
	case kNumber:
		buf.WriteString(n.lit)
	case kString:
		writeString(buf, n.s)
	case kArray:
		buf.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				buf.WriteByte(',')
			}
			write(buf, e)
		}
		buf.WriteByte(']')
	case kObject:
		buf.WriteByte('{')
		for i, m := range n.members {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, m.key)
			buf.WriteByte(':')
			write(buf, m.val)
		}
		buf.WriteByte('}')
	}
}

func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)               // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode's newline
}

// Package capped keeps at most a limit of a process's output: the writers a step's logs and
// an evaluated case's output are captured with, and the tail of what they kept.
package capped

import (
	"bytes"
	"io"
	"strings"
)

// Writer passes at most Limit bytes to W and notes whether more came (Truncated). Write
// never fails for lack of room: output past the limit is counted and dropped, so a chatty
// process is not killed by a broken pipe.
type Writer struct {
	W         io.Writer
	Limit     int64
	written   int64
	Truncated bool
}

func (c *Writer) Write(p []byte) (int, error) {
	room := c.Limit - c.written
	if room <= 0 {
		c.Truncated = len(p) > 0 || c.Truncated
		return len(p), nil
	}
	w := p
	if int64(len(w)) > room {
		w = w[:room]
		c.Truncated = true
	}
	n, err := c.W.Write(w)
	c.written += int64(n)
	if err != nil {
		return n, err
	}
	return len(p), nil
}

// Buffer keeps at most limit bytes in memory, in B.
type Buffer struct {
	Writer
	B bytes.Buffer
}

// NewBuffer returns a Buffer that keeps at most limit bytes.
func NewBuffer(limit int64) *Buffer {
	c := &Buffer{}
	c.Writer = Writer{W: &c.B, Limit: limit}
	return c
}

// TailLines returns the last n lines of b.
func TailLines(b []byte, n int) []string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

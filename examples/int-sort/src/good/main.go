// int-sort reads a JSON array of 64-bit integers on stdin and writes it sorted ascending,
// duplicates kept, on stdout. Invalid input (not an array of integers in int64 range, or
// more than maxBatch of them) exits 2 with a message on stderr.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

const maxBatch = 10000

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "int-sort: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	data, err := io.ReadAll(io.LimitReader(os.Stdin, 16<<20))
	if err != nil {
		fail("reading input: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var raw []json.Number
	if err := dec.Decode(&raw); err != nil {
		fail("input is not a JSON array of integers: %v", err)
	}
	if dec.More() {
		fail("trailing data after the array")
	}
	if raw == nil {
		fail("input must be an array, not null")
	}
	if len(raw) > maxBatch {
		fail("%d integers; at most %d per call", len(raw), maxBatch)
	}
	nums := make([]int64, len(raw))
	for i, n := range raw {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			fail("element %d (%s) is not a 64-bit integer", i, n)
		}
		nums[i] = v
	}
	slices.Sort(nums)
	out := make([]string, len(nums))
	for i, v := range nums {
		out[i] = strconv.FormatInt(v, 10)
	}
	fmt.Printf("[%s]\n", strings.Join(out, ","))
}

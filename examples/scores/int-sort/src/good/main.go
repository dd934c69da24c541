// int-sort reads a JSON array of 64-bit integers on stdin and writes it sorted ascending,
// duplicates kept, on stdout; an integer may be written as an integral decimal (3.0). Invalid input (not an array of integers in int64 range, or
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
		v, ok := int64Of(n.String())
		if !ok {
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

// int64Of is the value of a JSON number literal that is an integer in int64 range, however
// it is written: JSON Schema's "integer" is any number with a zero fractional part, so 3,
// 3.0, 3e0 and 30e-1 are all 3. It is exact (no float64) and linear in the literal's length.
func int64Of(lit string) (int64, bool) {
	sign := ""
	if strings.HasPrefix(lit, "-") {
		sign, lit = "-", lit[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(lit), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if strings.Trim(digits, "0") == "" {
		return 0, true
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil || e > 1<<20 || e < -(1<<20) {
			return 0, false // far out of range, or far from an integer
		}
		exp = e
	}
	exp -= len(frac)
	for strings.HasSuffix(digits, "0") {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	if exp < 0 || len(digits)+exp > 19 {
		return 0, false // a fraction, or more than 19 digits
	}
	v, err := strconv.ParseInt(sign+digits+strings.Repeat("0", exp), 10, 64)
	return v, err == nil
}

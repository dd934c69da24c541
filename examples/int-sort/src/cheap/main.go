// int-sort, the quick version: it sorts through a set, so equal integers come out once.
// It passes every case that has no duplicates.
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

func main() {
	data, _ := io.ReadAll(os.Stdin)
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var raw []json.Number
	if err := dec.Decode(&raw); err != nil || raw == nil || len(raw) > 10000 {
		fmt.Fprintln(os.Stderr, "int-sort: invalid input")
		os.Exit(2)
	}
	seen := map[int64]bool{}
	var nums []int64
	for _, n := range raw {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "int-sort: invalid input")
			os.Exit(2)
		}
		if !seen[v] {
			seen[v] = true
			nums = append(nums, v)
		}
	}
	slices.Sort(nums)
	out := make([]string, len(nums))
	for i, v := range nums {
		out[i] = strconv.FormatInt(v, 10)
	}
	fmt.Printf("[%s]\n", strings.Join(out, ","))
}

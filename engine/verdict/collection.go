package verdict

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// relation is how two JSON values are compared: as the json equivalence does, numbers
// within a tolerance when numeric, and arrays as unordered collections when unordered.
type relation struct {
	numeric   bool
	tol       tolerance
	unordered bool
}

// maxMatched bounds the arrays compareCollections matches element by element (a bipartite
// matching takes up to n² comparisons); longer ones are compared in sorted order only.
const maxMatched = 256

// compareCollections compares two arrays as multisets under r: equal when their elements
// can be paired one to one, each pair equal under r. It never passes arrays that cannot be
// so paired. Both are sorted (by JSON type, then value) and compared pairwise, which finds
// the pairing of exactly equal elements and of numbers within a tolerance; when that fails
// and the arrays have at most maxMatched elements, a maximum bipartite matching decides
// (a tolerance is not transitive, so sorted order can miss a pairing). Longer arrays that
// sorted order does not pair fail: judgment never fails open.
func compareCollections(got, want []any, path string, r relation) *mismatch {
	if len(got) != len(want) {
		return &mismatch{path, fmt.Sprintf("got %d elements, want %d (as an unordered collection)", len(got), len(want))}
	}
	gs, ws := slices.Clone(got), slices.Clone(want)
	slices.SortStableFunc(gs, orderJSON)
	slices.SortStableFunc(ws, orderJSON)
	first := -1
	for i := range ws {
		if compareValues(gs[i], ws[i], path, r) != nil {
			first = i
			break
		}
	}
	if first < 0 {
		return nil
	}
	if len(ws) <= maxMatched {
		unmatched := unmatchedWanted(gs, ws, path, r)
		if unmatched < 0 {
			return nil
		}
		first = unmatched
	}
	return &mismatch{path, "no element of the output matches the expected element " + shortValue(ws[first], 64) + " (as an unordered collection)"}
}

// unmatchedWanted finds a maximum matching between got and want (Kuhn's augmenting paths;
// an edge is a pair equal under r) and returns the index of a wanted element left
// unmatched, or -1 when every one is matched.
func unmatchedWanted(got, want []any, path string, r relation) int {
	n := len(want)
	equal := make([][]int8, n) // 0 unknown, 1 equal, -1 not: each pair compared once
	for i := range equal {
		equal[i] = make([]int8, len(got))
	}
	eq := func(w, g int) bool {
		if equal[w][g] == 0 {
			equal[w][g] = -1
			if compareValues(got[g], want[w], path, r) == nil {
				equal[w][g] = 1
			}
		}
		return equal[w][g] == 1
	}
	owner := make([]int, len(got)) // the wanted element matched to each got element, or -1
	for i := range owner {
		owner[i] = -1
	}
	var augment func(w int, seen []bool) bool
	augment = func(w int, seen []bool) bool {
		for g := range got {
			if seen[g] || !eq(w, g) {
				continue
			}
			seen[g] = true
			if owner[g] < 0 || augment(owner[g], seen) {
				owner[g] = w
				return true
			}
		}
		return false
	}
	for w := range want {
		if !augment(w, make([]bool, len(got))) {
			return w
		}
	}
	return -1
}

// orderJSON is a total order on decoded JSON values, used only to pair elements: by type
// (null, false, true, numbers, strings, arrays, objects), numbers by value (as doubles,
// then by literal), strings by their text, arrays element by element, objects by their
// sorted member names and then values.
func orderJSON(a, b any) int {
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	switch x := a.(type) {
	case json.Number:
		y := b.(json.Number)
		if c := cmp.Compare(parseNumber(string(x)).float(), parseNumber(string(y)).float()); c != 0 {
			return c
		}
		return strings.Compare(string(x), string(y))
	case string:
		return strings.Compare(x, b.(string))
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := orderJSON(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(x), len(y))
	case map[string]any:
		y := b.(map[string]any)
		xk, yk := sortedKeys(x), sortedKeys(y)
		if c := slices.Compare(xk, yk); c != 0 {
			return c
		}
		for _, k := range xk {
			if c := orderJSON(x[k], y[k]); c != 0 {
				return c
			}
		}
	}
	return 0
}

func rank(v any) int {
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 2
		}
		return 1
	case json.Number:
		return 3
	case string:
		return 4
	case []any:
		return 5
	default:
		return 6
	}
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

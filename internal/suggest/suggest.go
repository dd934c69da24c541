// Package suggest picks the name a mistyped one was probably meant to be, for the "did you
// mean" of an error: an unknown command, node address, capability, or a name in a
// configuration file. It imports nothing of Foundry.
package suggest

import "github.com/agext/levenshtein"

// MaxDistance is the largest edit distance (Levenshtein: insertions, deletions,
// substitutions) at which a candidate is suggested: a transposed pair of letters ("plna")
// is 2, and 3 would suggest "dev" for any three letters.
const MaxDistance = 2

// Closest returns the candidate nearest to name, or "" when none is within MaxDistance
// edits. Among equally near candidates it returns the one that sorts first, so the answer
// does not depend on the order of candidates (a map's, for example).
func Closest(name string, candidates []string) string {
	best, bestD := "", MaxDistance+1
	for _, c := range candidates {
		d := levenshtein.Distance(name, c, nil)
		if d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	return best
}

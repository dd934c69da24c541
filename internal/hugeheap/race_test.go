//go:build race

package hugeheap

// The race detector keeps shadow memory for what the program maps, so resident memory is
// not the program's alone.
const raceEnabled = true

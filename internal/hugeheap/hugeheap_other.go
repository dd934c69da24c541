//go:build !linux

package hugeheap

func advisable() bool             { return false }
func limit() int                  { return 0 }
func reserve(int, int, bool) bool { return false }

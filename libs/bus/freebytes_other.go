//go:build !unix

package bus

// FreeBytes cannot tell free space here: stores rely on failed writes.
func FreeBytes(string) (int64, bool) { return 0, false }

//go:build !unix

package embednats

// freeBytes cannot tell free space here: the monitor just retries.
func freeBytes(string) (int64, bool) { return 0, false }

//go:build unix

package bus

import "syscall"

// FreeBytes is the space an unprivileged writer has left on dir's file
// system; known is false when it cannot be told.
func FreeBytes(dir string) (free int64, known bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

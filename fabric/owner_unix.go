//go:build unix

package fabric

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the user id owning the file of st; ok false where the system does not
// say.
func fileOwner(st fs.FileInfo) (uid int, ok bool) {
	if sys, isStat := st.Sys().(*syscall.Stat_t); isStat {
		return int(sys.Uid), true
	}
	return 0, false
}

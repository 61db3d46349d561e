package sqlitedb

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sharedMemory is where Memory databases go when it has room: a tmpfs, so the database
// stays in memory (on a disk-backed $TMPDIR every commit also writes the disk's page cache,
// several times slower on a busy machine).
const sharedMemory = "/dev/shm"

// sharedMemoryMin is the free space sharedMemory must have to be used: a container's
// default /dev/shm is 64 MiB, too small for a plane's database.
const sharedMemoryMin = 1 << 30

// memoryParents are the directories to try for a Memory database, best first.
func memoryParents() []string {
	var st syscall.Statfs_t
	if syscall.Statfs(sharedMemory, &st) == nil && uint64(st.Bavail)*uint64(st.Bsize) >= sharedMemoryMin {
		return []string{sharedMemory, os.TempDir()}
	}
	return []string{os.TempDir()}
}

// removeOrphans removes parent's Memory database directories whose process no longer runs
// (/proc/PID is gone); a directory of another user stays (removing it fails harmlessly).
func removeOrphans(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, memoryPrefix+"*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), memoryPrefix)
		pid, err := strconv.Atoi(rest[:max(0, strings.IndexByte(rest, '-'))])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, fs.ErrNotExist) {
			_ = os.RemoveAll(dir)
		}
	}
}

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

// pidNamespace is this process's PID namespace ("4026531836" of "pid:[4026531836]"), or ""
// when /proc does not say.
func pidNamespace() string {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
}

// memoryOwner is the part of a Memory database's directory name that names its process:
// "PIDNS.PID", so that a directory is only ever judged by a process that sees the same PIDs
// (a /dev/shm shared between containers, docker's --ipc=host, is not a shared PID space).
func memoryOwner() string { return pidNamespace() + "." + strconv.Itoa(os.Getpid()) }

// removeOrphans removes parent's Memory database directories made by processes of this PID
// namespace that no longer run (/proc/PID is gone); others are left alone, as is a directory
// of another user (removing it fails harmlessly). Nothing is removed when the namespace is
// unknown.
func removeOrphans(parent string) {
	ns := pidNamespace()
	if ns == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(parent, memoryPrefix+ns+".*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), memoryPrefix+ns+".")
		pid, err := strconv.Atoi(rest[:max(0, strings.IndexByte(rest, '-'))])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, fs.ErrNotExist) {
			_ = os.RemoveAll(dir)
		}
	}
}

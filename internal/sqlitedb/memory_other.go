//go:build !linux

package sqlitedb

import (
	"os"
	"strconv"
)

// memoryParents are the directories to try for a Memory database: os.TempDir.
func memoryParents() []string { return []string{os.TempDir()} }

// memoryOwner names the process in a Memory database's directory name: its pid.
func memoryOwner() string { return strconv.Itoa(os.Getpid()) }

// removeOrphans does nothing where no /proc tells whether a process runs.
func removeOrphans(string) {}

// pidNamespace is "": no /proc tells it.
func pidNamespace() string { return "" }

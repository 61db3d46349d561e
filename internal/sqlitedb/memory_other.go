//go:build !linux

package sqlitedb

import "os"

// memoryParents are the directories to try for a Memory database: os.TempDir.
func memoryParents() []string { return []string{os.TempDir()} }

// removeOrphans does nothing where no /proc tells whether a process runs.
func removeOrphans(string) {}

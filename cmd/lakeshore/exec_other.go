//go:build !linux

package main

import "syscall"

// commandProcAttr puts a command in a process group of its own, so that a stop signals the
// whole group. Outside Linux there is no parent-death signal: the guard process (guard.go)
// alone kills the group of a worker that died; if it could not start, a SIGKILLed worker's
// command runs until it ends on its own while the job is retried elsewhere.
func commandProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

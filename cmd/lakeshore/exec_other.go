//go:build !linux

package main

import "syscall"

// commandProcAttr puts a command in a process group of its own, so that a stop signals the
// whole group. Outside Linux there is no parent-death signal: a worker that is SIGKILLed
// (or crashes) leaves its command running until it ends on its own, while the job's lease
// expires and the job is retried elsewhere. Run workers under a supervisor that kills the
// process group (systemd's KillMode=control-group, a container) where that matters.
func commandProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

package main

import "syscall"

// commandProcAttr puts a command in a process group of its own (so that a stop signals
// the whole group) and asks the kernel to SIGKILL it when the worker dies (Pdeathsig): a
// SIGKILLed or crashed worker leaves no command running unfenced beside the retry of its
// job. Pdeathsig reaches the command itself (the group's leader) even when the guard
// process (guard.go), which kills the whole group, could not start.
func commandProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

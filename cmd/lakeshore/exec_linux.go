package main

import "syscall"

// commandProcAttr puts a command in a process group of its own (so that a stop signals
// the whole group) and asks the kernel to SIGKILL it when the worker dies (Pdeathsig): a
// SIGKILLed or crashed worker leaves no command running unfenced beside the retry of its
// job. Pdeathsig reaches the command itself (the group's leader); processes it starts in
// the background outlive it unless they die with it (exec into the long-running program,
// or have the command wait for its children).
func commandProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Command lakeshore is the command line of Lakeshore, a durable job queue: submit jobs and
// read their results, inspect queues and workers, run workers (Go-free: any program, once
// per job) and map a command over many inputs, against any plane (--target,
// $LAKESHORE_URL, or the embedded default $LAKESHORE_HOME/lakeshore.db).
//
// Exit codes (docs/cli.md): 0 ok; 1 a job failed, was cancelled or killed, or timed out
// (or, for cancel/kill, nothing changed); 2 usage or bad input; 3 not found; 4 a wait timed
// out; 5 any other error (plane, I/O); 130 interrupted.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == guardArg {
		os.Exit(runGuard(os.Stdin))
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	os.Exit(runApp(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, signals))
}

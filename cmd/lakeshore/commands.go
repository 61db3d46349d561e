package main

import "github.com/spf13/cobra"

// commands returns the constructors of the root's subcommands, one per verb (one file
// each). Verbs added later (serve, token) are appended to this list.
func commands() []func(*app) *cobra.Command {
	return []func(*app) *cobra.Command{
		newSubmitCmd,
		newResultCmd,
		newStreamCmd,
		newGetCmd,
		newCancelCmd,
		newKillCmd,
		newCountCmd,
		newJobsCmd,
		newQueuesCmd,
		newQueueCmd,
		newWorkersCmd,
		newTopicCmd,
		newTrimCmd,
		newWorkerCmd,
		newMapCmd,
		newServeCmd, newTokenCmd, newDaemonCmd, newMigrateCmd,
		newDataCmd,
		newProviderCmd,
		newScheduleCmd,
	}
}

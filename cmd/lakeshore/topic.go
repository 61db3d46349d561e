package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
)

func newTopicCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "topic",
		Args:  cobra.ArbitraryArgs,
		RunE:  unknownSubcommand,
		Short: "Post to and listen on a queue's topics (pub/sub journals)",
	}
	c.AddCommand(newTopicPostCmd(a), newTopicListenCmd(a))
	return c
}

func newTopicPostCmd(a *app) *cobra.Command {
	var asString, final bool
	c := &cobra.Command{
		Use:   "post QUEUE TOPIC [VALUE]",
		Short: "Post a JSON value to a topic (--final closes the topic)",
		Args:  rangeArgs(2, 3),
		RunE: func(c *cobra.Command, args []string) error {
			var value any
			if len(args) == 3 {
				value = args[2]
				if !asString {
					v, err := parseJSON([]byte(args[2]))
					if err != nil {
						return jsonInputError("value", err)
					}
					value = v
				}
			} else if !final {
				return usagef("give a VALUE, or --final to close the topic")
			}
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			t, err := q.Topic(args[1])
			if err != nil {
				return err
			}
			var seq int64
			if len(args) == 3 {
				if seq, err = t.Post(c.Context(), value); err != nil {
					return err
				}
			}
			if final {
				if err := t.Close(c.Context()); err != nil {
					return err
				}
			}
			if a.json {
				return a.printJSON(map[string]any{"topic": t.Name(), "seq": seq, "final": final})
			}
			if len(args) == 3 {
				fmt.Fprintln(a.stdout, seq)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asString, "string", false, "take VALUE as a plain string, not JSON")
	c.Flags().BoolVar(&final, "final", false, "close the topic (END) after posting")
	return c
}

func newTopicListenCmd(a *app) *cobra.Command {
	var (
		since   int64
		timeout time.Duration
		follow  bool
	)
	c := &cobra.Command{
		Use:   "listen QUEUE TOPIC",
		Short: "Print the next value of a topic after --since, or follow it with --follow",
		Long: `Print the next value posted to TOPIC after --since ("SEQ<TAB>VALUE", or JSON with
--json), waiting up to --timeout (exit 4 when none came; exit 1 when the topic is
closed with no value after --since: none will come). With --follow, print every
value until the topic is closed.`,
		Args: exactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			a.rideOut = true // waits: rides out an outage
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			t, err := q.Topic(args[1])
			if err != nil {
				return err
			}
			print := func(f lakeshore.Frame) error {
				if a.json {
					return a.printJSON(map[string]any{"seq": f.Seq, "value": f.Value})
				}
				_, err := fmt.Fprintf(a.stdout, "%d\t%s\n", f.Seq, printable(compactJSON(f.Value)))
				return err
			}
			if follow {
				for f, err := range t.Stream(c.Context(), since, &lakeshore.StreamOptions{Timeout: timeout}) {
					if err != nil {
						return err
					}
					if err := print(f); err != nil {
						return err
					}
				}
				return nil
			}
			f, ok, err := t.Listen(c.Context(), since, &lakeshore.ListenOptions{Timeout: timeout})
			after := "" // from the start: no seq to name (not "after -1")
			if since != lakeshore.FromStart {
				after = fmt.Sprintf(" after seq %d", since)
			}
			if errors.Is(err, lakeshore.ErrJournalClosed) {
				// No value will ever come: the wait ended as a job's does when it ended.
				return &codeError{code: exitJobFailed, err: fmt.Errorf("topic %s is closed: no value%s will come", t.Name(), after)}
			}
			if err != nil {
				return err
			}
			if !ok {
				return &codeError{code: exitWaitTimeout, err: fmt.Errorf("no value on topic %s%s within %s: %w", t.Name(), after, timeout, lakeshore.ErrTimeout)}
			}
			return print(f)
		},
	}
	c.Flags().Int64Var(&since, "since", lakeshore.FromStart, "print values after this seq (-1: from the start)")
	c.Flags().DurationVar(&timeout, "timeout", lakeshore.TopicTimeoutDefault, "how long to wait for a value (negative: forever)")
	c.Flags().BoolVar(&follow, "follow", false, "print every value until the topic is closed")
	return c
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func newGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use: "get ID",
		// Other tools' names for showing one job: `lakeshore status` suggests get.
		SuggestFor: []string{"status", "show", "inspect", "describe"},
		Short:      "Show a job: state, attempts, times, payload, result or error",
		Args:       exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			d, q, err := a.queue(c.Context(), anyQueue)
			if err != nil {
				return err
			}
			defer d.Close()
			inv, err := q.Get(c.Context(), args[0])
			if err != nil {
				return verbError("get", args[0], err)
			}
			return a.printInvocation(inv, capableWorkers(c.Context(), d, inv))
		},
	}
}

// capable is what get shows of the workers that can run a queued invocation with a
// requirement (docs/semantics.md, "Placement").
type capable struct {
	Capable int `json:"capable"` // live workers of the queue whose offers satisfy it
	Serving int `json:"serving"` // live workers of the queue
}

// capableWorkers counts the live registered workers that can run inv, when it is queued
// with a requirement (nil otherwise, or when the registry cannot be read: a token without
// consume on the namespace).
func capableWorkers(ctx context.Context, d *lakeshore.Dispatch, inv *lakeshore.Invocation) *capable {
	if inv.State != lakeshore.StateQueued || inv.Requirement == nil {
		return nil
	}
	ws, err := d.Workers(ctx, nil)
	if err != nil {
		return nil
	}
	var c capable
	c.Capable, c.Serving = plane.CapableWorkers(inv.Requirement, inv.Namespace, inv.Queue, ws)
	return &c
}

func (a *app) printInvocation(inv *lakeshore.Invocation, workers *capable) error {
	payload, _ := decodeValue(inv.Payload)
	result, _ := decodeValue(inv.Result)
	m := map[string]any{
		"id": inv.ID, "namespace": inv.Namespace, "queue": inv.Queue, "state": inv.State,
		"attempt": inv.Attempt, "max_attempts": inv.MaxAttempts, "priority": inv.Priority,
		"payload": payload, "created_at": inv.CreatedAt,
	}
	if inv.Worker != "" {
		m["worker"] = inv.Worker
	}
	if inv.AttemptTimeout > 0 {
		m["attempt_timeout_s"] = inv.AttemptTimeout.Seconds()
	}
	if due := delayedUntil(inv); !due.IsZero() {
		m["available_at"] = due
	}
	if inv.Key != "" {
		m["key"] = inv.Key
	}
	if inv.ConcurrencyKey != "" {
		m["concurrency_key"] = inv.ConcurrencyKey
	}
	if len(inv.Metadata) > 0 {
		m["metadata"] = inv.Metadata
	}
	if inv.Requirement != nil {
		m["requirement"], m["shape"] = api.NewRequirement(inv.Requirement), inv.Shape
	}
	if workers != nil {
		m["workers"] = workers
	}
	for k, t := range map[string]time.Time{"started_at": inv.StartedAt, "finished_at": inv.FinishedAt,
		"lease_expires_at": inv.LeaseExpiresAt, "deadline": inv.Deadline} {
		if !t.IsZero() {
			m[k] = t
		}
	}
	if inv.State == lakeshore.StateSucceeded {
		m["result"] = result
	}
	if inv.Error != nil {
		m["error"] = inv.Error
	}
	if a.json {
		return a.printJSON(m)
	}
	tw := a.table()
	row := func(k string, v any) { tw.row(k, v) }
	row("id", inv.ID)
	row("queue", inv.Namespace+"/"+inv.Queue)
	row("state", inv.State)
	row("attempt", fmt.Sprintf("%d of %d", inv.Attempt, inv.MaxAttempts))
	if inv.AttemptTimeout > 0 {
		row("attempt timeout", inv.AttemptTimeout)
	}
	if inv.Key != "" {
		row("key", inv.Key)
	}
	if inv.ConcurrencyKey != "" {
		row("concurrency key", inv.ConcurrencyKey)
	}
	row("priority", inv.Priority)
	row("created", formatTime(inv.CreatedAt))
	if due := delayedUntil(inv); !due.IsZero() {
		row("available", formatTime(due)+" (delayed)")
	}
	if !inv.Deadline.IsZero() {
		row("deadline", formatTime(inv.Deadline))
	}
	row("started", formatTime(inv.StartedAt))
	if !inv.LeaseExpiresAt.IsZero() {
		row("lease expires", formatTime(inv.LeaseExpiresAt))
	}
	row("finished", formatTime(inv.FinishedAt))
	if inv.Worker != "" {
		row("worker", inv.Worker)
	}
	if r := inv.Requirement; r != nil {
		row("requires", requirementText(r)+" (shape "+inv.Shape+")")
	}
	if workers != nil {
		if workers.Capable == 0 {
			row("workers", fmt.Sprintf("no capable worker: none of the %d live workers of the queue offers this", workers.Serving))
		} else {
			row("workers", fmt.Sprintf("%d of the %d live workers of the queue can run it", workers.Capable, workers.Serving))
		}
	}
	// The run declaration of a compute mode (docs/fabric.md), shown by name; the other
	// metadata after it, a key=value line each in key order.
	shown := map[string]bool{}
	if m := inv.Metadata[fabric.MetaMode]; m != "" {
		row("mode", m+" (host key "+inv.Metadata[fabric.MetaHostKey]+")")
		shown[fabric.MetaMode], shown[fabric.MetaHostKey] = true, true
	}
	if c := inv.Metadata[fabric.MetaCode]; c != "" {
		row("code", c)
		shown[fabric.MetaCode] = true
	}
	var git fabric.GitContext
	if g := inv.Metadata[fabric.MetaGit]; g != "" && json.Unmarshal([]byte(g), &git) == nil {
		row("git", git.String())
		shown[fabric.MetaGit] = true
	}
	label := "metadata"
	for _, k := range slices.Sorted(maps.Keys(inv.Metadata)) {
		if !shown[k] {
			row(label, k+"="+inv.Metadata[k])
			label = ""
		}
	}
	row("payload", compactJSON(payload))
	if inv.State == lakeshore.StateSucceeded {
		row("result", compactJSON(result))
	}
	if inv.Error != nil {
		row("error", fmt.Sprintf("%s (attempt %d): %s", inv.Error.Type, inv.Error.Attempt, inv.Error.Message))
	}
	return tw.Flush()
}

// delayedUntil is when a queued invocation that is not claimable yet (a delayed submit or
// a retry's backoff) becomes claimable; zero when it is claimable now or not queued.
func delayedUntil(inv *lakeshore.Invocation) time.Time {
	if inv.State == lakeshore.StateQueued && inv.AvailableAt.After(time.Now()) {
		return inv.AvailableAt
	}
	return time.Time{}
}

// memoryText writes n bytes in the largest binary unit that holds it exactly (16GiB,
// 1536MiB, 100), as --requires and --offers take it.
func memoryText(n int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// requirementText writes r as submit --requires takes it.
func requirementText(r *lakeshore.Requirement) string {
	var parts []string
	if r.MilliCPUs > 0 {
		parts = append(parts, "cpus="+strconv.FormatFloat(float64(r.MilliCPUs)/1000, 'f', -1, 64))
	}
	if r.MemoryBytes > 0 {
		parts = append(parts, "memory="+memoryText(r.MemoryBytes))
	}
	if r.GPUs > 0 {
		parts = append(parts, "gpus="+strconv.FormatInt(r.GPUs, 10))
	}
	if r.GPUType != "" {
		parts = append(parts, "gpu_type="+r.GPUType)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		parts = append(parts, "label."+k+"="+r.Labels[k])
	}
	return strings.Join(parts, ",")
}

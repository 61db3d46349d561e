package provider_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	idle := func(id string, since time.Duration) plane.WorkerInfo {
		return plane.WorkerInfo{LaunchID: id, IdleSince: now.Add(-since)}
	}
	busy := func(id string) plane.WorkerInfo { return plane.WorkerInfo{LaunchID: id, Running: 1} }
	policy := plane.LaunchPolicy{MinWorkers: 0, MaxWorkers: 4, JobsPerWorker: 10, Cooldown: 5 * time.Second,
		IdleTimeout: time.Minute, Command: []string{"w"}}.WithDefaults()
	cases := []struct {
		name   string
		state  provider.QueueState
		want   int
		live   int
		launch int
		stop   []string
		expire []string
	}{
		{name: "empty queue, no workers: nothing", state: provider.QueueState{}, want: 0},
		{name: "one job at zero workers launches one", state: provider.QueueState{Queued: 1}, want: 1, launch: 1},
		{name: "backlog is divided by jobs per worker, rounded up", state: provider.QueueState{Queued: 21}, want: 3, launch: 3},
		{name: "running jobs count as work", state: provider.QueueState{Queued: 5, Running: 10,
			Workers: []plane.WorkerInfo{busy("a")}}, want: 2, live: 1, launch: 1},
		{name: "capped at max", state: provider.QueueState{Queued: 1_000_000}, want: 4, launch: 4},
		{name: "huge backlog does not overflow", state: provider.QueueState{Queued: 1 << 62, Running: 1 << 62}, want: 4, launch: 4},
		{name: "pending launches count as live", state: provider.QueueState{Queued: 30,
			Pending: map[string]time.Time{"p1": now, "p2": now}}, want: 3, live: 2, launch: 1},
		{name: "a launch past the register timeout expires and is replaced", state: provider.QueueState{Queued: 5,
			Pending: map[string]time.Time{"old": now.Add(-3 * time.Minute)}}, want: 1, live: 0, launch: 1, expire: []string{"old"}},
		{name: "backoff delays launches", state: provider.QueueState{Queued: 5, NextLaunch: now.Add(time.Second)}, want: 1},
		{name: "idle workers above the backlog stop, oldest idle first", state: provider.QueueState{
			Workers: []plane.WorkerInfo{idle("young", 2*time.Minute), idle("old", 5*time.Minute), busy("b")}},
			want: 0, live: 3, stop: []string{"old", "young"}},
		{name: "a worker idle for less than the idle timeout stays", state: provider.QueueState{
			Workers: []plane.WorkerInfo{idle("a", 10*time.Second)}}, want: 0, live: 1},
		{name: "cooldown delays a scale-down", state: provider.QueueState{LastScaleDown: now.Add(-time.Second),
			Workers: []plane.WorkerInfo{idle("a", 5*time.Minute)}}, want: 0, live: 1},
		{name: "never below the backlog's need", state: provider.QueueState{Queued: 15,
			Workers: []plane.WorkerInfo{idle("a", 5*time.Minute), idle("b", 5*time.Minute), idle("c", 5*time.Minute)}},
			want: 2, live: 3, stop: []string{"a"}},
		{name: "launches stopping count as live while they drain: no launch above max", state: provider.QueueState{
			Queued: 100, Stopping: 4}, want: 4, live: 4},
		{name: "launches stopping are not stopped again", state: provider.QueueState{Stopping: 2,
			Workers: []plane.WorkerInfo{idle("a", 5*time.Minute)}}, want: 0, live: 3, stop: []string{"a"}},
		{name: "cooldown never delays a launch", state: provider.QueueState{Queued: 5, LastScaleDown: now}, want: 1, launch: 1},
		{name: "a paused queue's backlog launches nothing", state: provider.QueueState{Queued: 100, Paused: true}, want: 0},
		{name: "a paused queue's running jobs keep their workers, its idle ones stop", state: provider.QueueState{Queued: 100, Running: 10, Paused: true,
			Workers: []plane.WorkerInfo{busy("b"), idle("a", 5*time.Minute)}}, want: 1, live: 2, stop: []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.state
			s.Policy, s.Now = policy, now
			if s.Pending == nil {
				s.Pending = map[string]time.Time{}
			}
			d := provider.Decide(&s)
			if d.Want != c.want || d.Live != c.live || d.Launch != c.launch || !slices.Equal(d.Stop, c.stop) || !slices.Equal(d.Expired, c.expire) {
				t.Fatalf("Decide = want %d live %d launch %d stop %v expired %v (%s); expected want %d live %d launch %d stop %v expired %v",
					d.Want, d.Live, d.Launch, d.Stop, d.Expired, d.Reason, c.want, c.live, c.launch, c.stop, c.expire)
			}
		})
	}

	t.Run("min workers stay when idle", func(t *testing.T) {
		p := policy
		p.MinWorkers = 2
		d := provider.Decide(&provider.QueueState{Policy: p, Now: now, Pending: map[string]time.Time{},
			Workers: []plane.WorkerInfo{idle("a", time.Hour), idle("b", time.Hour), idle("c", time.Hour)}})
		if d.Want != 2 || !slices.Equal(d.Stop, []string{"a"}) {
			t.Fatalf("Decide with min 2 and 3 idle = want %d stop %v; expected want 2 stop [a]", d.Want, d.Stop)
		}
		d = provider.Decide(&provider.QueueState{Policy: p, Now: now, Pending: map[string]time.Time{}})
		if d.Launch != 2 {
			t.Fatalf("Decide with min 2 and no workers launches %d; expected 2", d.Launch)
		}
	})
	t.Run("scale-up step caps one tick", func(t *testing.T) {
		p := policy
		p.ScaleUpStep = 1
		d := provider.Decide(&provider.QueueState{Policy: p, Now: now, Queued: 100, Pending: map[string]time.Time{}})
		if d.Launch != 1 {
			t.Fatalf("Decide with step 1 launches %d; expected 1", d.Launch)
		}
	})
	t.Run("buffer keeps idle workers beyond the backlog", func(t *testing.T) {
		p := policy
		p.Buffer = 1
		d := provider.Decide(&provider.QueueState{Policy: p, Now: now, Queued: 15, Pending: map[string]time.Time{}})
		if d.Want != 3 || d.Launch != 3 {
			t.Fatalf("Decide with buffer 1 and 15 queued (10 per worker) = want %d launch %d; expected 3 and 3", d.Want, d.Launch)
		}
		d = provider.Decide(&provider.QueueState{Policy: p, Now: now, Pending: map[string]time.Time{},
			Workers: []plane.WorkerInfo{idle("a", time.Hour)}})
		if d.Want != 1 || len(d.Stop) != 0 {
			t.Fatalf("Decide with buffer 1 and an empty default shape = want %d stop %v; expected the buffer kept", d.Want, d.Stop)
		}
	})
	t.Run("a shape has no minimum and a buffer only while it has work", func(t *testing.T) {
		p := policy
		p.MinWorkers, p.Buffer = 2, 1
		d := provider.Decide(&provider.QueueState{Policy: p, Shaped: true, Now: now, Pending: map[string]time.Time{},
			Workers: []plane.WorkerInfo{idle("a", time.Hour), idle("b", time.Hour)}})
		if d.Want != 0 || !slices.Equal(d.Stop, []string{"a", "b"}) {
			t.Fatalf("Decide for an empty shape = want %d stop %v; expected 0 and both stopped", d.Want, d.Stop)
		}
		d = provider.Decide(&provider.QueueState{Policy: p, Shaped: true, Now: now, Running: 1, Pending: map[string]time.Time{}})
		if d.Want != 2 {
			t.Fatalf("Decide for a shape with one running job and buffer 1 = want %d; expected 2", d.Want)
		}
	})
}

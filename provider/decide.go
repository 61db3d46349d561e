package provider

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueueState is what a supervisor knows of one shape of one queue at a tick: the input of
// Decide. The supervisor decides for each (queue, shape) apart (docs/providers.md,
// "Launching by shape").
type QueueState struct {
	// Policy is the queue's launch policy with defaults applied; for a shape, MaxWorkers is
	// what the queue's other shapes leave of it.
	Policy plane.LaunchPolicy
	// Shaped is true for a shape other than the default: MinWorkers does not apply, and
	// Buffer only while the shape has queued or running jobs.
	Shaped bool
	// Queued and Running are the shape's invocation counts.
	Queued, Running int64
	// Paused is true while the queue is paused (plane.ShapeDemand.Paused): its queued jobs
	// are claimed by no worker until it resumes, so they want none (Decide counts them as
	// 0); its running jobs still count.
	Paused bool
	// Workers are the registered workers this queue's provider launched for it, that are
	// still alive in the provider and not being stopped (those are Stopping).
	Workers []plane.WorkerInfo
	// Pending are launches not registered yet, with the time each was made (or adopted).
	Pending map[string]time.Time
	// Stopping is how many launches the supervisor asked to stop that have not ended yet:
	// they drain (finish their running jobs) and count as live, so MaxWorkers caps what
	// runs, but they are neither in Workers nor in Pending and are never stopped twice.
	Stopping int
	// LastScaleDown is when the supervisor last changed the queue's workers: its last stop
	// of an idle worker or its last launch. Cooldown counts from it, and delays only
	// scale-downs.
	LastScaleDown time.Time
	// NextLaunch is the earliest time of the next launch (backoff after failed launches);
	// zero for no wait.
	NextLaunch time.Time
	// Now is the tick's time.
	Now time.Time
}

// Decision is what a supervisor does for one queue at a tick.
type Decision struct {
	// Want is the number of workers the policy wants: ceil((queued + running) ÷ jobs per
	// worker) + buffer within [min, max].
	Want int
	// Live is the workers registered plus launches pending plus launches stopping.
	Live int
	// Launch is how many workers to launch now.
	Launch int
	// Stop are the launch ids of workers to stop now (idle ones only).
	Stop []string
	// Expired are pending launches that did not register within the register timeout:
	// stopped and counted as failed.
	Expired []string
	// Reason says why, in a few words, for the log.
	Reason string
}

// Decide is the scaling rule, a pure function of the queue's state (docs/providers.md):
//
//   - want = clamp(ceil((queued + running) ÷ JobsPerWorker) + Buffer, MinWorkers, MaxWorkers)
//     for the default shape (queued is 0 while the queue is Paused); for another shape (Shaped) MinWorkers is 0 and Buffer counts
//     only while the shape has queued or running jobs, so its workers go with its work;
//   - live = registered workers + pending launches + launches stopping (a launch that has not
//     registered within RegisterTimeout is expired: stopped, counted as failed, and no
//     longer pending; until it has ended it counts as stopping);
//   - want > live: launch want − live (at most ScaleUpStep, none before NextLaunch);
//     Cooldown never delays a launch;
//   - live > want, Cooldown passed since the last launch or idle stop (LastScaleDown): stop
//     workers that ran no job for IdleTimeout, oldest idle first, never below want, never
//     one that runs a job.
func Decide(s *QueueState) Decision {
	p := s.Policy
	var d Decision
	per := int64(max(1, p.JobsPerWorker))
	queued, running := max(s.Queued, 0), max(s.Running, 0)
	if s.Paused {
		queued = 0 // no worker could claim them: a launch for them would idle
	}
	work := queued + running
	if work < queued { // saturate instead of overflowing
		work = math.MaxInt64
	}
	want := min(ceilDiv(work, per), int64(p.MaxWorkers))
	if p.Buffer > 0 && (work > 0 || !s.Shaped) {
		want = min(want+int64(p.Buffer), int64(p.MaxWorkers))
	}
	least := p.MinWorkers
	if s.Shaped {
		least = 0
	}
	d.Want = min(max(int(want), least), p.MaxWorkers)

	for id, at := range s.Pending {
		if s.Now.Sub(at) > p.RegisterTimeout {
			d.Expired = append(d.Expired, id)
		}
	}
	slices.Sort(d.Expired)
	d.Live = len(s.Workers) + len(s.Pending) + max(s.Stopping, 0) - len(d.Expired)

	switch {
	case d.Want > d.Live:
		n := d.Want - d.Live
		if p.ScaleUpStep > 0 {
			n = min(n, p.ScaleUpStep)
		}
		if s.Now.Before(s.NextLaunch) {
			d.Reason = "backing off after failed launches"
			return d
		}
		d.Launch = n
		d.Reason = "backlog above the live workers"
	case d.Live > d.Want:
		if s.Now.Sub(s.LastScaleDown) < p.Cooldown {
			d.Reason = "cooling down"
			return d
		}
		var idle []plane.WorkerInfo
		for _, w := range s.Workers {
			if w.Running == 0 && !w.IdleSince.IsZero() && s.Now.Sub(w.IdleSince) >= p.IdleTimeout {
				idle = append(idle, w)
			}
		}
		slices.SortFunc(idle, func(a, b plane.WorkerInfo) int {
			if c := a.IdleSince.Compare(b.IdleSince); c != 0 {
				return c
			}
			return strings.Compare(a.LaunchID, b.LaunchID)
		})
		// Only registered workers can be stopped as idle; pending launches are kept.
		n := min(d.Live-d.Want, len(idle))
		for _, w := range idle[:n] {
			d.Stop = append(d.Stop, w.LaunchID)
		}
		if n > 0 {
			d.Reason = "workers idle above the backlog"
		}
	}
	return d
}

// ceilDiv is ⌈a ÷ b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return a/b + min(a%b, 1) }

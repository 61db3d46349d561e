package ui

import (
	"context"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// History defaults.
const (
	// HistoryIntervalDefault is how often History samples the plane's counters.
	HistoryIntervalDefault = 10 * time.Second
	// HistorySpan is how far back History keeps samples: the overview's charts show the
	// last hour.
	HistorySpan = time.Hour
)

// History samples the per-queue counters of a plane (Driver.QueueStatsList, which reads
// counters, not invocations) at a fixed interval and keeps the last HistorySpan of them, so
// the dashboard can chart submitted, succeeded and failed invocations per second per
// queue. Rates are differences of consecutive samples: submitted from the total over every
// state, succeeded from the succeeded count, failed from failed plus timeout. A trim lowers
// counts: a negative difference counts as 0. Safe for concurrent use.
type History struct {
	stats    func(context.Context) ([]plane.QueueStats, error)
	interval time.Duration
	capacity int

	mu      sync.Mutex
	samples []sample // oldest first, at most capacity
	started bool
	stop    context.CancelFunc
	done    chan struct{}
}

type queueKey struct{ namespace, queue string }

// sample is one reading of every queue's counters.
type sample struct {
	at     time.Time
	counts map[queueKey]counters
}

type counters struct{ total, succeeded, failed int64 }

// NewHistory returns a History reading stats every interval (HistoryIntervalDefault when
// ≤ 0). It samples nothing until Start.
func NewHistory(stats func(context.Context) ([]plane.QueueStats, error), interval time.Duration) *History {
	if interval <= 0 {
		interval = HistoryIntervalDefault
	}
	return &History{stats: stats, interval: interval, capacity: int(HistorySpan/interval) + 1}
}

// Interval returns the sampling interval.
func (h *History) Interval() time.Duration { return h.interval }

// Start starts sampling until Stop: the first sample before it returns (so whatever
// happens after Start shows in the history; a first sample taken later would swallow it in
// its baseline), then every interval. Calls after the first, and after Stop, do nothing.
func (h *History) Start() {
	h.mu.Lock()
	if h.started {
		h.mu.Unlock()
		return
	}
	h.started = true
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan struct{})
	h.mu.Unlock()
	h.sampleOnce(ctx)
	go h.run(ctx)
}

// Stop ends sampling and waits for the sampler to return. Safe to call twice, or without
// Start.
func (h *History) Stop() {
	h.mu.Lock()
	h.started = true // no Start after Stop
	stop, done := h.stop, h.done
	h.stop = nil
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (h *History) run(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.sampleOnce(ctx)
	}
}

// sampleOnce reads the counters once; a failed read leaves a gap.
func (h *History) sampleOnce(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, h.interval)
	defer cancel()
	stats, err := h.stats(rctx)
	if err != nil {
		return
	}
	// The wall clock alone (Round(0) drops the monotonic reading), so that an interval's
	// length is the distance between the Times a reader sees: Time − Seconds is the previous
	// point's Time even while the host's time sync slews or steps the wall clock.
	s := sample{at: time.Now().Round(0), counts: make(map[queueKey]counters, len(stats))}
	for _, q := range stats {
		var c counters
		for st, n := range q.Counts {
			c.total += n
			switch st {
			case plane.StateSucceeded:
				c.succeeded += n
			case plane.StateFailed, plane.StateTimeout:
				c.failed += n
			}
		}
		s.counts[queueKey{q.Namespace, q.Queue}] = c
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) == h.capacity {
		copy(h.samples, h.samples[1:])
		h.samples = h.samples[:len(h.samples)-1]
	}
	h.samples = append(h.samples, s)
}

// Point is the rates of one queue between two samples, in invocations per second; Time is
// the end of the interval and Seconds its length (the sampling interval, longer when a
// sample was late), so rate × Seconds is the count of the interval. Both are on the wall
// clock: Time − Seconds is the previous sample's time, so a queue's points tile the time
// axis; an interval across which the wall clock stepped back is left out.
type Point struct {
	Time      time.Time `json:"t"`
	Seconds   float64   `json:"seconds"`
	Submitted float64   `json:"submitted"`
	Succeeded float64   `json:"succeeded"`
	Failed    float64   `json:"failed"`
}

// Series is the rate history of one queue, oldest point first.
type Series struct {
	Namespace string  `json:"namespace"`
	Queue     string  `json:"queue"`
	Points    []Point `json:"points"`
}

// Series returns the history of every queue allow accepts (nil: all), in no particular
// order. A queue absent from the previous sample counts from zero (its first submits show);
// a queue absent from a sample has no point for the interval ending there.
func (h *History) Series(allow func(namespace, queue string) bool) []Series {
	h.mu.Lock()
	defer h.mu.Unlock()
	index := map[queueKey]int{}
	var out []Series
	for i := 1; i < len(h.samples); i++ {
		prev, cur := h.samples[i-1], h.samples[i]
		dt := cur.at.Sub(prev.at).Seconds()
		if dt <= 0 {
			continue
		}
		for k, c := range cur.counts {
			p := prev.counts[k] // a queue new since the previous sample started from zero
			j, seen := index[k]
			if !seen {
				if allow != nil && !allow(k.namespace, k.queue) {
					index[k] = -1
					continue
				}
				j = len(out)
				index[k] = j
				out = append(out, Series{Namespace: k.namespace, Queue: k.queue})
			}
			if j < 0 {
				continue
			}
			rate := func(a, b int64) float64 { return float64(max(b-a, 0)) / dt }
			out[j].Points = append(out[j].Points, Point{Time: cur.at, Seconds: dt, Submitted: rate(p.total, c.total),
				Succeeded: rate(p.succeeded, c.succeeded), Failed: rate(p.failed, c.failed)})
		}
	}
	return out
}

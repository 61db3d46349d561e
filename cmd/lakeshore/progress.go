package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// progress reports a map's progress on stderr: a bar redrawn in place on a terminal,
// plain periodic lines otherwise.
type progress struct {
	w        io.Writer
	bar      bool
	off      bool
	interval time.Duration
	total    int
	reused   int // inputs that had succeeded before this run
	start    time.Time
	done     int
	failed   int
	drawn    bool
}

func newProgress(w io.Writer, mode string, interval time.Duration, total int) *progress {
	p := &progress{w: w, interval: interval, total: total, start: time.Now()}
	switch mode {
	case "none":
		p.off = true
	case "bar":
		p.bar = true
	case "auto":
		p.bar = isTerminal(w)
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// period is how often tick runs.
func (p *progress) period() time.Duration {
	if p.bar {
		return 200 * time.Millisecond
	}
	return max(p.interval, 10*time.Millisecond)
}

func (p *progress) update(done, failed int) {
	p.done, p.failed = done, failed
}

func (p *progress) tick() {
	if p.off {
		return
	}
	elapsed := time.Since(p.start)
	fresh := p.done - p.reused
	rate := float64(max(fresh, 0)) / elapsed.Seconds()
	eta := formatETA(float64(p.total-p.done), rate)
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	if p.bar {
		const width = 30
		n := int(float64(width) * pct / 100)
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d %5.1f%% %.1f/s ETA %s failed %d ",
			strings.Repeat("#", n), strings.Repeat(".", width-n), p.done, p.total, pct, rate, eta, p.failed)
		p.drawn = true
		return
	}
	fmt.Fprintf(p.w, "map: %d/%d done (%.1f%%), %.1f jobs/s, ETA %s, %d failed\n", p.done, p.total, pct, rate, eta, p.failed)
}

// finish draws the last state and ends the bar's line.
func (p *progress) finish() {
	if p.off || !p.bar {
		return
	}
	p.tick()
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// formatETA is the time left for remaining jobs at rate jobs/s, or "?" when it is unknown:
// no rate yet, NaN or infinite, or beyond what a duration holds (never a negative or -1ns
// duration from an overflowed conversion).
func formatETA(remaining, rate float64) string {
	secs := remaining / rate
	if !(rate > 0) || math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 || secs > 1e9 {
		return "?"
	}
	return (time.Duration(secs * float64(time.Second))).Round(time.Second).String()
}

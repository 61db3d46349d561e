package server

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// The dashboard's per-queue figures and payload search (issue 29 items 17, 19, 21): two
// /ui/api routes that read the plane through bounded listings only, never a scan of a whole
// queue. Every answer says how much it read (sampled, scanned) and whether it stopped at
// its bound (capped), so a page can say "of the newest N".

const (
	// uiStatsWindow is the window of the run-time, wait-time and throughput figures.
	uiStatsWindow = time.Hour
	// uiStatsSample bounds the invocations read per terminal state (the newest first).
	uiStatsSample = 500
	// uiQueuedSample bounds the queued invocations read (the oldest first) to split them
	// into ready, delayed and retrying.
	uiQueuedSample = 1000
	// uiWaitingShown bounds the delayed and retrying invocations listed with their due times.
	uiWaitingShown = 50
	// uiSearchScan bounds the invocations one payload search reads (the newest first, from
	// the cursor); uiSearchMatches bounds what it returns.
	uiSearchScan    = 200
	uiSearchMatches = 50
)

// uiPercentiles are the 50th and 95th percentiles of a set of durations, in seconds, over
// Count values (0: no value, percentiles absent).
type uiPercentiles struct {
	Count int      `json:"count"`
	P50   *float64 `json:"p50,omitempty"`
	P95   *float64 `json:"p95,omitempty"`
}

func percentiles(seconds []float64) uiPercentiles {
	out := uiPercentiles{Count: len(seconds)}
	if len(seconds) == 0 {
		return out
	}
	slices.Sort(seconds)
	at := func(p float64) *float64 { // nearest rank
		v := seconds[max(int(math.Ceil(p*float64(len(seconds))))-1, 0)]
		return &v
	}
	out.P50, out.P95 = at(0.50), at(0.95)
	return out
}

// uiWaiting is a queued invocation that is not claimable yet: delayed (its first attempt
// has a due time) or retrying (in backoff after a failed attempt).
type uiWaiting struct {
	ID      string         `json:"id"`
	Key     string         `json:"key,omitempty"`
	Kind    string         `json:"kind"` // "delayed" or "retrying"
	Attempt int            `json:"attempt"`
	DueAt   time.Time      `json:"due_at"`
	Error   *api.ErrorInfo `json:"error,omitempty"`
}

// uiQueueFigures answers GET /ui/api/queue?namespace=&queue=.
type uiQueueFigures struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Paused    bool   `json:"paused"`
	// WindowSeconds is the window of RunTime, WaitTime and Throughput (the last hour).
	WindowSeconds float64 `json:"window_seconds"`
	// RunTime is finished − started of the window's finished attempts (succeeded, failed,
	// timeout, killed); WaitTime is started − claimable (created, or due after a delay or
	// backoff) of the same invocations' latest attempt.
	RunTime  uiPercentiles `json:"run_time"`
	WaitTime uiPercentiles `json:"wait_time"`
	// Throughput counts the invocations that finished in the window, by terminal state.
	Throughput map[string]int `json:"throughput"`
	// Sampled is how many terminal invocations were read (at most SampleLimit per state,
	// the newest first); Capped is true when a state's read stopped at SampleLimit, so the
	// figures are of the newest SampleLimit and Throughput is a lower bound.
	Sampled     int  `json:"sampled"`
	SampleLimit int  `json:"sample_limit"`
	Capped      bool `json:"capped"`
	// Ready, Delayed and Retrying split the queued invocations read (Queued of them, at
	// most QueuedLimit, the oldest first; QueuedCapped when there were more): claimable now,
	// waiting for their first due time, waiting out a retry backoff.
	Ready        int  `json:"ready"`
	Delayed      int  `json:"delayed"`
	Retrying     int  `json:"retrying"`
	Queued       int  `json:"queued"`
	QueuedLimit  int  `json:"queued_limit"`
	QueuedCapped bool `json:"queued_capped"`
	// Waiting are the delayed and retrying invocations, soonest due first (at most 50).
	Waiting []uiWaiting `json:"waiting"`
	// Now is the server's clock when the figures were taken.
	Now time.Time `json:"now"`
}

// uiQueueOf reads and checks the namespace and queue query parameters and that the token
// may list the queue's invocations.
func uiQueueOf(r *http.Request, p *principal) (string, string, error) {
	q := r.URL.Query()
	ns, queue := q.Get("namespace"), q.Get("queue")
	if err := plane.ValidateNamespace(ns); err != nil {
		return "", "", err
	}
	if err := plane.ValidateName("queue name", queue); err != nil {
		return "", "", err
	}
	if err := authorizeQueue(p, ns, queue, plane.PermissionRead, plane.PermissionSubmit); err != nil {
		return "", "", err
	}
	return ns, queue, nil
}

func (s *Server) handleUIQueue(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := uiQueueOf(r, p)
	if err != nil {
		return err
	}
	ctx := r.Context()
	now := time.Now()
	out := &uiQueueFigures{Namespace: ns, Queue: q, WindowSeconds: uiStatsWindow.Seconds(), Throughput: map[string]int{},
		SampleLimit: uiStatsSample, QueuedLimit: uiQueuedSample, Waiting: []uiWaiting{}, Now: now}
	stats, err := s.drv.QueueStatsList(ctx, ns)
	if err != nil {
		return err
	}
	for _, st := range stats {
		if st.Queue == q {
			out.Paused = st.Paused
		}
	}
	var runs, waits []float64
	since := now.Add(-uiStatsWindow)
	for _, state := range []plane.State{plane.StateSucceeded, plane.StateFailed, plane.StateTimeout, plane.StateKilled, plane.StateCancelled} {
		out.Throughput[string(state)] = 0
		page, err := s.drv.InvocationList(ctx, &plane.ListParams{Namespace: ns, Queue: q, State: state, Limit: uiStatsSample})
		if err != nil {
			return err
		}
		out.Sampled += len(page.Invocations)
		out.Capped = out.Capped || page.Next != ""
		for _, inv := range page.Invocations {
			if inv.FinishedAt.Before(since) {
				continue
			}
			out.Throughput[string(state)]++
			if inv.StartedAt.IsZero() || state == plane.StateCancelled {
				continue // never ran
			}
			runs = append(runs, inv.FinishedAt.Sub(inv.StartedAt).Seconds())
			claimable := inv.CreatedAt
			if inv.AvailableAt.After(claimable) && !inv.AvailableAt.After(inv.StartedAt) {
				claimable = inv.AvailableAt
			}
			waits = append(waits, max(inv.StartedAt.Sub(claimable).Seconds(), 0))
		}
	}
	out.RunTime, out.WaitTime = percentiles(runs), percentiles(waits)

	page, err := s.drv.InvocationList(ctx, &plane.ListParams{Namespace: ns, Queue: q, State: plane.StateQueued, Limit: uiQueuedSample, Oldest: true})
	if err != nil {
		return err
	}
	out.Queued, out.QueuedCapped = len(page.Invocations), page.Next != ""
	for _, inv := range page.Invocations {
		if !inv.AvailableAt.After(now) {
			out.Ready++
			continue
		}
		kind := "delayed"
		if inv.Attempt > 0 {
			kind = "retrying"
			out.Retrying++
		} else {
			out.Delayed++
		}
		out.Waiting = append(out.Waiting, uiWaiting{ID: inv.ID, Key: inv.Key, Kind: kind, Attempt: inv.Attempt,
			DueAt: inv.AvailableAt, Error: api.NewErrorInfo(inv.Error)})
	}
	slices.SortFunc(out.Waiting, func(a, b uiWaiting) int { return a.DueAt.Compare(b.DueAt) })
	out.Waiting = out.Waiting[:min(len(out.Waiting), uiWaitingShown)]
	return writeUIJSON(w, out)
}

// uiSearch answers GET /ui/api/search: the invocations among the ones scanned whose payload
// has Path (equal to Value when one was given).
type uiSearch struct {
	Invocations []api.Invocation `json:"invocations"`
	// Scanned is how many invocations were read (at most ScanLimit); Next is the cursor to
	// scan further ("" when the queue, or the state, has no more).
	Scanned   int    `json:"scanned"`
	ScanLimit int    `json:"scan_limit"`
	Next      string `json:"next"`
}

// parsePath splits a payload path: dot-separated object keys and array indexes, an optional
// leading "$." (prompt, $.input.tokens.0).
func parsePath(path string) ([]string, error) {
	rule := "use dot-separated keys and array indexes, e.g. input.prompt or items.0.id (at most 512 bytes of UTF-8)"
	if path == "" || len(path) > 512 || !utf8.ValidString(path) {
		return nil, plane.Invalid("path", strings.ToValidUTF8(path, "\uFFFD"), rule)
	}
	path = strings.TrimPrefix(strings.TrimPrefix(path, "$"), ".")
	parts := strings.Split(path, ".")
	for _, p := range parts {
		if p == "" {
			return nil, plane.Invalid("path", path, rule)
		}
	}
	return parts, nil
}

// lookup follows path in a JSON value decoded with UseNumber.
func lookup(v any, path []string) (any, bool) {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// matches reports whether found equals want: want is JSON (42, true, "x", {"a":1}) or,
// when it is not JSON, a string.
func matches(found any, want string) bool {
	if s, ok := found.(string); ok && s == want {
		return true
	}
	dec := json.NewDecoder(strings.NewReader(want))
	dec.UseNumber()
	var w any
	if err := dec.Decode(&w); err != nil || dec.More() {
		return false
	}
	a, _ := json.Marshal(found)
	b, _ := json.Marshal(w)
	return bytes.Equal(a, b)
}

func (s *Server) handleUISearch(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := uiQueueOf(r, p)
	if err != nil {
		return err
	}
	query := r.URL.Query()
	path, err := parsePath(query.Get("path"))
	if err != nil {
		return err
	}
	want, hasWant := query.Get("value"), query.Has("value") && query.Get("value") != ""
	var state plane.State
	if name := query.Get("state"); name != "" {
		if state, err = plane.ParseState(name); err != nil {
			return err
		}
	}
	ctx := r.Context()
	page, err := s.drv.InvocationList(ctx, &plane.ListParams{Namespace: ns, Queue: q, State: state,
		KeyPrefix: query.Get("key_prefix"), After: query.Get("after"), Limit: uiSearchScan})
	if err != nil {
		return err
	}
	out := &uiSearch{Invocations: []api.Invocation{}, Scanned: len(page.Invocations), ScanLimit: uiSearchScan, Next: page.Next}
	for i, listed := range page.Invocations {
		inv, err := s.drv.InvocationGet(ctx, listed.ID)
		if err != nil {
			continue // trimmed since the listing
		}
		dec := json.NewDecoder(bytes.NewReader(api.WireToJSON(nil, inv.Payload)))
		dec.UseNumber()
		var payload any
		if dec.Decode(&payload) != nil {
			continue
		}
		found, ok := lookup(payload, path)
		if !ok || (hasWant && !matches(found, want)) {
			continue
		}
		row := *api.NewInvocation(listed)
		row.Payload, row.Result = api.Value{}, api.Value{}
		out.Invocations = append(out.Invocations, row)
		if len(out.Invocations) == uiSearchMatches {
			out.Scanned = i + 1
			out.Next = listed.ID // the listing's cursor is the last id examined
			break
		}
	}
	return writeUIJSON(w, out)
}

package plane

import (
	"testing"
	"time"
)

func TestScheduleFires(t *testing.T) {
	rule, err := (&Schedule{Every: time.Minute}).Rule()
	if err != nil {
		t.Fatal(err)
	}
	at := func(m int, s int) time.Time { return time.Date(2030, 1, 1, 0, m, s, 0, time.UTC) }
	for _, c := range []struct {
		name      string
		policy    CatchUp
		next, now time.Time
		ticks     []time.Time
		after     time.Time
	}{
		{"not due", CatchUpOnce, at(5, 0), at(4, 59), nil, at(5, 0)},
		{"on time", CatchUpOnce, at(5, 0), at(5, 0), []time.Time{at(5, 0)}, at(6, 0)},
		{"once: the latest", CatchUpOnce, at(5, 0), at(9, 30), []time.Time{at(9, 0)}, at(10, 0)},
		{"skip: fresh", CatchUpSkip, at(5, 0), at(5, 59), []time.Time{at(5, 0)}, at(6, 0)},
		{"all: each", CatchUpAll, at(5, 0), at(7, 0), []time.Time{at(5, 0), at(6, 0), at(7, 0)}, at(8, 0)},
	} {
		ticks, after := ScheduleFires(rule, c.policy, c.next, c.now)
		if len(ticks) != len(c.ticks) || !after.Equal(c.after) {
			t.Errorf("%s: got %v then %v, want %v then %v", c.name, ticks, after, c.ticks, c.after)
			continue
		}
		for i := range ticks {
			if !ticks[i].Equal(c.ticks[i]) {
				t.Errorf("%s: tick %d is %v, want %v", c.name, i, ticks[i], c.ticks[i])
			}
		}
	}
	// skip after downtime: an hourly tick two minutes old is dropped
	hourly, err := (&Schedule{Every: time.Hour}).Rule()
	if err != nil {
		t.Fatal(err)
	}
	if ticks, after := ScheduleFires(hourly, CatchUpSkip, at(0, 0), at(2, 0)); len(ticks) != 0 || !after.Equal(at(60, 0)) {
		t.Errorf("skip after downtime: %v then %v", ticks, after)
	}
	// all is bounded per pass and resumes where it stopped
	ticks, after := ScheduleFires(rule, CatchUpAll, at(0, 0), at(0, 0).Add(1000*time.Minute))
	if len(ticks) != ScheduleFiresMax || !after.Equal(at(0, 0).Add(ScheduleFiresMax*time.Minute)) {
		t.Errorf("all after long downtime: %d ticks then %v", len(ticks), after)
	}
	// cron in a zone across the daylight-saving change: 03:00 in Paris is 01:00 UTC in
	// summer, 02:00 UTC in winter
	paris, err := (&Schedule{Cron: "0 3 * * *", TimeZone: "Europe/Paris"}).Rule()
	if err != nil {
		t.Fatal(err)
	}
	if got := paris.Next(time.Date(2030, 10, 26, 12, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2030, 10, 27, 2, 0, 0, 0, time.UTC)) {
		t.Errorf("first winter night: %v", got)
	}
	if got := paris.Next(time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2030, 6, 2, 1, 0, 0, 0, time.UTC)) {
		t.Errorf("summer night: %v", got)
	}
}

func TestDedupCutoff(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	if !DedupCutoff(now, 0).IsZero() {
		t.Error("no window: no cutoff")
	}
	if got := DedupCutoff(now, 30*time.Second); !got.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("cutoff %v", got)
	}
	if validateUniqueFor(time.Second, "") == nil || validateUniqueFor(-time.Second, "k") == nil || validateUniqueFor(time.Second, "k") != nil {
		t.Error("unique_for: a window needs a key and is not negative")
	}
}

// TestCronDaylightSaving: a wall-clock cron job (fixed minute and hour) in a zone ticks
// once per local day across both daylight-saving changes, by Vixie cron's rule: in the
// repeated hour at its first occurrence, inside the skipped hour at the change; a job with
// a wildcard or step in minute or hour ticks by the real clock. Real tz database.
func TestCronDaylightSaving(t *testing.T) {
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name, cron, zone, from string
		want                   []string
	}{
		{"New York autumn: 01:30 once, in EDT", "30 1 * * *", "America/New_York", "2027-11-06T12:00:00Z",
			[]string{"2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z", "2027-11-09T06:30:00Z"}},
		{"New York spring: 02:30 at the change (03:00 EDT)", "30 2 * * *", "America/New_York", "2027-03-13T12:00:00Z",
			[]string{"2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z"}},
		{"New York spring: two times in the gap tick once", "0,30 2 * * *", "America/New_York", "2027-03-14T05:00:00Z",
			[]string{"2027-03-14T07:00:00Z", "2027-03-15T06:00:00Z", "2027-03-15T06:30:00Z"}},
		{"Paris autumn: 02:30 once, in CEST", "30 2 * * *", "Europe/Paris", "2027-10-30T12:00:00Z",
			[]string{"2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"}},
		{"Paris spring: 02:30 at the change (03:00 CEST)", "30 2 * * *", "Europe/Paris", "2027-03-27T12:00:00Z",
			[]string{"2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"}},
		{"Paris: a time outside the changed hour is unaffected", "0 3 * * *", "Europe/Paris", "2027-10-30T12:00:00Z",
			[]string{"2027-10-31T02:00:00Z", "2027-11-01T02:00:00Z"}},
		{"Sao Paulo 2018: midnight skipped, @daily at the change", "@daily", "America/Sao_Paulo", "2018-11-03T12:00:00Z",
			[]string{"2018-11-04T03:00:00Z", "2018-11-05T02:00:00Z"}},
		{"a weekday job across the change", "30 1 * * 0", "America/New_York", "2027-11-01T00:00:00Z",
			[]string{"2027-11-07T05:30:00Z", "2027-11-14T06:30:00Z"}},
		{"wildcard: every half hour by the real clock, both 02:xx of Paris autumn", "*/30 * * * *", "Europe/Paris", "2027-10-31T00:00:00Z",
			[]string{"2027-10-31T00:30:00Z", "2027-10-31T01:00:00Z", "2027-10-31T01:30:00Z", "2027-10-31T02:00:00Z"}},
		{"wildcard hour: hourly skips the hour that does not exist", "0 * * * *", "America/New_York", "2027-03-14T05:30:00Z",
			[]string{"2027-03-14T06:00:00Z", "2027-03-14T07:00:00Z", "2027-03-14T08:00:00Z"}},
		{"wildcard hour: hourly runs both 01:00 of New York autumn", "@hourly", "America/New_York", "2027-11-07T04:30:00Z",
			[]string{"2027-11-07T05:00:00Z", "2027-11-07T06:00:00Z", "2027-11-07T07:00:00Z"}},
	} {
		rule, err := (&Schedule{Cron: c.cron, TimeZone: c.zone}).Rule()
		if err != nil {
			t.Fatal(err)
		}
		at := utc(c.from)
		for i, w := range c.want {
			at = rule.Next(at)
			if !at.Equal(utc(w)) {
				t.Errorf("%s: tick %d is %v, want %s", c.name, i, at, w)
				break
			}
		}
	}

	// Catch-up across an autumn change: each local day fires once, every key distinct.
	rule, err := (&Schedule{Cron: "30 1 * * *", TimeZone: "America/New_York"}).Rule()
	if err != nil {
		t.Fatal(err)
	}
	ticks, after := ScheduleFires(rule, CatchUpAll, utc("2027-11-06T05:30:00Z"), utc("2027-11-08T12:00:00Z"))
	keys := map[string]bool{}
	for _, tick := range ticks {
		keys[ScheduleKey("n", tick)] = true
	}
	if len(ticks) != 3 || len(keys) != 3 || !ticks[1].Equal(utc("2027-11-07T05:30:00Z")) || !after.Equal(utc("2027-11-09T06:30:00Z")) {
		t.Errorf("catch-up all across the change: %v then %v", ticks, after)
	}
	// A next stored by the earlier rule at the second 01:30 is no tick: it moves on.
	if ticks, after := ScheduleFires(rule, CatchUpOnce, utc("2027-11-07T06:30:00Z"), utc("2027-11-07T06:30:00Z")); len(ticks) != 0 || !after.Equal(utc("2027-11-08T06:30:00Z")) {
		t.Errorf("stale next: %v then %v", ticks, after)
	}

	for expr, want := range map[string]bool{"30 2 * * *": true, "0,30 9-17 * * 1-5": true, "@daily": true, "@weekly": true,
		"* 2 * * *": false, "30 * * * *": false, "*/5 2 * * *": false, "0 0-23/2 * * *": false, "@hourly": false, "? 2 * * *": false} {
		if fixedTime(expr) != want {
			t.Errorf("fixedTime(%q) = %v, want %v", expr, !want, want)
		}
	}
}

// TestDedupFrees: a window frees only a holder submitted with a window (marked), once its
// creation is at or before the cutoff; an ordinary holder keeps its key.
func TestDedupFrees(t *testing.T) {
	cutoff := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	old, young := cutoff.Add(-time.Second), cutoff.Add(time.Second)
	unique := DebounceMetadata(&SubmitParams{Key: "k", UniqueFor: 30 * time.Second})
	debounced := DebounceMetadata(&SubmitParams{Key: "k", Debounce: 2 * time.Second})
	if unique[MetaUniqueFor] != "30" || debounced[MetaDebounce] != "2" {
		t.Fatalf("marks: %v %v", unique, debounced)
	}
	for _, c := range []struct {
		name    string
		meta    map[string]string
		created time.Time
		cutoff  time.Time
		want    bool
	}{
		{"ordinary, old", map[string]string{"m": "1"}, old, cutoff, false},
		{"ordinary, no metadata", nil, old, cutoff, false},
		{"unique_for, old", unique, old, cutoff, true},
		{"unique_for, at the cutoff", unique, cutoff, cutoff, true},
		{"unique_for, young", unique, young, cutoff, false},
		{"debounced, old", debounced, old, cutoff, true},
		{"no window on the submit", unique, old, time.Time{}, false},
	} {
		if got := DedupFrees(c.meta, c.created, c.cutoff); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

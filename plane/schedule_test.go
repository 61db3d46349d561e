package plane

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"
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

// TestWallClockJobTickCost: a year of missed ticks of a wall-clock job of many times a day
// is caught up without computing each missed tick, nor each time of a day in turn.
// "0-59 0-23 * * *" ticks every minute as "* * * * *" does, but each tick cost 0.6 ms
// (1,440 times of the day before, then the day's), and CatchUpOnce walked every missed
// tick: a maintenance pass catching up one day of them spent a second on that one
// schedule, in the plane's write transaction, and a namespace may hold 10,000. Fails before
// (36 s for 30 days; with the day's times bisected but the ticks still walked, 4 s for the
// year), passes now in milliseconds; the bound is far from both.
func TestWallClockJobTickCost(t *testing.T) {
	for _, zone := range []string{"", "America/New_York"} {
		rule, err := (&Schedule{Cron: "0-59 0-23 * * *", TimeZone: zone}).Rule()
		if err != nil {
			t.Fatal(err)
		}
		now := time.Date(2027, 3, 20, 12, 0, 30, 0, time.UTC) // a year back crosses New York's changes
		started := time.Now()
		ticks, after := ScheduleFires(rule, CatchUpOnce, now.Add(-366*24*time.Hour).Truncate(time.Minute), now)
		if took := time.Since(started); took > time.Second {
			t.Errorf("%q: catching up a year of a tick a minute took %v", zone, took)
		}
		if len(ticks) != 1 || !ticks[0].Equal(now.Truncate(time.Minute)) || !after.Equal(now.Truncate(time.Minute).Add(time.Minute)) {
			t.Errorf("%q: catch-up fired %v then %v", zone, ticks, after)
		}
	}
}

// TestWallClockJobTicksAsEachTimeInTurn: the next tick of a wall-clock job is the one a walk
// through each of its times in turn finds (the rule as it was first written), for jobs of
// one time and of many, in zones with daylight saving (of an hour, of half an hour, and
// around the southern summer), from instants around their changes.
func TestWallClockJobTicksAsEachTimeInTurn(t *testing.T) {
	exprs := []string{"30 2 * * *", "0,30 1-3 * * *", "0-59 0-23 * * *", "15,45 */1 * * 1-5" /* not fixed: checked by the other path */, "0 0 29 2 *",
		"59 1 * * 0", "0-59 2 * * *", "30 0-23 1 * *", "@daily", "@monthly", "0,1,59 0,1,2,3,23 * * *"}
	zones := []string{"UTC", "America/New_York", "Europe/Paris", "Australia/Lord_Howe", "America/Sao_Paulo", "Pacific/Chatham", "America/Santiago", "Asia/Kolkata"}
	for _, expr := range exprs {
		if !fixedTime(expr) {
			continue
		}
		parsed, err := cron.ParseStandard(expr)
		if err != nil {
			t.Fatal(err)
		}
		spec := parsed.(*cron.SpecSchedule)
		for _, name := range zones {
			zone, err := time.LoadLocation(name)
			if err != nil {
				t.Fatal(err)
			}
			// Instants around each change of 2026–2028 and some ordinary ones.
			var froms []time.Time
			for at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() < 2029; {
				_, end := at.In(zone).ZoneBounds()
				if end.IsZero() {
					break
				}
				for d := -3 * time.Hour; d <= 3*time.Hour; d += 17 * time.Minute {
					froms = append(froms, end.Add(d))
				}
				at = end
			}
			for i := range 40 {
				froms = append(froms, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*229*time.Hour+time.Duration(i*7)*time.Minute))
			}
			for _, from := range froms {
				if got, want := fixedNext(spec, dayTimes(spec), zone, from), fixedNextEachTime(spec, zone, from); !got.Equal(want) {
					t.Fatalf("%q in %s from %v: next %v, each time in turn %v", expr, name, from, got, want)
				}
			}
		}
	}
}

// TestCatchUpLatestTick: the latest missed tick that CatchUpOnce and CatchUpSkip fire, and
// the next tick after it, are the ones a walk through each missed tick finds (as
// ScheduleFires did first), for jobs by the real clock and wall-clock jobs, in zones with
// daylight saving, after downtimes from a minute to 45 days.
func TestCatchUpLatestTick(t *testing.T) {
	for _, c := range []struct{ cron, zone string }{{"* * * * *", ""}, {"*/7 * * * *", "Europe/Paris"}, {"0 * * * *", "America/New_York"},
		{"30 2 * * *", "America/New_York"}, {"0,30 1-3 * * *", "Australia/Lord_Howe"}, {"0 0 29 2 *", ""}, {"15 10 * * 1-5", "Asia/Kolkata"},
		{"0-59 0-23 * * 1", "Europe/Paris"}, {"@monthly", "Pacific/Chatham"}} {
		rule, err := (&Schedule{Cron: c.cron, TimeZone: c.zone}).Rule()
		if err != nil {
			t.Fatal(err)
		}
		for i, downtime := range []time.Duration{time.Minute, 90 * time.Minute, 25 * time.Hour, 9 * 24 * time.Hour, 45 * 24 * time.Hour} {
			from := time.Date(2027, 1, 3, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 1009 * time.Hour)
			next := rule.Next(from)
			now := next.Add(downtime).Add(time.Duration(i) * 13 * time.Second)
			want := next // each missed tick in turn
			for t := rule.Next(want); !t.IsZero() && !t.After(now); t = rule.Next(want) {
				want = t
			}
			ticks, after := ScheduleFires(rule, CatchUpOnce, next, now)
			if len(ticks) != 1 || !ticks[0].Equal(want) || !after.Equal(rule.Next(want)) {
				t.Errorf("%q in %q, %v missed from %v: fired %v then %v, want %v then %v", c.cron, c.zone, downtime, next, ticks, after, want, rule.Next(want))
			}
		}
	}
}

// fixedNextEachTime is fixedNext as first written: each time of each day in turn, the first
// whose tick is after t.
func fixedNextEachTime(spec *cron.SpecSchedule, zone *time.Location, t time.Time) time.Time {
	local := t.In(zone)
	day := time.Date(local.Year(), local.Month(), local.Day()-1, 12, 0, 0, 0, time.UTC)
	for end := day.AddDate(5, 0, 1); day.Before(end); day = day.AddDate(0, 0, 1) {
		if 1<<uint(day.Month())&spec.Month == 0 || !specDayMatches(spec, day) {
			continue
		}
		for h := 0; h < 24; h++ {
			if 1<<uint(h)&spec.Hour == 0 {
				continue
			}
			for m := 0; m < 60; m++ {
				if 1<<uint(m)&spec.Minute == 0 {
					continue
				}
				wall := time.Date(day.Year(), day.Month(), day.Day(), h, m, 0, 0, time.UTC)
				if tick := wallTick(wall, zone); tick.After(t) {
					return tick
				}
			}
		}
	}
	return time.Time{}
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

// TestCronErrorNamesTheField: a cron expression the parser refuses is answered with the
// field it refused and the values that field takes, never the parser's Go internals. A new
// user's trial: "0 3 L * *" answered `failed to parse int from L: strconv.Atoi: parsing "L":
// invalid syntax`, and "0 3 * * 7" (Sunday as crontab(5) also writes it) `end of range (7)
// above maximum (6)`, naming no field.
func TestCronErrorNamesTheField(t *testing.T) {
	for expr, want := range map[string]string{
		"0 3 L * *":    `the day-of-month field "L" is not valid: use 1–31, *,`,
		"0 3 * * 7":    `the day-of-week field "7" is not valid: use 0–6 (Sunday is 0) or SUN–SAT, *,`,
		"0 3 * * 1-7":  `the day-of-week field "1-7" is not valid: use 0–6 (Sunday is 0)`,
		"0 25 * * *":   `the hour field "25" is not valid: use 0–23`,
		"x 3 * * *":    `the minute field "x" is not valid: use 0–59`,
		"0 3 * FOO *":  `the month field "FOO" is not valid: use 1–12 or JAN–DEC`,
		"*/0 * * * *":  `the minute field "*/0" is not valid`,
		"0 3 * *":      "expected exactly 5 fields, found 4",
		"@fortnightly": "unrecognized descriptor: @fortnightly",
	} {
		_, err := (&Schedule{Cron: expr}).Rule()
		var invalid *InvalidError
		require.ErrorAs(t, err, &invalid, expr)
		require.Equal(t, "cron", invalid.Field, expr)
		require.True(t, strings.HasPrefix(invalid.Rule, CronRule+": "), "%s: %s", expr, invalid.Rule)
		require.Contains(t, invalid.Rule, want, expr)
		require.NotContains(t, invalid.Rule, "strconv", expr)
	}
}

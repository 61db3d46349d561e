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

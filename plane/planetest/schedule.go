package planetest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// testSchedules checks durable schedules (ScheduleSet, ScheduleList, SchedulePause,
// ScheduleDelete, and the fires of maintenance): each tick fires once, keyed by
// plane.ScheduleKey, at the plane's clock; missed ticks follow the catch-up policy; a paused
// schedule fires nothing and resumes at its next tick.
func testSchedules(t *testing.T, s *suite) {
	// fires lists the invocations schedule name submitted to the bundle's queue, oldest first.
	fires := func(t *testing.T, b *bundle, name string) []*plane.Invocation {
		t.Helper()
		page, err := b.drv.InvocationList(b.ctx, &plane.ListParams{Namespace: b.ns, Queue: b.q,
			KeyPrefix: plane.ScheduleKeyPrefix + name + "/", Oldest: true, Limit: plane.ListLimitMax})
		must(t, err, "list fires")
		return page.Invocations
	}
	maintain := func(t *testing.T, b *bundle) {
		t.Helper()
		must(t, b.drv.Maintain(b.ctx), "maintain")
	}
	set := func(t *testing.T, b *bundle, sc plane.Schedule) *plane.Schedule {
		t.Helper()
		sc.Namespace, sc.Queue = b.ns, b.q
		got, err := b.drv.ScheduleSet(b.ctx, &sc)
		must(t, err, "set schedule")
		return got
	}
	get := func(t *testing.T, b *bundle, name string) plane.Schedule {
		t.Helper()
		list, err := plane.ListSchedules(b.ctx, b.drv, b.ns)
		must(t, err, "list schedules")
		for _, sc := range list {
			if sc.Name == name {
				return sc
			}
		}
		t.Fatalf("schedule %q not listed", name)
		return plane.Schedule{}
	}

	t.Run("IntervalFiresOncePerTick", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		start := b.now()
		sc := set(t, b, plane.Schedule{Name: "every-minute", Every: time.Minute, Payload: []byte("tick"),
			Priority: 2, Metadata: map[string]string{"team": "eval"}})
		require.Equal(t, "every-minute", sc.Name)
		requireTime(t, start.Add(time.Minute), sc.NextFire, "next fire: the first whole minute after now")
		require.True(t, sc.LastFire.IsZero(), "never fired")
		maintain(t, b)
		require.Empty(t, fires(t, b, "every-minute"), "nothing before the first tick")

		tick := b.advance(time.Minute)
		maintain(t, b)
		maintain(t, b) // a second pass at the same time fires nothing more
		got := fires(t, b, "every-minute")
		require.Len(t, got, 1, "one fire per tick")
		inv := b.get(t, got[0].ID)
		require.Equal(t, plane.ScheduleKey("every-minute", tick), inv.Key)
		require.Equal(t, []byte("tick"), inv.Payload)
		require.Equal(t, 2.0, inv.Priority)
		require.Equal(t, "eval", inv.Metadata["team"])
		require.Equal(t, "every-minute", inv.Metadata["schedule"])
		listed := get(t, b, "every-minute")
		requireTime(t, tick, listed.LastFire, "last fire")
		require.Equal(t, inv.ID, listed.LastID)
		requireTime(t, tick.Add(time.Minute), listed.NextFire, "next fire")
		require.Equal(t, inv.ID, b.claimOne(t).ID, "a fire is an ordinary, claimable invocation")

		b.advance(time.Minute)
		maintain(t, b)
		require.Len(t, fires(t, b, "every-minute"), 2, "the next tick fires again")
	})

	t.Run("TickSubmittedBeforeResolvesToIt", func(t *testing.T) {
		// A former leader submitted the tick and died before moving the schedule on: the
		// fire finds the key and enqueues nothing new.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		set(t, b, plane.Schedule{Name: "handover", Every: time.Minute})
		b.advance(time.Minute)
		// The former leader's fire of the tick (a client cannot submit under the schedule
		// prefix: TickKeysReserved): fired, then the schedule is set again before the tick,
		// so the next pass fires the same tick a second time.
		maintain(t, b)
		earlier := fires(t, b, "handover")[0].ID
		b.advance(-time.Second)
		set(t, b, plane.Schedule{Name: "handover", Every: time.Minute})
		b.advance(time.Second)
		maintain(t, b)
		got := fires(t, b, "handover")
		require.Len(t, got, 1, "no second invocation for a tick already submitted")
		require.Equal(t, earlier, got[0].ID)
		require.Equal(t, earlier, get(t, b, "handover").LastID)
	})

	t.Run("TickKeysReserved", func(t *testing.T) {
		// Keys under plane.ScheduleKeyPrefix are the fires': a client's submit with one —
		// a future tick's key taken to suppress or replace the fire — is refused with the
		// rule, alone or in a batch, and the tick fires the schedule's payload.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		set(t, b, plane.Schedule{Name: "legit", Every: time.Minute, Payload: []byte("GOOD")})
		tick := b.now().Add(time.Minute)
		for _, key := range []string{plane.ScheduleKey("legit", tick), plane.ScheduleKeyPrefix + "legit/any", plane.ScheduleKeyPrefix} {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
				Invocations: []plane.SubmitParams{{Key: key, Payload: []byte("EVIL")}}})
			requireInvalid(t, err, "key", "reserved for the fires of schedules")
			var ie *plane.InvalidError
			if errors.As(err, &ie) {
				require.Equal(t, plane.ScheduleKeyRule, ie.Rule, "the rule, stable")
			}
			_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
				Invocations: []plane.SubmitParams{{Key: "fine"}, {Key: key, Payload: []byte("EVIL"), UniqueFor: time.Second}}})
			requireInvalid(t, err, "reserved for the fires of schedules")
		}
		b.requireNothingStored(t)
		b.submitOne(t, plane.SubmitParams{Key: "schedules/legit"}) // only the prefix itself is reserved
		b.advance(time.Minute)
		maintain(t, b)
		got := fires(t, b, "legit")
		require.Len(t, got, 1, "the tick fired")
		require.Equal(t, plane.ScheduleKey("legit", tick), got[0].Key)
		require.Equal(t, []byte("GOOD"), b.get(t, got[0].ID).Payload)
	})

	t.Run("QueueFullSkipsTick", func(t *testing.T) {
		// A fire is subject to the queue's depth limit (a fresh attacker's trial grew a
		// reject-at-2 queue past its limit with a schedule): a tick that finds the queue
		// full is skipped, counted with its reason, never waits (even under on_full block)
		// and the schedule moves to its next tick; the ticks that fit fire.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		_, err := b.drv.QueueAdmissionSet(b.ctx, &plane.AdmissionParams{Namespace: b.ns, Queue: b.q,
			Admission: plane.Admission{MaxDepth: 2, OnFull: plane.OnFullBlock}})
		must(t, err, "set admission")
		b.submitOne(t, plane.SubmitParams{})
		b.submitOne(t, plane.SubmitParams{})
		set(t, b, plane.Schedule{Name: "full", Every: time.Minute})
		tick := b.advance(time.Minute)
		maintain(t, b)
		require.Empty(t, fires(t, b, "full"), "a full queue takes no fire")
		listed := get(t, b, "full")
		require.EqualValues(t, 1, listed.Skipped)
		requireTime(t, tick, listed.LastSkip, "last skip: the tick")
		require.Contains(t, listed.LastSkipReason, "max depth 2")
		require.True(t, listed.LastFire.IsZero(), "nothing fired")
		requireTime(t, tick.Add(time.Minute), listed.NextFire, "the next tick is stored as usual")
		require.EqualValues(t, 2, b.count(t, plane.StateQueued), "the queue stays at its limit")

		b.ack(t, b.claimOne(t), "") // room for one (settled: no lease to expire)
		tick = b.advance(time.Minute)
		maintain(t, b)
		got := fires(t, b, "full")
		require.Len(t, got, 1, "the tick that fits fires")
		listed = get(t, b, "full")
		requireTime(t, tick, listed.LastFire, "last fire")
		require.EqualValues(t, 1, listed.Skipped, "the count stays")
		// Setting the schedule again starts its skip record again.
		set(t, b, plane.Schedule{Name: "full", Every: time.Minute})
		require.Zero(t, get(t, b, "full").Skipped)
		require.True(t, get(t, b, "full").LastSkip.IsZero())
		_, err = b.drv.ScheduleDelete(b.ctx, b.ns, "full")
		must(t, err, "delete")

		// Catching up all missed ticks fires those that fit, oldest first, and skips the rest.
		set(t, b, plane.Schedule{Name: "all", Every: time.Minute, CatchUp: plane.CatchUpAll})
		require.Zero(t, get(t, b, "all").Skipped)
		b.ack(t, b.claimOne(t), "")
		b.ack(t, b.claimOne(t), "") // room for two
		first := b.advance(time.Minute)
		last := b.advance(2 * time.Minute)
		maintain(t, b)
		got = fires(t, b, "all")
		require.Len(t, got, 2, "two of three missed ticks fit")
		require.Equal(t, plane.ScheduleKey("all", first), got[0].Key)
		listed = get(t, b, "all")
		require.EqualValues(t, 1, listed.Skipped)
		requireTime(t, last, listed.LastSkip, "the newest tick is the one skipped")
		requireTime(t, last.Add(-time.Minute), listed.LastFire, "last fire: the last that fit")
	})

	t.Run("CatchUp", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		start := b.now()
		set(t, b, plane.Schedule{Name: "once", Every: time.Minute})
		set(t, b, plane.Schedule{Name: "skip", Every: 5 * time.Minute, CatchUp: plane.CatchUpSkip})
		set(t, b, plane.Schedule{Name: "all", Every: time.Minute, CatchUp: plane.CatchUpAll})
		b.advance(12*time.Minute + 30*time.Second) // twelve minute ticks missed, two five-minute ones
		maintain(t, b)
		once := fires(t, b, "once")
		require.Len(t, once, 1, "once: the latest missed tick only")
		require.Equal(t, plane.ScheduleKey("once", start.Add(12*time.Minute)), once[0].Key)
		require.Empty(t, fires(t, b, "skip"), "skip: the latest tick (2m30s old) is past the grace")
		all := fires(t, b, "all")
		require.Len(t, all, 12, "all: every missed tick")
		for i, inv := range all {
			require.Equal(t, plane.ScheduleKey("all", start.Add(time.Duration(i+1)*time.Minute)), inv.Key)
		}
		requireTime(t, start.Add(13*time.Minute), get(t, b, "once").NextFire, "once: next fire after now")
		requireTime(t, start.Add(13*time.Minute), get(t, b, "all").NextFire, "all: next fire after now")
		requireTime(t, start.Add(15*time.Minute), get(t, b, "skip").NextFire, "skip: next fire after now")
		b.advance(2*time.Minute + 40*time.Second) // 15:10: the 15:00 tick is 10 s old, within the grace
		maintain(t, b)
		require.Len(t, fires(t, b, "skip"), 1, "skip fires a tick still within the grace")
		require.Len(t, fires(t, b, "all"), 15, "all: the ticks since, each")
	})

	t.Run("CronInTimeZone", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		// The clock starts at 2030-06-01 12:00 UTC; 03:00 in Paris (summer time) is 01:00 UTC.
		sc := set(t, b, plane.Schedule{Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Paris"})
		want := time.Date(2030, time.June, 2, 1, 0, 0, 0, time.UTC)
		requireTime(t, want, sc.NextFire, "03:00 Paris")
		b.advance(want.Sub(b.now()))
		maintain(t, b)
		got := fires(t, b, "nightly")
		require.Len(t, got, 1)
		require.Equal(t, plane.ScheduleKey("nightly", want), got[0].Key)
		requireTime(t, want.Add(24*time.Hour), get(t, b, "nightly").NextFire, "the next night")
	})

	t.Run("PauseResume", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		set(t, b, plane.Schedule{Name: "paused", Every: time.Minute})
		sc, changed, err := b.drv.SchedulePause(b.ctx, b.ns, "paused", true)
		must(t, err, "pause")
		require.True(t, sc.Paused)
		require.True(t, changed, "the pause changed it")
		require.True(t, sc.NextFire.IsZero(), "a paused schedule has no next fire")
		sc, changed, err = b.drv.SchedulePause(b.ctx, b.ns, "paused", true)
		must(t, err, "pause again")
		require.True(t, sc.Paused)
		require.False(t, changed, "pausing a paused schedule changes nothing and says so")
		b.advance(5 * time.Minute)
		maintain(t, b)
		require.Empty(t, fires(t, b, "paused"), "paused: no fire")
		now := b.advance(30 * time.Second)
		sc, changed, err = b.drv.SchedulePause(b.ctx, b.ns, "paused", false)
		must(t, err, "resume")
		require.False(t, sc.Paused)
		require.True(t, changed, "the resume changed it")
		requireTime(t, now.Add(30*time.Second), sc.NextFire, "resumed: the next tick after now")
		sc, changed, err = b.drv.SchedulePause(b.ctx, b.ns, "paused", false)
		must(t, err, "resume again")
		require.False(t, sc.Paused)
		require.False(t, changed, "resuming a running schedule changes nothing and says so")
		requireTime(t, now.Add(30*time.Second), sc.NextFire, "a second resume keeps the next fire")
		maintain(t, b)
		require.Empty(t, fires(t, b, "paused"), "the ticks passed while paused are skipped")
		b.advance(30 * time.Second)
		maintain(t, b)
		require.Len(t, fires(t, b, "paused"), 1)
		_, _, err = b.drv.SchedulePause(b.ctx, b.ns, "missing", true)
		requireIs(t, err, plane.ErrNotFound, "pause of an unknown schedule")
	})

	t.Run("KeepState", func(t *testing.T) {
		// A declaration (KeepState: Python's @schedule at each import, e.g. a worker
		// redeploy) replaces the rule, payload and options but keeps the plane's state: an
		// operator's pause, the skip record and, with the same rule, the next fire (so
		// catch-up still sees the missed ticks). A plain set still replaces it all.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		start := b.now()
		declare := func(sc plane.Schedule) *plane.Schedule {
			t.Helper()
			sc.KeepState = true
			return set(t, b, sc)
		}
		created := declare(plane.Schedule{Name: "decl", Every: time.Minute, Paused: true, Payload: []byte("1")})
		require.True(t, created.Paused, "a declaration that creates the schedule takes its Paused")
		sc, _, err := b.drv.SchedulePause(b.ctx, b.ns, "decl", false)
		must(t, err, "resume")
		require.False(t, sc.Paused)
		_, _, err = b.drv.SchedulePause(b.ctx, b.ns, "decl", true)
		must(t, err, "the operator's pause")
		again := declare(plane.Schedule{Name: "decl", Every: time.Minute, Payload: []byte("2")})
		require.True(t, again.Paused, "the operator's pause survives the declaration")
		require.True(t, again.NextFire.IsZero(), "still no next fire")
		require.Equal(t, []byte("2"), again.Payload, "the payload is the declaration's")
		b.advance(3 * time.Minute)
		maintain(t, b)
		require.Empty(t, fires(t, b, "decl"), "paused: no fire")
		changed := declare(plane.Schedule{Name: "decl", Cron: "*/5 * * * *"})
		require.True(t, changed.Paused, "a changed rule keeps the pause too")
		require.Equal(t, "*/5 * * * *", changed.Cron)

		// Same rule, not paused: the next fire stays, so catch-up all fires each missed tick.
		declare(plane.Schedule{Name: "all", Every: time.Minute, CatchUp: plane.CatchUpAll})
		first := get(t, b, "all").NextFire
		b.advance(3 * time.Minute)
		kept := declare(plane.Schedule{Name: "all", Every: time.Minute, CatchUp: plane.CatchUpAll, Payload: []byte("new")})
		requireTime(t, first, kept.NextFire, "the same rule keeps the next fire")
		maintain(t, b)
		require.Len(t, fires(t, b, "all"), 3, "the ticks missed before the declaration are caught up")
		// A changed rule fires next at its own first tick after now.
		now := b.now()
		moved := declare(plane.Schedule{Name: "all", Every: time.Hour, CatchUp: plane.CatchUpAll})
		requireTime(t, now.Truncate(time.Hour).Add(time.Hour), moved.NextFire, "a new rule's first tick after now")
		require.False(t, moved.Paused)

		// The skip record stays through a declaration; a plain set starts it again.
		_, err = b.drv.QueueAdmissionSet(b.ctx, &plane.AdmissionParams{Namespace: b.ns, Queue: b.q,
			Admission: plane.Admission{MaxDepth: 1}})
		must(t, err, "set admission")
		declare(plane.Schedule{Name: "full", Every: time.Minute})
		b.advance(time.Minute)
		maintain(t, b)
		require.EqualValues(t, 1, get(t, b, "full").Skipped, "the queue is full: skipped")
		require.EqualValues(t, 1, declare(plane.Schedule{Name: "full", Every: time.Minute}).Skipped, "kept by a declaration")
		require.Zero(t, set(t, b, plane.Schedule{Name: "full", Every: time.Minute}).Skipped, "started again by a plain set")
		_, _, err = b.drv.SchedulePause(b.ctx, b.ns, "decl", true)
		must(t, err, "pause")
		require.False(t, set(t, b, plane.Schedule{Name: "decl", Every: time.Minute}).Paused, "a plain set replaces the paused flag")
		require.True(t, start.Before(b.now()))
	})

	t.Run("PlainSetKeepsDueTick", func(t *testing.T) {
		// A plain set (no KeepState) replacing a schedule with the same rule, made at a
		// tick's instant or after it but before maintenance fired it, keeps that due tick:
		// it fires once, with the set's payload. Before, the set's next fire was the first
		// tick after now, and the tick the replaced schedule owed was dropped. Not a
		// paused one's (its ticks are skipped), nor a changed rule's (a new rule starts at
		// its first tick after now).
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for _, after := range []time.Duration{0, 100 * time.Millisecond} {
			name := "due-" + strconv.Itoa(int(after.Milliseconds()))
			set(t, b, plane.Schedule{Name: name, Every: time.Minute, Payload: []byte("old")})
			start := b.now()
			tick := start.Truncate(time.Minute).Add(time.Minute)
			b.advance(tick.Sub(start) + after)
			again := set(t, b, plane.Schedule{Name: name, Every: time.Minute, Payload: []byte("new")})
			requireTime(t, tick, again.NextFire, name+": the due tick stays the next fire")
			maintain(t, b)
			got := fires(t, b, name)
			require.Len(t, got, 1, "%s: the due tick fired once", name)
			inv := b.get(t, got[0].ID)
			require.Equal(t, plane.ScheduleKey(name, tick), inv.Key, name)
			require.Equal(t, []byte("new"), inv.Payload, "%s: with the set's payload", name)
			requireTime(t, tick.Add(time.Minute), get(t, b, name).NextFire, name+": then the next tick")
		}
		// A changed rule starts at its own first tick after now; a paused schedule's due
		// tick is not kept (no tick fires while paused).
		set(t, b, plane.Schedule{Name: "moved", Every: time.Minute})
		set(t, b, plane.Schedule{Name: "paused", Every: time.Minute})
		_, _, err := b.drv.SchedulePause(b.ctx, b.ns, "paused", true)
		must(t, err, "pause")
		start := b.now()
		tick := start.Truncate(time.Minute).Add(time.Minute)
		b.advance(tick.Sub(start))
		moved := set(t, b, plane.Schedule{Name: "moved", Every: 2 * time.Minute})
		require.True(t, moved.NextFire.After(tick), "a changed rule does not fire the old rule's due tick")
		resumed := set(t, b, plane.Schedule{Name: "paused", Every: time.Minute})
		require.True(t, resumed.NextFire.After(tick), "a paused schedule owes no tick")
		maintain(t, b)
		require.Empty(t, fires(t, b, "moved"))
		require.Empty(t, fires(t, b, "paused"))
	})

	t.Run("PlainSetAfterDowntimeOwesNoBacklog", func(t *testing.T) {
		// A plain set after long downtime (the replaced schedule's next fire hours old,
		// never fired) keeps only a fresh due tick (at most ScheduleGrace old): with
		// CatchUpAll it does not replay the backlog — before, it kept the hours-old next
		// fire and the first pass fired ScheduleFiresMax ticks, the rest in the next
		// passes. Without a fresh tick it starts at the first tick after now, as any plain
		// set. Only a KeepState set keeps the backlog (by its CatchUp).
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		set(t, b, plane.Schedule{Name: "minutely", Every: time.Minute, CatchUp: plane.CatchUpAll})
		set(t, b, plane.Schedule{Name: "hourly", Every: time.Hour, CatchUp: plane.CatchUpAll})
		start := b.now()
		tick := start.Truncate(time.Hour).Add(3 * time.Hour) // a tick of both rules
		b.advance(tick.Sub(start) + 30*time.Minute)          // hourly's last tick: 30 min old
		fresh := tick.Add(29 * time.Minute)                  // minutely's oldest tick at most ScheduleGrace old
		again := set(t, b, plane.Schedule{Name: "minutely", Every: time.Minute, CatchUp: plane.CatchUpAll})
		requireTime(t, fresh, again.NextFire, "the oldest fresh due tick is the next fire")
		hourly := set(t, b, plane.Schedule{Name: "hourly", Every: time.Hour, CatchUp: plane.CatchUpAll})
		requireTime(t, tick.Add(time.Hour), hourly.NextFire, "no fresh tick: the first after now")
		maintain(t, b)
		got := fires(t, b, "minutely")
		require.Len(t, got, 2, "the fresh ticks only (a minute ago, now), not the hours of missed ones")
		for i, inv := range got {
			require.Equal(t, plane.ScheduleKey("minutely", fresh.Add(time.Duration(i)*time.Minute)), b.get(t, inv.ID).Key)
		}
		require.Empty(t, fires(t, b, "hourly"))
	})

	t.Run("ConcurrencyKey", func(t *testing.T) {
		// A schedule's concurrency key is every fire's: a schedule per tenant, each
		// tenant's fires under its key's limit. Stored and listed with the schedule, and
		// checked as a submit's (1–256 bytes of UTF-8 without NUL). Before 2026-12-07 a
		// schedule had no key: its fires ran outside every per-key limit.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		for _, tenant := range []string{"tenant-a", "tenant-b"} {
			sc := set(t, b, plane.Schedule{Name: tenant, Every: time.Minute, CatchUp: plane.CatchUpAll, ConcurrencyKey: tenant})
			require.Equal(t, tenant, sc.ConcurrencyKey, "answered as stored")
			require.Equal(t, tenant, get(t, b, tenant).ConcurrencyKey, "listed")
		}
		b.advance(2 * time.Minute) // two ticks of each: four fires, two per key
		maintain(t, b)
		for _, tenant := range []string{"tenant-a", "tenant-b"} {
			got := fires(t, b, tenant)
			require.Len(t, got, 2, tenant)
			for _, inv := range got {
				require.Equal(t, tenant, b.get(t, inv.ID).ConcurrencyKey, "a fire carries its schedule's key")
			}
		}
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Worker: "worker-1", Max: 4})
		require.Len(t, jobs, 2, "one fire per key runs at once (the key's limit of 1)")
		require.ElementsMatch(t, []string{"tenant-a", "tenant-b"}, []string{jobs[0].ConcurrencyKey, jobs[1].ConcurrencyKey})

		_, err := b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: b.ns, Name: "bad", Queue: b.q, Every: time.Minute,
			ConcurrencyKey: "a\x00b"})
		requireInvalid(t, err, "concurrency_key")
	})

	t.Run("ReplaceListDelete", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		first := set(t, b, plane.Schedule{Name: "b", Every: time.Hour})
		set(t, b, plane.Schedule{Name: "a", Cron: "@daily"})
		b.advance(time.Minute)
		second := set(t, b, plane.Schedule{Name: "b", Every: 2 * time.Hour, CatchUp: plane.CatchUpAll})
		require.Equal(t, first.CreatedAt, second.CreatedAt, "a replaced schedule keeps its created time")
		require.Equal(t, 2*time.Hour, second.Every)
		require.Equal(t, plane.CatchUpAll, second.CatchUp)
		list, err := plane.ListSchedules(b.ctx, b.drv, b.ns)
		must(t, err, "list")
		require.Len(t, list, 2)
		require.Equal(t, "a", list[0].Name, "ordered by name")
		require.Equal(t, "@daily", list[0].Cron)
		other, err := plane.ListSchedules(b.ctx, b.drv, "tenant-b")
		must(t, err, "list another namespace")
		require.Empty(t, other)
		deleted, err := b.drv.ScheduleDelete(b.ctx, b.ns, "b")
		must(t, err, "delete")
		require.True(t, deleted)
		deleted, err = b.drv.ScheduleDelete(b.ctx, b.ns, "b")
		must(t, err, "delete again")
		require.False(t, deleted)
		list, err = plane.ListSchedules(b.ctx, b.drv, "")
		must(t, err, "list all")
		require.Len(t, list, 1)
	})

	t.Run("ConditionalSet", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		cond := func(name, queue, replacing string) error {
			_, err := b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: b.ns, Queue: queue, Name: name,
				Every: time.Hour, Replacing: &replacing})
			return err
		}
		if err := cond("new", b.q, ""); errors.Is(err, plane.ErrNotImplemented) {
			t.Skip("this plane leaves the conditional set to its server (the HTTP plane)")
		} else {
			must(t, err, "create, none expected")
		}
		requireIs(t, cond("new", b.q, ""), plane.ErrScheduleChanged, "expected none, one exists")
		requireIs(t, cond("new", "other", "other"), plane.ErrScheduleChanged, "expected another queue")
		require.Equal(t, b.q, get(t, b, "new").Queue, "a failed conditional set changes nothing")
		must(t, cond("new", "other", b.q), "replace, its queue expected")
		require.Equal(t, "other", get(t, b, "new").Queue)
		requireIs(t, cond("absent", b.q, b.q), plane.ErrScheduleChanged, "expected one, none exists")
		list, err := plane.ListSchedules(b.ctx, b.drv, b.ns)
		must(t, err, "list")
		require.Len(t, list, 1, "nothing created by a failed conditional set")
	})

	t.Run("CapPerNamespace", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true, maxSchedules: 3})
		for _, name := range []string{"s1", "s2", "s3"} {
			set(t, b, plane.Schedule{Name: name, Every: time.Minute})
		}
		_, err := b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: b.ns, Name: "s4", Queue: b.q, Every: time.Minute})
		requireIs(t, err, plane.ErrLimitExceeded, "a fourth schedule in a namespace capped at 3")
		require.Equal(t, "limit_exceeded", plane.Code(err), "its stable code")
		require.Contains(t, err.Error(), "3", "the message names the cap")
		_, err = b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: b.ns, Name: "s5", Queue: b.q, Every: time.Minute, KeepState: true})
		requireIs(t, err, plane.ErrLimitExceeded, "a declaration (KeepState) of a new name counts too")
		list, err := plane.ListSchedules(b.ctx, b.drv, b.ns)
		must(t, err, "list")
		require.Len(t, list, 3, "a refused schedule is not stored")
		replaced := set(t, b, plane.Schedule{Name: "s2", Every: time.Hour})
		require.Equal(t, time.Hour, replaced.Every, "replacing one at the cap is allowed")
		_, err = b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: b.ns, Name: "s3", Queue: b.q, Every: 2 * time.Hour, KeepState: true})
		must(t, err, "a declaration of an existing name at the cap")
		_, err = b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: "tenant-b", Name: "s4", Queue: b.q, Every: time.Minute})
		must(t, err, "another namespace has its own count")
		deleted, err := b.drv.ScheduleDelete(b.ctx, b.ns, "s1")
		must(t, err, "delete")
		require.True(t, deleted)
		set(t, b, plane.Schedule{Name: "s4", Every: time.Minute})
		list, err = plane.ListSchedules(b.ctx, b.drv, b.ns)
		must(t, err, "list")
		require.Len(t, list, 3)
	})

	t.Run("ListNamespaceMatch", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for _, ns := range []string{"aa", "nm-a", "nm-b", "nm-c", "nm-cc", "zz"} {
			for _, name := range []string{"s1", "s2"} {
				_, err := b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: ns, Name: name, Queue: b.q, Every: time.Minute})
				must(t, err, "set")
			}
		}
		for pattern, want := range map[string][]string{
			"nm-[ac]": {"nm-a/s1", "nm-a/s2", "nm-c/s1", "nm-c/s2"},
			"nm-*":    {"nm-a/s1", "nm-a/s2", "nm-b/s1", "nm-b/s2", "nm-c/s1", "nm-c/s2", "nm-cc/s1", "nm-cc/s2"},
			"*z":      {"zz/s1", "zz/s2"},
			"none-*":  nil,
		} {
			got := listPages(t, b, plane.ScheduleListParams{NamespaceMatch: pattern, Limit: 1},
				func(sc *plane.Schedule) string { return sc.Namespace + "/" + sc.Name })
			require.Equal(t, want, got, "%s: every schedule of the namespaces it matches, once, in order", pattern)
		}
		_, err := b.drv.ScheduleList(b.ctx, &plane.ScheduleListParams{NamespaceMatch: "nm-["})
		requireInvalid(t, err, "namespace_match")
	})

	t.Run("ListQueueMatch", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for i, queue := range []string{"qm-1", "qm-2", "qm-3", "other", "qm-1"} {
			_, err := b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: b.ns, Name: "s" + strconv.Itoa(i), Queue: queue, Every: time.Minute})
			must(t, err, "set")
		}
		for pattern, want := range map[string][]string{
			"qm-1":     {"qm-1/s0", "qm-1/s4"},
			"qm-[13]":  {"qm-1/s0", "qm-3/s2", "qm-1/s4"},
			"qm-*":     {"qm-1/s0", "qm-2/s1", "qm-3/s2", "qm-1/s4"},
			"nothing*": nil,
		} {
			got := listPages(t, b, plane.ScheduleListParams{Namespace: b.ns, QueueMatch: pattern, Limit: 1},
				func(sc *plane.Schedule) string { return sc.Queue + "/" + sc.Name })
			require.Equal(t, want, got, "%s: every schedule of the queues it matches, once, in order", pattern)
		}
		_, err := b.drv.ScheduleList(b.ctx, &plane.ScheduleListParams{QueueMatch: "qm-["})
		requireInvalid(t, err, "queue_match")
	})

	t.Run("ListPages", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		// byte order: upper case before lower case, '-' before digits
		names := []string{"B", "Zed", "a", "a-1", "a0", "alpha"}
		for _, name := range []string{"alpha", "a0", "Zed", "a-1", "a", "B"} {
			set(t, b, plane.Schedule{Name: name, Every: time.Minute})
		}
		_, err := b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: "tenant-b", Name: "a", Queue: b.q, Every: time.Minute})
		must(t, err, "set in tenant-b")
		page := func(p plane.ScheduleListParams) ([]string, string) {
			t.Helper()
			got, err := b.drv.ScheduleList(b.ctx, &p)
			must(t, err, "list a page")
			var out []string
			for _, sc := range got.Schedules {
				out = append(out, sc.Namespace+"/"+sc.Name)
			}
			return out, got.Next
		}
		var all []string
		after, pages := "", 0
		for {
			got, next := page(plane.ScheduleListParams{Namespace: b.ns, After: after, Limit: 4})
			require.LessOrEqual(t, len(got), 4)
			all, pages = append(all, got...), pages+1
			if next == "" {
				break
			}
			require.Less(t, pages, 10, "the cursor moves on")
			after = next
		}
		var want []string
		for _, name := range names {
			want = append(want, b.ns+"/"+name)
		}
		require.Equal(t, want, all, "every schedule once, in byte order, over two pages")
		require.Equal(t, 2, pages)
		got, next := page(plane.ScheduleListParams{Namespace: b.ns, Limit: 3})
		require.Equal(t, want[:3], got)
		got, next = page(plane.ScheduleListParams{Namespace: b.ns, After: next, Limit: 3})
		require.Equal(t, want[3:], got)
		require.Empty(t, next, "a last page that ends at the limit has no next cursor")
		got, next = page(plane.ScheduleListParams{Limit: 6})
		require.Equal(t, want[:6], got, "every namespace: default's first")
		got, next = page(plane.ScheduleListParams{After: next})
		require.Equal(t, []string{"tenant-b/a"}, got, "the cursor goes on into the next namespace")
		require.Empty(t, next)
		got, _ = page(plane.ScheduleListParams{Namespace: b.ns, Name: "a0"})
		require.Equal(t, []string{b.ns + "/a0"}, got, "one name")
		got, _ = page(plane.ScheduleListParams{Namespace: b.ns, Name: "nope"})
		require.Empty(t, got)
		for what, p := range map[string]plane.ScheduleListParams{
			"bad cursor":      {Namespace: b.ns, After: "not a cursor"},
			"cursor no slash": {Namespace: b.ns, After: "alpha"},
			"negative limit":  {Namespace: b.ns, Limit: -1},
			"limit too big":   {Namespace: b.ns, Limit: plane.ListLimitMax + 1},
			"name alone":      {Name: "a"},
			"bad namespace":   {Namespace: "bad/ns"},
		} {
			_, err := b.drv.ScheduleList(b.ctx, &p)
			requireIs(t, err, plane.ErrInvalid, what)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for what, sc := range map[string]plane.Schedule{
			"no rule":          {Name: "x"},
			"both rules":       {Name: "x", Cron: "* * * * *", Every: time.Minute},
			"bad cron":         {Name: "x", Cron: "every night"},
			"six fields":       {Name: "x", Cron: "0 0 3 * * *"},
			"@every in cron":   {Name: "x", Cron: "@every 1m"},
			"short interval":   {Name: "x", Every: time.Millisecond},
			"unknown zone":     {Name: "x", Cron: "0 3 * * *", TimeZone: "Mars/Olympus"},
			"zone on interval": {Name: "x", Every: time.Minute, TimeZone: "UTC"},
			"bad catch-up":     {Name: "x", Every: time.Minute, CatchUp: "sometimes"},
			"bad name":         {Name: "no spaces", Every: time.Minute},
			"negative tries":   {Name: "x", Every: time.Minute, MaxAttempts: -1},
			// The plane sets these on every fire: a value given here was replaced without a
			// word (a new user's trial, metadata {"schedule": "nightly-eval"}).
			"fire's name key": {Name: "x", Every: time.Minute, Metadata: map[string]string{"schedule": "nightly-eval"}},
			"fire's tick key": {Name: "x", Every: time.Minute, Metadata: map[string]string{"team": "a", "schedule_tick": "t"}},
		} {
			sc.Namespace, sc.Queue = b.ns, b.q
			_, err := b.drv.ScheduleSet(b.ctx, &sc)
			requireIs(t, err, plane.ErrInvalid, what)
		}
		list, err := plane.ListSchedules(b.ctx, b.drv, b.ns)
		must(t, err, "list")
		require.Empty(t, list, "nothing stored on error")
	})
}

// listPages follows params's pages to the end (at most 20) and answers every schedule
// listed, as name gives it, in order.
func listPages(t *testing.T, b *bundle, params plane.ScheduleListParams, name func(*plane.Schedule) string) []string {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		require.Less(t, pages, 20, "the cursor moves on")
		page, err := b.drv.ScheduleList(b.ctx, &params)
		must(t, err, "list")
		for i := range page.Schedules {
			got = append(got, name(&page.Schedules[i]))
		}
		if page.Next == "" {
			return got
		}
		params.After = page.Next
	}
}

package plane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// CatchUp is what a schedule does with the ticks it missed while no maintenance ran (the
// plane was down, or the schedule's tick came while another pass was running): the ticks
// whose time is at or before the pass's clock reading and after the last tick it fired.
type CatchUp string

// The catch-up policies.
const (
	// CatchUpOnce (the default) fires the latest missed tick once and skips the rest.
	CatchUpOnce CatchUp = "once"
	// CatchUpSkip fires a tick only while it is fresh (at most ScheduleGrace old at the pass
	// that sees it); after downtime every missed tick is skipped and the schedule waits for
	// its next one.
	CatchUpSkip CatchUp = "skip"
	// CatchUpAll fires every missed tick, oldest first, at most ScheduleFiresMax per pass
	// (the rest in the following passes).
	CatchUpAll CatchUp = "all"
)

// Bounds and defaults of schedules.
const (
	// ScheduleGrace is how old a tick may be at the pass that fires it and still count as on
	// time for CatchUpSkip (one minute: many maintenance intervals, far less than downtime).
	ScheduleGrace = time.Minute
	// ScheduleFiresMax bounds the ticks one schedule fires in one maintenance pass
	// (CatchUpAll after long downtime).
	ScheduleFiresMax = 100
	// ScheduleEveryMin is the shortest interval of an interval schedule (one second).
	ScheduleEveryMin = time.Second
	// ScheduleKeyPrefix starts the idempotency key of every fire: ScheduleKey. Keys under
	// it are the plane's: a client's submit with one is refused (ScheduleKeyRule), so no
	// one who may submit to a queue can take a future tick's key and suppress or replace
	// the fire. The plane's own fires do not go through that check.
	ScheduleKeyPrefix = "schedule/"
)

// SchedulesPerNamespaceDefault is the most schedules one namespace holds when the plane's
// configuration does not say (sqliteplane.Config and pgplane.Config
// MaxSchedulesPerNamespace): ten thousand cron entries are cheap (issue 27), and a token
// that may submit cannot fill the plane with them.
const SchedulesPerNamespaceDefault = 10000

// CheckScheduleCount is the cap on schedules per namespace, the rule of every plane's
// ScheduleSet: creating a schedule (not replacing one) in namespace, which holds stored
// schedules, is refused with ErrLimitExceeded when stored is max or more (max 0:
// SchedulesPerNamespaceDefault; negative: no cap). Nothing is stored then.
func CheckScheduleCount(namespace string, stored, max int) error {
	max, reached := capReached(stored, max, SchedulesPerNamespaceDefault)
	if !reached {
		return nil
	}
	return &Error{Code: ErrLimitExceeded.Code, Message: fmt.Sprintf(
		"namespace %s holds %d schedules, its maximum (%d): delete one before creating another, or replace one of the same name",
		namespace, stored, max)}
}

// ScheduleListParams are the arguments of Driver.ScheduleList.
type ScheduleListParams struct {
	// Namespace lists one namespace's schedules; "" every namespace's.
	Namespace string
	// Name, with Namespace, lists only the schedule of that name (a page of one or none).
	Name string
	// After is the cursor from the previous page's Next; "" starts at the first schedule.
	After string
	// Limit caps the page; 0 means ListLimitDefault, at most ListLimitMax.
	Limit int
	// NamespaceMatch, when set, lists only the namespaces it matches: a path.Match pattern
	// ("team-*", "team-[ac]"), a token's namespace. The SQL planes read only the rows of
	// the namespaces that start with its literal prefix and fill the page with the
	// matching ones, Next naming the last of them, so a page and its cursor say nothing of
	// a namespace the pattern does not match (a scoped token's listing,
	// server/schedules.go). The HTTP plane filters each page the server answers.
	NamespaceMatch string
	// QueueMatch, when set, lists only the schedules whose queue it matches (a path.Match
	// pattern, a token's queue: "q1", "train-*"), as NamespaceMatch does for namespaces: the
	// SQL planes fill the page with matching schedules only and Next names the last of
	// them, so a page and its cursor say nothing of another queue's schedules (a token
	// scoped to one queue of a namespace). Schedules are not ordered by queue: the planes
	// read every row of the namespaces listed to fill a page.
	QueueMatch string
}

// Matches reports whether p lists schedule s by NamespaceMatch and QueueMatch ("": every
// namespace, every queue).
func (p *ScheduleListParams) Matches(s *Schedule) bool {
	return patternMatches(p.NamespaceMatch, s.Namespace) && patternMatches(p.QueueMatch, s.Queue)
}

// Filtered reports whether p lists fewer schedules than its bounds hold (NamespaceMatch or
// QueueMatch set): a page is then filled by reading on.
func (p *ScheduleListParams) Filtered() bool { return p.NamespaceMatch != "" || p.QueueMatch != "" }

// patternMatches reports whether name matches pattern, a path.Match pattern ("": any).
func patternMatches(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// NamespaceMatchPrefix is the literal start of a NamespaceMatch pattern (up to its first
// '*', '?', '[' or '\\'): every namespace it matches starts with it.
func NamespaceMatchPrefix(pattern string) string {
	if i := strings.IndexAny(pattern, "*?[\\"); i >= 0 {
		return pattern[:i]
	}
	return pattern
}

// SchedulePage is one page of Driver.ScheduleList.
type SchedulePage struct {
	// Schedules are the page's schedules, ordered by namespace then name (bytes).
	Schedules []Schedule
	// Next is the cursor of the following page; "" when this page is the last.
	Next string
}

// ScheduleCursor is the cursor of a page that ends with schedule (namespace, name):
// "NAMESPACE/NAME" (neither holds a '/').
func ScheduleCursor(namespace, name string) string { return namespace + "/" + name }

// Validate checks p's namespace, name, cursor and limit and returns the limit to use and
// the cursor's namespace and name ("" when none). Errors: *InvalidError naming the field.
func (p *ScheduleListParams) Validate() (limit int, afterNamespace, afterName string, err error) {
	if p.Namespace != "" {
		if err := ValidateNamespace(p.Namespace); err != nil {
			return 0, "", "", err
		}
	}
	if p.Name != "" {
		if p.Namespace == "" {
			return 0, "", "", Invalid("name", p.Name, "give the namespace with a schedule's name")
		}
		if err := ValidateName("schedule name", p.Name); err != nil {
			return 0, "", "", err
		}
	}
	if p.After != "" {
		ns, name, ok := strings.Cut(p.After, "/")
		if !ok || ValidateName("namespace", ns) != nil || ValidateName("schedule name", name) != nil {
			return 0, "", "", Invalid("after", p.After, "use the next cursor of the previous page")
		}
		afterNamespace, afterName = ns, name
	}
	for _, m := range []struct{ field, pattern, example string }{
		{"namespace_match", p.NamespaceMatch, "team-*"}, {"queue_match", p.QueueMatch, "train-*"},
	} {
		if m.pattern == "" {
			continue
		}
		if _, err := path.Match(m.pattern, ""); err != nil || len(m.pattern) > 256 {
			return 0, "", "", Invalid(m.field, m.pattern, "use a path.Match pattern of at most 256 bytes ("+m.example+")")
		}
	}
	if p.Limit < 0 || p.Limit > ListLimitMax {
		return 0, "", "", Invalid("limit", p.Limit, fmt.Sprintf("use 1–%d (0: %d)", ListLimitMax, ListLimitDefault))
	}
	return cmp.Or(p.Limit, ListLimitDefault), afterNamespace, afterName, nil
}

// ScheduleLister is the part of a Driver ListSchedules needs.
type ScheduleLister interface {
	ScheduleList(ctx context.Context, params *ScheduleListParams) (*SchedulePage, error)
}

// ListSchedules lists every schedule of namespace ("" every namespace) that drv lists,
// following the cursor page by page (ListLimitMax each), ordered by namespace then name.
// For callers that want them all (a CLI listing, a worker's check); a page at a time is
// Driver.ScheduleList.
func ListSchedules(ctx context.Context, drv ScheduleLister, namespace string) ([]Schedule, error) {
	var out []Schedule
	params := &ScheduleListParams{Namespace: namespace, Limit: ListLimitMax}
	for {
		page, err := drv.ScheduleList(ctx, params)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Schedules...)
		if page.Next == "" || page.Next == params.After {
			return out, nil
		}
		params.After = page.Next
	}
}

// ScheduleKeyRule is the rule of the *InvalidError (field "key", code invalid) of a submit
// whose idempotency key starts with ScheduleKeyPrefix.
const ScheduleKeyRule = `keys starting "schedule/" are reserved for the fires of schedules (schedule/NAME/TICK); use another key`

// Schedule is a durable periodic submit: at each tick of its rule (a cron expression or an
// interval) the plane's maintenance leader submits Payload to Queue with the idempotency key
// ScheduleKey(Name, tick), in the same transaction that moves the schedule to its next tick,
// so a tick fires exactly once across replicas, restarts and leader changes. A fire is an
// ordinary invocation, subject to the queue's depth limit (ScheduleAdmit): a tick that finds
// the queue full is skipped, counted in Skipped, and never blocks maintenance. Schedules are
// keyed by (Namespace, Name).
type Schedule struct {
	// Namespace and Name identify the schedule; Name follows NameRule.
	Namespace string
	Name      string
	// Queue receives the fires (in Namespace). Required; NameRule.
	Queue string
	// Cron is a five-field cron expression ("0 3 * * *": minute, hour, day of month, month,
	// day of week) or a descriptor (@hourly, @daily, @weekly, @monthly, @yearly), read by
	// github.com/robfig/cron/v3's standard parser in TimeZone. Exactly one of Cron and Every.
	// Across daylight-saving changes a job with a fixed minute and hour runs once per local
	// day (the first of a repeated time; a skipped time at the change); one with a wildcard
	// or step there runs by the real clock (cronRule, docs/semantics.md "Schedules").
	Cron string
	// Every is the interval of an interval schedule: ticks at the whole multiples of Every
	// since the Unix epoch (so every replica computes the same ticks). At least
	// ScheduleEveryMin, a whole number of milliseconds.
	Every time.Duration
	// TimeZone is the IANA zone Cron is read in ("Europe/Paris"); "" is UTC. Not allowed
	// with Every.
	TimeZone string
	// Payload is the wire-encoded payload of every fire, at most MaxValueBytes.
	Payload []byte
	// Priority, MaxAttempts, AttemptTimeout and Metadata are those of every fire, as in
	// SubmitParams.
	Priority       float64
	MaxAttempts    int
	AttemptTimeout time.Duration
	Metadata       map[string]string
	// ConcurrencyKey is every fire's concurrency key, as SubmitParams.ConcurrencyKey ("":
	// none): the queue's per-key limits, weights and rates apply to the fires (a schedule
	// per tenant, each tenant's fires under its key's limit). 1–256 bytes of UTF-8 without
	// NUL.
	ConcurrencyKey string
	// CatchUp is the missed-tick policy; "" means CatchUpOnce.
	CatchUp CatchUp
	// Paused stops the fires; the ticks that pass while paused are skipped (resuming fires
	// from the next tick after the resume).
	Paused bool
	// KeepState makes ScheduleSet a declaration (what a program states at each start, as
	// Python's @lakeshore.schedule does at import): when a schedule of the name exists, the
	// set replaces its rule, payload and options but keeps the plane's state of it — its
	// paused flag (Paused then applies only to a schedule the set creates), its skip record
	// and, when the rule (Cron, Every, TimeZone) is unchanged, its next fire, so the ticks
	// missed meanwhile still follow CatchUp. With a changed rule the next fire is the new
	// rule's first tick after now (none while paused). The stored row is read and written in
	// one transaction, so a concurrent pause is never undone. Not stored. A plain set (without
	// KeepState) starts the schedule again at the first tick after now — unless the replaced
	// schedule, not paused and of the same rule, has a tick due that maintenance has not
	// fired yet: that tick stays the next fire (a set landing on a tick's instant fires it).
	// Only a tick at most ScheduleGrace old is kept, so a plain set after long downtime
	// does not replay the backlog.
	KeepState bool
	// Replacing, when not nil, makes ScheduleSet conditional on what it replaces: the stored
	// schedule of the name must be of queue *Replacing, or with "" there must be none;
	// otherwise nothing changes and ScheduleSet answers ErrScheduleChanged. The server sets
	// it to authorise a replace against the schedule it read (a concurrent create or
	// replace of the name then fails instead of being overwritten). nil: unconditional. Not
	// stored; the HTTP plane refuses it (ErrNotImplemented): the check is the server's.
	Replacing *string

	// The fields below are the plane's; ScheduleSet ignores them.

	// NextFire is the next tick the plane will fire (the zero time while paused).
	NextFire time.Time
	// LastFire is the tick last fired (zero: never) and LastID the invocation it submitted.
	LastFire time.Time
	LastID   string
	// CreatedAt and UpdatedAt are on the plane's clock.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Skipped counts the ticks skipped because the queue was at its max depth
	// (ScheduleAdmit) since the schedule was last set (a KeepState set keeps it); LastSkip is the last such tick (zero:
	// none) and LastSkipReason why ("queue team-a/q1 full: 2 queued of max depth 2").
	Skipped        int64
	LastSkip       time.Time
	LastSkipReason string
}

// ScheduleEveryRule is what Schedule.Every may be when given (ScheduleEveryMin).
const ScheduleEveryRule = "use at least 1s, in whole milliseconds"

// CatchUpRule is what Schedule.CatchUp may be.
const CatchUpRule = `use "once" (fire the latest missed tick, the default), "skip" (fire none older than 1m) or "all" (fire each)`

// The metadata keys the plane sets on every fire (FireParams).
const (
	// MetaSchedule holds the name of the schedule that submitted the fire.
	MetaSchedule = "schedule"
	// MetaScheduleTick holds the fire's tick, RFC 3339 in UTC.
	MetaScheduleTick = "schedule_tick"
)

// ScheduleMetaRule is why a schedule's own metadata may not hold MetaSchedule or
// MetaScheduleTick: every fire carries the plane's values of them, so one given there was
// replaced on every fire without a word.
const ScheduleMetaRule = `the keys "schedule" and "schedule_tick" are set on every fire (the schedule's name and the tick); use other keys`

// Validate checks s's names, rule, time zone, payload and options. Errors: *InvalidError
// naming the field and what is allowed.
func (s *Schedule) Validate() error {
	if err := ValidateNamespace(s.Namespace); err != nil {
		return err
	}
	if err := ValidateName("schedule name", s.Name); err != nil {
		return err
	}
	if err := ValidateName("queue name", s.Queue); err != nil {
		return err
	}
	if _, err := s.Rule(); err != nil {
		return err
	}
	switch s.CatchUp {
	case "", CatchUpOnce, CatchUpSkip, CatchUpAll:
	default:
		return Invalid("catch_up", string(s.CatchUp), CatchUpRule)
	}
	for _, k := range []string{MetaSchedule, MetaScheduleTick} {
		if _, ok := s.Metadata[k]; ok {
			return Invalid("metadata key", k, ScheduleMetaRule)
		}
	}
	sub := SubmitParams{Payload: s.Payload, Priority: s.Priority, MaxAttempts: s.MaxAttempts,
		AttemptTimeout: s.AttemptTimeout, Metadata: s.Metadata, ConcurrencyKey: s.ConcurrencyKey}
	return sub.validate()
}

// ScheduleRule computes the ticks of a schedule. Next(t) is the first tick strictly after t.
type ScheduleRule interface {
	Next(t time.Time) time.Time
}

// everyRule ticks at the multiples of every since the Unix epoch.
type everyRule struct{ every time.Duration }

func (r everyRule) Next(t time.Time) time.Time {
	ms, step := t.UnixMilli(), r.every.Milliseconds()
	next := (ms/step + 1) * step
	if ms < 0 && ms%step != 0 {
		next -= step
	}
	return time.UnixMilli(next).UTC()
}

// cronRule reads a cron schedule in a zone. A wall-clock job (fixed: no wildcard or step
// in its minute and hour fields) ticks once per matching local day, by Vixie cron's rule
// for the daylight-saving changes (wallTick); any other job ticks by the real clock: at
// every instant whose local reading matches, as robfig/cron computes it.
type cronRule struct {
	schedule cron.Schedule
	zone     *time.Location
	// times are a wall-clock job's times of day (dayTimes); nil for any other job.
	times []int
}

func (r cronRule) Next(t time.Time) time.Time {
	if spec, ok := r.schedule.(*cron.SpecSchedule); ok && r.times != nil {
		return fixedNext(spec, r.times, r.zone, t)
	}
	return r.schedule.Next(t.In(r.zone)).UTC()
}

// fixedTime reports whether the standard cron expression expr is a wall-clock job: a
// minute field and an hour field of values, ranges and lists only ("30", "0,30", "9-17"),
// no "*", "?" or step. Of the descriptors, @hourly is not one; @daily, @midnight,
// @weekly, @monthly, @yearly and @annually are.
func fixedTime(expr string) bool {
	if strings.HasPrefix(expr, "@") {
		return expr != "@hourly"
	}
	f := strings.Fields(expr)
	if len(f) < 2 {
		return false
	}
	return !strings.ContainsAny(f[0]+f[1], "*?/")
}

// fixedNext is the first tick after t of the wall-clock job spec in zone: for each local
// day the spec matches, each of its times of day (hour, minute) ticks at wallTick — the
// first instant whose local reading is at or after that time. So in the repeated hour of
// an autumn change a time ticks once, at its first occurrence, and a time inside the
// skipped hour of a spring change ticks at the change (the first instant after the gap),
// once however many of its times fall in the gap. Zero when no day in the five years after
// t matches (as robfig/cron).
//
// The walls, day by day and in each day by time, are in increasing order, and wallTick is
// non-decreasing in its wall (the first instant reading at or after a later wall is never
// earlier), so the tick is the first wall's whose tick is after t: a day whose last time
// ticks at or before t is passed over with one wallTick, and the day that holds the tick is
// searched by bisection. (Each of a day's times was computed in turn before: 1,440 of them
// for "0-59 0-23 * * *", a wall-clock job that ticks every minute, which cost 0.6 ms a
// tick — a second of a maintenance pass for each such schedule's day of missed ticks.)
// times are spec's times of day (dayTimes).
func fixedNext(spec *cron.SpecSchedule, times []int, zone *time.Location, t time.Time) time.Time {
	if len(times) == 0 {
		return time.Time{}
	}
	local := t.In(zone)
	// From the day before t's local day: a time of that day can tick after t only across
	// a change, and never one of an earlier day.
	day := time.Date(local.Year(), local.Month(), local.Day()-1, 12, 0, 0, 0, time.UTC)
	for end := day.AddDate(5, 0, 1); day.Before(end); day = day.AddDate(0, 0, 1) {
		if 1<<uint(day.Month())&spec.Month == 0 || !specDayMatches(spec, day) {
			continue
		}
		tick := func(i int) time.Time {
			wall := time.Date(day.Year(), day.Month(), day.Day(), times[i]/60, times[i]%60, 0, 0, time.UTC)
			return wallTick(wall, zone)
		}
		if !tick(len(times) - 1).After(t) {
			continue
		}
		return tick(sort.Search(len(times)-1, func(i int) bool { return tick(i).After(t) }))
	}
	return time.Time{}
}

// dayTimes are the times of day of spec's hour and minute fields, in minutes after
// midnight, in order: what fixedNext walks each matching day.
func dayTimes(spec *cron.SpecSchedule) []int {
	times := []int{}
	for h := 0; h < 24; h++ {
		if 1<<uint(h)&spec.Hour == 0 {
			continue
		}
		for m := 0; m < 60; m++ {
			if 1<<uint(m)&spec.Minute != 0 {
				times = append(times, h*60+m)
			}
		}
	}
	return times
}

// specDayMatches is robfig/cron's day rule for the calendar day of day: with a "*" in
// day-of-month or day-of-week both must match, else either.
func specDayMatches(spec *cron.SpecSchedule, day time.Time) bool {
	const star = 1 << 63
	dom := 1<<uint(day.Day())&spec.Dom != 0
	dow := 1<<uint(day.Weekday())&spec.Dow != 0
	if spec.Dom&star != 0 || spec.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

// wallTick is the first instant whose reading in zone is at or after the local time wall
// (given as the same reading in UTC): the instant of wall when it occurs once, its first
// occurrence when a change back repeats it, and the change itself when a change forward
// skips it. Returned in UTC.
func wallTick(wall time.Time, zone *time.Location) time.Time {
	w := wall.Unix()
	// The zone's periods (offset and bounds) around wall, oldest first: any instant that
	// reads wall lies within 15 hours of it (offsets span UTC-12 to UTC+14).
	var first, after int64
	var found, gap bool
	for at := wall.Add(-15 * time.Hour); !at.After(wall.Add(15 * time.Hour)); {
		in := at.In(zone)
		_, offset := in.Zone()
		start, end := in.ZoneBounds()
		u := w - int64(offset) // the instant reading wall in this period, if it lies in it
		if (start.IsZero() || u >= start.Unix()) && (end.IsZero() || u < end.Unix()) {
			if !found || u < first {
				first, found = u, true
			}
		} else if !gap && !start.IsZero() && start.Unix()+int64(offset) > w {
			after, gap = start.Unix(), true // the first period whose readings begin after wall
		}
		if end.IsZero() {
			break
		}
		at = end
	}
	if !found && gap {
		first = after
	}
	return time.Unix(first, 0).UTC()
}

// Rule returns s's tick rule. Errors: *InvalidError (no rule or both; a cron expression the
// standard parser refuses; an unknown time zone; an interval too short or not whole
// milliseconds).
func (s *Schedule) Rule() (ScheduleRule, error) {
	switch {
	case s.Cron == "" && s.Every == 0:
		return nil, Invalid("cron", "", `give a cron expression ("0 3 * * *") or an interval (every), not neither`)
	case s.Cron != "" && s.Every != 0:
		// No value quoted: both were given, and the interval would read re-formatted (1h0m0s).
		return nil, Invalid("every", nil, "give a cron expression or an interval, not both")
	case s.Every != 0:
		if s.Every < ScheduleEveryMin || s.Every%time.Millisecond != 0 {
			return nil, Invalid("every", s.Every.String(), ScheduleEveryRule)
		}
		if s.TimeZone != "" {
			return nil, Invalid("time_zone", s.TimeZone, "an interval schedule ticks on the Unix epoch; give a time zone only with a cron expression")
		}
		return everyRule{s.Every}, nil
	}
	expr := strings.TrimSpace(s.Cron)
	if strings.HasPrefix(expr, "@every") || strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, Invalid("cron", s.Cron, "give an interval as every and a zone as time_zone, not inside the expression")
	}
	parsed, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, Invalid("cron", s.Cron, cronRuleFor(expr, err))
	}
	zone := time.UTC
	if s.TimeZone != "" {
		if zone, err = time.LoadLocation(s.TimeZone); err != nil || s.TimeZone == "Local" {
			return nil, Invalid("time_zone", s.TimeZone, `use an IANA time zone name such as "Europe/Paris" or "UTC"`)
		}
	}
	rule := cronRule{schedule: parsed, zone: zone}
	if spec, ok := parsed.(*cron.SpecSchedule); ok && fixedTime(expr) {
		rule.times = dayTimes(spec)
	}
	return rule, nil
}

// CronRule is what Schedule.Cron may be.
const CronRule = `use five fields (minute hour day-of-month month day-of-week, e.g. "0 3 * * *") or @hourly, @daily, @weekly, @monthly, @yearly`

// cronFields are the five fields of a standard cron expression, with the values each takes
// (robfig/cron/v3's standard parser: no 7 for Sunday, no L, W or #).
var cronFields = [5]struct{ name, values string }{
	{"minute", "0–59"},
	{"hour", "0–23"},
	{"day-of-month", "1–31"},
	{"month", "1–12 or JAN–DEC"},
	{"day-of-week", "0–6 (Sunday is 0) or SUN–SAT"},
}

// cronRuleFor is the rule an unparsable cron expression breaks: CronRule and, for an
// expression of five fields, the first field the parser refuses, with the values it takes;
// else CronRule and the parser's reason. The parser's own text for a bad field named Go's
// internals ("failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax") and
// not the field, or said "above maximum (6)" for a Sunday written 7.
func cronRuleFor(expr string, err error) string {
	if fields := strings.Fields(expr); len(fields) == len(cronFields) {
		for i, field := range fields {
			probe := []string{"*", "*", "*", "*", "*"}
			probe[i] = field
			if _, perr := cron.ParseStandard(strings.Join(probe, " ")); perr != nil {
				f := cronFields[i]
				return fmt.Sprintf("%s: the %s field %q is not valid: use %s, *, a range (1-5), a list (1,3,5) or a step (*/15, 0-30/10)",
					CronRule, f.name, field, f.values)
			}
		}
	}
	reason := err.Error()
	if i := strings.Index(reason, ": strconv."); i >= 0 {
		reason = reason[:i]
	}
	return CronRule + ": " + reason
}

// SameRule reports whether s and o tick alike: the same cron expression (spaces around it
// aside), interval and time zone.
func (s *Schedule) SameRule(o *Schedule) bool {
	return strings.TrimSpace(s.Cron) == strings.TrimSpace(o.Cron) && s.Every == o.Every && s.TimeZone == o.TimeZone
}

// ScheduleKey is the idempotency key of the fire of schedule name at tick:
// "schedule/NAME/" then the tick in RFC 3339 UTC with milliseconds. A fire submitted twice
// (two leaders, a retried transaction) resolves to one invocation by this key.
func ScheduleKey(name string, tick time.Time) string {
	return ScheduleKeyPrefix + name + "/" + tick.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ScheduleFires decides a maintenance pass's fires of a schedule whose next tick is next,
// at the plane's clock reading now: the ticks to submit (oldest first, possibly none) and
// the schedule's next tick after them (after now, unless CatchUpAll left ticks for the next
// pass). A schedule with next after now fires nothing and keeps next. Pure: the caller
// passes the time.
func ScheduleFires(rule ScheduleRule, policy CatchUp, next, now time.Time) (ticks []time.Time, after time.Time) {
	if next.IsZero() || next.After(now) {
		return nil, next
	}
	// A stored next that is not a tick of the rule (stored under an earlier version of the
	// rule, e.g. the second 01:30 of an autumn change) moves on to the rule's next tick, so
	// a tick's identity (and its key) is always the rule's.
	if n := rule.Next(next.Add(-time.Millisecond)); n.After(next) {
		if next = n; next.After(now) {
			return nil, next
		}
	}
	if policy == CatchUpAll {
		t := next
		for !t.After(now) && len(ticks) < ScheduleFiresMax {
			ticks = append(ticks, t)
			t = rule.Next(t)
		}
		return ticks, t
	}
	// The latest tick at or before now, without walking every missed tick of long downtime
	// one by one.
	var latest time.Time
	if r, ok := rule.(everyRule); ok {
		step := r.every.Milliseconds()
		latest = time.UnixMilli(next.UnixMilli() + (now.UnixMilli()-next.UnixMilli())/step*step).UTC()
	} else {
		latest = latestTick(rule, next, now)
	}
	after = rule.Next(latest)
	if policy == CatchUpSkip && now.Sub(latest) > ScheduleGrace {
		return nil, after
	}
	return []time.Time{latest}, after
}

// latestTick is the last tick of rule at or before now, next being one. It bisects the
// instants from next to now: the first tick after an instant is at or before now for every
// instant before that last tick and for none from it on. So a catch-up costs some forty
// ticks' computations however many were missed; the walk through each missed tick it
// replaces cost a maintenance pass half a million of them for a year of "* * * * *", and
// 43,200 for a month, in the plane's write transaction, for each such schedule.
func latestTick(rule ScheduleRule, next, now time.Time) time.Time {
	if t := rule.Next(next); t.IsZero() || t.After(now) {
		return next // the common case: no tick missed
	}
	before := func(ms int64) bool { // whether the first tick after ms is at or before now
		t := rule.Next(time.UnixMilli(ms))
		return !t.IsZero() && !t.After(now)
	}
	low, high := next.UnixMilli(), now.UnixMilli() // before(low); !before(high)
	for high-low > 1 {
		if middle := low + (high-low)/2; before(middle) {
			low = middle
		} else {
			high = middle
		}
	}
	return rule.Next(time.UnixMilli(low)).UTC()
}

// FireParams are the submit of one fire of s at tick: s's payload and options (its
// concurrency key included), keyed by
// ScheduleKey, with metadata "schedule" (the name) and "schedule_tick" (the tick, RFC 3339)
// added to s's.
func (s *Schedule) FireParams(tick time.Time) SubmitParams {
	meta := make(map[string]string, len(s.Metadata)+2)
	for k, v := range s.Metadata {
		meta[k] = v
	}
	meta[MetaSchedule] = s.Name
	meta[MetaScheduleTick] = tick.UTC().Format(time.RFC3339Nano)
	return SubmitParams{Payload: s.Payload, Key: ScheduleKey(s.Name, tick), Priority: s.Priority,
		MaxAttempts: s.MaxAttempts, AttemptTimeout: s.AttemptTimeout, Metadata: meta, ConcurrencyKey: s.ConcurrencyKey}
}

// FirstFire is the first tick a schedule set (or resumed) at now fires: the first tick
// strictly after now. Errors: those of Rule.
func (s *Schedule) FirstFire(now time.Time) (time.Time, error) {
	rule, err := s.Rule()
	if err != nil {
		return time.Time{}, err
	}
	next := rule.Next(now)
	if next.IsZero() {
		return time.Time{}, Invalid("cron", s.Cron, "the expression matches no date in the next five years")
	}
	return next, nil
}

// String describes s's rule for listings: the cron expression (with its zone) or "every D".
func (s *Schedule) String() string {
	if s.Every != 0 {
		return "every " + s.Every.String()
	}
	if s.TimeZone != "" {
		return fmt.Sprintf("%s (%s)", s.Cron, s.TimeZone)
	}
	return s.Cron
}

// ErrScheduleChanged is a conditional ScheduleSet's answer (Schedule.Replacing) when the
// stored schedule is not the one expected; nothing changed. It never leaves the server.
var ErrScheduleChanged = errors.New("the schedule changed since it was read")

// CheckReplacing is the rule of a conditional ScheduleSet: nil when s is unconditional or
// the stored schedule's queue (storedQueue; exists false when there is none) is the one s
// expects, else ErrScheduleChanged.
func CheckReplacing(s *Schedule, storedQueue string, exists bool) error {
	if s.Replacing == nil {
		return nil
	}
	if want := *s.Replacing; (want == "") == !exists && (!exists || want == storedQueue) {
		return nil
	}
	return ErrScheduleChanged
}

// ScheduleNotFound is the ErrNotFound (code not_found) of a schedule that does not exist:
// "schedule NAMESPACE/NAME not found".
func ScheduleNotFound(namespace, name string) error {
	return &Error{Code: ErrNotFound.Code, Message: fmt.Sprintf("schedule %s/%s not found", namespace, Truncate(name))}
}

// ScheduleAdmit applies a queue's depth limit to n fires of one schedule in one pass (oldest
// first) when the queue holds queued invocations: fit of them are submitted, the rest are
// skipped (a schedule never waits for room, whatever the queue's OnFull, so maintenance
// never blocks) with reason saying why. Without a depth limit (MaxDepth 0) all fit. The
// rate limit and deadline cutoff do not apply to fires. queue is "namespace/queue", for the
// reason.
func ScheduleAdmit(a Admission, queue string, queued int64, n int) (fit int, reason string) {
	if a.MaxDepth <= 0 || queued+int64(n) <= a.MaxDepth {
		return n, ""
	}
	fit = int(max(0, min(int64(n), a.MaxDepth-queued)))
	return fit, fmt.Sprintf("queue %s full: %d queued of max depth %d", queue, queued, a.MaxDepth)
}

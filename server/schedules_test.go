package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestScheduleReplaceScoped (a fresh attacker's trial): a token scoped to queue q1 cannot
// replace its namespace's schedule of queue q2 by PUTting a q1 schedule under the same name;
// it answers not_found exactly as pausing that schedule does, and the stored schedule stays.
// The token still creates and replaces schedules of its own queue.
func TestScheduleReplaceScoped(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	path := "/v1/namespaces/team-a/schedules/"
	r := b.doJSON(t, "PUT", path+"s3", map[string]any{"queue": "q2", "cron": "0 3 * * *"}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	scoped, _ := b.mint(t, "team-a", "q1", 0, plane.PermissionSubmit, plane.PermissionRead, plane.PermissionConsume)

	put := b.doJSON(t, "PUT", path+"s3", map[string]any{"queue": "q1", "every": 1}, scoped)
	pause := b.doJSON(t, "POST", path+"s3/pause", map[string]any{}, scoped)
	require.Equal(t, 404, pause.status, "%s", pause.body)
	require.Equal(t, pause.status, put.status, "%s", put.body)
	require.Equal(t, string(pause.body), string(put.body), "the same answer as pause: the token learns nothing more")

	r = b.do(t, "GET", "/v1/schedules?namespace=team-a", "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	var list api.SchedulesResponse
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Schedules, 1)
	require.Equal(t, "q2", list.Schedules[0].Queue, "the admin's schedule is not replaced")
	require.Equal(t, "0 3 * * *", list.Schedules[0].Cron)

	// Its own queue: created, then replaced.
	for _, every := range []float64{1, 2} {
		r = b.doJSON(t, "PUT", path+"mine", map[string]any{"queue": "q1", "every": every}, scoped)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	// A q1 schedule the admin made is the token's to replace.
	r = b.doJSON(t, "PUT", path+"shared", map[string]any{"queue": "q1", "every": 5}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.doJSON(t, "PUT", path+"shared", map[string]any{"queue": "q1", "every": 7}, scoped)
	require.Equal(t, 200, r.status, "%s", r.body)
	// Moving its own schedule to a queue it does not cover is refused by the new queue.
	r = b.doJSON(t, "PUT", path+"mine", map[string]any{"queue": "q2", "every": 1}, scoped)
	require.Equal(t, 403, r.status, "%s", r.body)
}

// listThenCreate is a driver whose first ScheduleList, once armed, is followed at once by
// another client creating the schedule it was asked about: the interleaving of a token's
// replace check with a concurrent admin create.
type listThenCreate struct {
	plane.Driver
	once   sync.Once
	armed  chan struct{}
	create plane.Schedule
}

func (d *listThenCreate) ScheduleList(ctx context.Context, params *plane.ScheduleListParams) (*plane.SchedulePage, error) {
	list, err := d.Driver.ScheduleList(ctx, params)
	select {
	case <-d.armed:
		d.once.Do(func() {
			sc := d.create
			_, _ = d.Driver.ScheduleSet(ctx, &sc)
		})
	default:
	}
	return list, err
}

// TestScheduleReplaceRace: a token scoped to q1 PUTs a schedule name that does not exist yet
// while the admin creates that name for q2 between the token's check and its set. The set
// is conditional on what the check read, so the token's PUT is checked again and refused
// (not_found, as for any foreign schedule), and the admin's q2 schedule stands.
func TestScheduleReplaceRace(t *testing.T) {
	t.Parallel()
	d := &listThenCreate{armed: make(chan struct{}),
		create: plane.Schedule{Namespace: "team-a", Name: "race", Queue: "q2", Cron: "0 3 * * *"}}
	b := setupWrapped(t, &server.Config{AdminToken: adminSecret}, func(back plane.Driver) plane.Driver {
		d.Driver = back
		return d
	})
	scoped, _ := b.mint(t, "team-a", "q1", 0, plane.PermissionSubmit, plane.PermissionRead)
	close(d.armed)
	put := b.doJSON(t, "PUT", "/v1/namespaces/team-a/schedules/race", map[string]any{"queue": "q1", "every": 1}, scoped)
	require.Equal(t, 404, put.status, "%s", put.body)
	list, err := plane.ListSchedules(t.Context(), b.back, "team-a")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "q2", list[0].Queue, "the admin's schedule is not overwritten")
}

// TestSubmitScheduleKeyReserved (a new user's trial): a token that may submit to a queue
// cannot take a schedule's future tick key (schedule/NAME/TICK) with an ordinary submit to
// suppress or replace the fire: the server refuses it, code invalid with the rule, and the
// tick fires the schedule's payload.
func TestSubmitScheduleKeyReserved(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	r := b.doJSON(t, "PUT", "/v1/namespaces/team-a/schedules/legit", map[string]any{"queue": "sq", "every": 60, "payload": "GOOD"}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	var sc api.Schedule
	require.NoError(t, json.Unmarshal(r.body, &sc))
	scoped, _ := b.mint(t, "team-a", "sq", 0, plane.PermissionSubmit)
	r = b.doJSON(t, "POST", "/v1/namespaces/team-a/queues/sq/invocations",
		map[string]any{"key": plane.ScheduleKey("legit", sc.NextFire), "payload": "EVIL"}, scoped)
	require.Equal(t, 400, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"invalid"`)
	require.Contains(t, string(r.body), "reserved for the fires of schedules")
}

// TestScheduleListPages: GET /v1/schedules answers a page at a time (limit, after, next).
// A token scoped to q1 reads only q1's schedules, each once and in order, following next —
// also where the server's pages find none of its schedules (40 of q2 before them) and it
// answers an empty page with a cursor. Bad limits and cursors are invalid (400).
func TestScheduleListPages(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	var want, all []string
	for i := range 40 {
		name := fmt.Sprintf("a%02d", i)
		r := b.doJSON(t, "PUT", "/v1/namespaces/team-a/schedules/"+name, map[string]any{"queue": "q2", "every": 60}, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
		all = append(all, name)
	}
	for i := range 9 {
		name := fmt.Sprintf("b%02d", i)
		queue := []string{"q1", "q2"}[i%2]
		r := b.doJSON(t, "PUT", "/v1/namespaces/team-a/schedules/"+name, map[string]any{"queue": queue, "every": 60}, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
		if queue == "q1" {
			want = append(want, name)
		}
		all = append(all, name)
	}
	scoped, _ := b.mint(t, "team-a", "q1", 0, plane.PermissionRead)
	follow := func(token string, limit int) (names []string, pages int) {
		t.Helper()
		after := ""
		for {
			r := b.doJSON(t, "GET", fmt.Sprintf("/v1/schedules?namespace=team-a&limit=%d&after=%s", limit, after), nil, token)
			require.Equal(t, 200, r.status, "%s", r.body)
			var page api.SchedulesResponse
			require.NoError(t, json.Unmarshal(r.body, &page))
			require.LessOrEqual(t, len(page.Schedules), limit)
			for _, sc := range page.Schedules {
				names = append(names, sc.Name)
			}
			pages++
			require.Less(t, pages, 100, "the cursor moves on")
			if page.Next == "" {
				return names, pages
			}
			after = page.Next
		}
	}
	got, _ := follow(scoped, 2)
	require.Equal(t, want, got, "q1's schedules once each, in order")
	got, pages := follow(scoped, 1)
	require.Equal(t, want, got)
	// The plane fills a q1 token's page with q1's schedules only (QueueMatch): no page of
	// the 40 q2 schedules is answered, empty or not, and the last page has no cursor.
	require.Equal(t, len(want), pages, "a page per q1 schedule, none of q2's")
	got, pages = follow(adminSecret, 10)
	require.Equal(t, all, got)
	require.Equal(t, 5, pages)

	r := b.doJSON(t, "GET", "/v1/schedules?namespace=team-a", nil, adminSecret)
	var page api.SchedulesResponse
	require.NoError(t, json.Unmarshal(r.body, &page))
	require.Len(t, page.Schedules, len(all), "no limit: the default page (100) holds the 49")
	require.Equal(t, "", page.Next, "49 schedules fit in one default page")
	for _, bad := range []string{"limit=x", "limit=-1", "limit=1001", "after=nope", "after=a/b/c", "name=a00"} {
		r := b.doJSON(t, "GET", "/v1/schedules?"+bad, nil, adminSecret)
		require.Equal(t, 400, r.status, "%s: %s", bad, r.body)
		require.Contains(t, string(r.body), `"invalid"`, bad)
	}
}

// TestScheduleListCursorHidesOthers: the cursor of a page names the last schedule the plane
// read, so a scoped token's page that skipped other tenants' schedules must not give it in
// the clear: with 20 schedules of team-a before team-b's one, team-b's token (and a token of
// team-a's other queue) listing one at a time got next "team-a/secret-…" on the old code.
// Its cursor now names nothing, still leads to every schedule it covers, and a cursor
// altered or sealed by another server is invalid; the admin's cursor stays in the clear.
func TestScheduleListCursorHidesOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	for i := range 20 {
		r := b.doJSON(t, "PUT", fmt.Sprintf("/v1/namespaces/team-a/schedules/secret-%02d", i), map[string]any{"queue": "hidden", "every": 60}, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	r := b.doJSON(t, "PUT", "/v1/namespaces/team-b/schedules/mine", map[string]any{"queue": "q", "every": 60}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.doJSON(t, "PUT", "/v1/namespaces/team-a/schedules/visible", map[string]any{"queue": "q1", "every": 60}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.doJSON(t, "PUT", "/v1/namespaces/team-a/schedules/visible2", map[string]any{"queue": "q1", "every": 60}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	teamB, _ := b.mint(t, "team-b", "*", 0, plane.PermissionRead)
	q1, _ := b.mint(t, "team-a", "q1", 0, plane.PermissionRead)
	follow := func(token, query string) (names []string) {
		t.Helper()
		after := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "the cursor moves on")
			r := b.doJSON(t, "GET", "/v1/schedules?limit=1&"+query+"&after="+url.QueryEscape(after), nil, token)
			require.Equal(t, 200, r.status, "%s", r.body)
			require.NotContains(t, string(r.body), "secret", "nothing of the hidden schedules")
			require.NotContains(t, string(r.body), "hidden")
			var page api.SchedulesResponse
			require.NoError(t, json.Unmarshal(r.body, &page))
			for _, sc := range page.Schedules {
				names = append(names, sc.Namespace+"/"+sc.Name)
			}
			if page.Next == "" {
				return names
			}
			after = page.Next
		}
	}
	require.Equal(t, []string{"team-b/mine"}, follow(teamB, ""))
	require.Equal(t, []string{"team-a/visible", "team-a/visible2"}, follow(q1, "namespace=team-a"))

	r = b.doJSON(t, "GET", "/v1/schedules?limit=1&namespace=team-a", nil, q1) // visible, then a sealed cursor
	var page api.SchedulesResponse
	require.NoError(t, json.Unmarshal(r.body, &page))
	require.NotEmpty(t, page.Next)
	forged := page.Next[:len(page.Next)-2] + "AA"
	b.doJSON(t, "GET", "/v1/schedules?limit=1&namespace=team-a&after="+url.QueryEscape(forged), nil, q1).requireError(t, 400, "invalid")
	other := setup(t, &server.Config{AdminToken: "another-admin-secret"})
	other.doJSON(t, "GET", "/v1/schedules?limit=1&after="+url.QueryEscape(page.Next), nil, "another-admin-secret").requireError(t, 400, "invalid")

	r = b.doJSON(t, "GET", "/v1/schedules?limit=1", nil, adminSecret)
	require.NoError(t, json.Unmarshal(r.body, &page))
	require.Equal(t, "team-a/secret-00", page.Next, "the admin's cursor is the plain one")
}

// TestScheduleListTellsNothingOfOtherNamespaces: a scoped token's listing reads nothing of a
// namespace it does not cover, so its answer is the same whether that namespace holds no
// schedule or many. On the old code, team-a's token listing team-b's namespace (or every
// namespace) one at a time got an empty page with a sealed cursor once team-b held more
// than 8 schedules (the pages one request reads), and none when it held none: following
// the cursor counted team-b's schedules. Its own schedules still list in full.
func TestScheduleListTellsNothingOfOtherNamespaces(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	teamA, _ := b.mint(t, "team-a", "*", 0, plane.PermissionRead)
	glob, _ := b.mint(t, "team-[ac]", "*", 0, plane.PermissionRead)
	dataOnly, _ := b.mint(t, "*", "*", 0, plane.PermissionDataRead)
	list := func(token, query string) api.SchedulesResponse {
		t.Helper()
		r := b.doJSON(t, "GET", "/v1/schedules?"+query, nil, token)
		require.Equal(t, 200, r.status, "%s", r.body)
		var page api.SchedulesResponse
		require.NoError(t, json.Unmarshal(r.body, &page))
		return page
	}
	before := map[string]api.SchedulesResponse{}
	queries := []string{"limit=1&namespace=team-b", "limit=1", "limit=1&namespace=team-zz"}
	for _, q := range queries {
		before[q] = list(teamA, q)
	}
	for i := range 20 {
		r := b.doJSON(t, "PUT", fmt.Sprintf("/v1/namespaces/team-b/schedules/s%02d", i), map[string]any{"queue": "q", "every": 60}, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	r := b.doJSON(t, "PUT", "/v1/namespaces/team-a/schedules/mine", map[string]any{"queue": "q", "every": 60}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	for _, q := range []string{queries[0], queries[2]} {
		require.Equal(t, before[q], list(teamA, q), "%s: the same answer whatever team-b holds", q)
	}
	for _, token := range []string{teamA, dataOnly} {
		require.Empty(t, list(token, "limit=1&namespace=team-b").Next, "nothing read of team-b")
	}
	page := list(teamA, "limit=1")
	require.Equal(t, "", page.Next, "team-a's token reads only team-a")
	require.Len(t, page.Schedules, 1)
	require.Equal(t, "mine", page.Schedules[0].Name)
	page = list(glob, "limit=1&namespace=team-b")
	require.Empty(t, page.Schedules)
	require.Equal(t, "", page.Next, "a glob that does not cover team-b reads nothing of it")
	page = list(glob, "limit=1&namespace=team-a")
	require.Equal(t, []string{"mine"}, []string{page.Schedules[0].Name})
}

// TestScheduleListOfGlobTokenTellsNothingOfOtherNamespaces: a token whose namespace is a
// glob (team-*, team-[ac]) lists every namespace it matches, and its pages and cursors are
// the same whatever the namespaces it does not match hold: the plane reads only the
// namespaces its pattern matches (plane.ScheduleListParams.NamespaceMatch). On the old code
// its listing read every namespace: 20 schedules in "other" (before team-a in byte order)
// turned its first page from team-a's schedule into an empty page with a sealed cursor, and
// following the cursors counted them.
func TestScheduleListOfGlobTokenTellsNothingOfOtherNamespaces(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	star, _ := b.mint(t, "team-*", "*", 0, plane.PermissionRead)
	ac, _ := b.mint(t, "team-[ac]", "*", 0, plane.PermissionRead)
	put := func(ns, name string) { putSchedule(t, b, ns, "q", name) }
	put("team-a", "m1")
	put("team-a", "m2")
	put("team-c", "m3")
	pages := func(token string) []string {
		return schedulePages(t, b, token, func(sc api.Schedule) string { return sc.Namespace + "/" + sc.Name })
	}
	beforeStar, beforeAC := pages(star), pages(ac)
	require.Equal(t, []string{"team-a/m1 next=true", "team-a/m2 next=true", "team-c/m3 next=false"}, beforeAC)
	for i := range 20 {
		put("other", fmt.Sprintf("s%02d", i))
	}
	require.Equal(t, beforeStar, pages(star), "team-*: the same pages whatever other holds")
	require.Equal(t, beforeAC, pages(ac), "team-[ac]: the same pages whatever other holds")
	for i := range 20 {
		put("team-b", fmt.Sprintf("s%02d", i))
	}
	require.Equal(t, beforeAC, pages(ac), "team-[ac]: the same pages whatever team-b holds")
	require.Len(t, pages(star), 23, "team-* covers team-b")
}

// TestScheduleListOfQueueTokenTellsNothingOfOtherQueues: within its namespace a token scoped
// to some queues (team-a/q1, team-a/q[13]) lists the same pages, cursors included, whatever
// the namespace's other queues hold. Before, the listing read the namespace's schedules and
// skipped the other queues' ones after reading them, and a page that read
// scheduleListPages plane pages without filling answered a cursor: following it counted the
// schedules of team-a/q2.
func TestScheduleListOfQueueTokenTellsNothingOfOtherQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	q1, _ := b.mint(t, "team-a", "q1", 0, plane.PermissionRead)
	q13, _ := b.mint(t, "team-a", "q[13]", 0, plane.PermissionRead)
	put := func(queue, name string) { putSchedule(t, b, "team-a", queue, name) }
	put("q1", "a1")
	put("q1", "z1")
	put("q3", "z3")
	pages := func(token string) []string {
		return schedulePages(t, b, token, func(sc api.Schedule) string { return sc.Queue + "/" + sc.Name })
	}
	before1, before13 := pages(q1), pages(q13)
	require.Equal(t, []string{"q1/a1 next=true", "q1/z1 next=false"}, before1)
	require.Equal(t, []string{"q1/a1 next=true", "q1/z1 next=true", "q3/z3 next=false"}, before13)
	for i := range 20 { // between a1 and z1 in name order, on another queue
		put("q2", fmt.Sprintf("m%02d", i))
	}
	require.Equal(t, before1, pages(q1), "team-a/q1: the same pages whatever q2 holds")
	require.Equal(t, before13, pages(q13), "team-a/q[13]: the same pages whatever q2 holds")
}

// putSchedule stores schedule name of namespace ns on queue, every 60 s, with the admin
// token.
func putSchedule(t *testing.T, b *testBundle, ns, queue, name string) {
	t.Helper()
	r := b.doJSON(t, "PUT", "/v1/namespaces/"+ns+"/schedules/"+name, map[string]any{"queue": queue, "every": 60}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
}

// schedulePages lists every schedule token sees, limit 1 a page, following the cursors:
// each page's schedules (as name gives them) and whether it had a cursor.
func schedulePages(t *testing.T, b *testBundle, token string, name func(api.Schedule) string) []string {
	t.Helper()
	var out []string
	after := ""
	for range 100 {
		r := b.doJSON(t, "GET", "/v1/schedules?limit=1&after="+url.QueryEscape(after), nil, token)
		require.Equal(t, 200, r.status, "%s", r.body)
		var page api.SchedulesResponse
		require.NoError(t, json.Unmarshal(r.body, &page))
		line := ""
		for _, sc := range page.Schedules {
			line += name(sc) + " "
		}
		out = append(out, line+fmt.Sprintf("next=%t", page.Next != ""))
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
	t.Fatal("the cursor never ends")
	return nil
}

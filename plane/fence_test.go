package plane

import (
	"testing"
	"time"
)

// TestHolds: the fencing check every driver applies before a settle, heartbeat or post.
func TestHolds(t *testing.T) {
	now := time.UnixMilli(10_000)
	later, earlier := now.Add(time.Second), now.Add(-time.Second)
	cases := []struct {
		name             string
		running          bool
		stored, token    string
		expires, overdue time.Time
		want             Fence
	}{
		{"held", true, "a", "a", later, time.Time{}, FenceHeld},
		{"held within the attempt timeout", true, "a", "a", later, later, FenceHeld},
		{"not running", false, "a", "a", later, time.Time{}, FenceLost},
		{"no stored token", true, "", "", later, time.Time{}, FenceLost},
		{"another attempt's token", true, "a", "b", later, time.Time{}, FenceLost},
		{"lease ran out", true, "a", "a", earlier, time.Time{}, FenceExpired},
		{"lease ends now", true, "a", "a", now, time.Time{}, FenceExpired},
		{"attempt overdue", true, "a", "a", later, earlier, FenceOverdue},
		{"a stale token never ends the attempt", true, "a", "b", earlier, earlier, FenceLost},
	}
	for _, c := range cases {
		if got := Holds(c.running, c.stored, c.token, c.expires, c.overdue, now); got != c.want {
			t.Errorf("%s: Holds = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestScopeCovers: a token's scope, as the planes check it on the rows they lock.
func TestScopeCovers(t *testing.T) {
	cases := []struct {
		scope     Scope
		ns, queue string
		want      bool
	}{
		{Scope{}, "any", "thing", true},
		{Scope{Namespace: "*", Queue: "*"}, "any", "thing", true},
		{Scope{Namespace: "ml", Queue: "train-*"}, "ml", "train-7", true},
		{Scope{Namespace: "ml", Queue: "train-*"}, "ml", "eval-1", false},
		{Scope{Namespace: "ml", Queue: "train-*"}, "default", "train-7", false},
		{Scope{Namespace: "default", Queue: "jobs"}, "default", "jobs", true},
		{Scope{Namespace: "default", Queue: "[bad"}, "default", "jobs", false},
	}
	for _, c := range cases {
		if got := c.scope.Covers(c.ns, c.queue); got != c.want {
			t.Errorf("%+v covers %s/%s = %v, want %v", c.scope, c.ns, c.queue, got, c.want)
		}
	}
}

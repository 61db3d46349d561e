package plane

import (
	"cmp"
	"time"
)

// LeaseHeldUntil is when a lease of ttl (0: LeaseTTLDefault) ends as its holder reckons it,
// on its own clock: from is the holder's reading of time.Now, monotonic part included, when
// the claim's answer arrived or when the heartbeat the plane accepted was sent. A holder
// never compares the plane's LeaseExpiresAt, read on the plane's clock, with its own
// machine's clock, which may be off from the plane's by any amount (docs/operations.md,
// "One clock"). The SDK's execution path (the handler's stop, its settle's repeats) and
// the HTTP plane's repeats of settles and heartbeats both reckon with it.
func LeaseHeldUntil(from time.Time, ttl time.Duration) time.Time {
	return from.Add(cmp.Or(ttl, LeaseTTLDefault))
}

// Clock is a Driver that tells the time on the plane's clock: the one its leases,
// deadlines, due times and tokens' expiries are stamped and compared on (the SQLite plane:
// its Config.Now; the PostgreSQL plane: the database's clock unless Config.Now is set).
type Clock interface {
	Now() time.Time
}

// ClockOf returns the plane's clock of drv when drv is a Clock, else time.Now (a plane
// over HTTP: the server stamps and compares times on its own).
func ClockOf(drv any) func() time.Time {
	if c, ok := drv.(Clock); ok {
		return c.Now
	}
	return time.Now
}

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

package sqliteplane

import (
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// BenchmarkBurndown64: planetest.Burndown64 on a file with synchronous=FULL (pgplane's
// benchmark of the same name): 64 workers claim and ack b.N queued jobs one at a time.
func BenchmarkBurndown64(b *testing.B) { planetest.Burndown64(b, benchDriver(b), 0, 0, nil) }

// BenchmarkBurndown64Keys: BenchmarkBurndown64 with every job under one of 100
// concurrency keys, limit 4 each (issue 27's burn-down with keys).
func BenchmarkBurndown64Keys(b *testing.B) { planetest.Burndown64(b, benchDriver(b), 100, 4, nil) }

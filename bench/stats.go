package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// metric is one figure a workload measures in each run.
type metric struct {
	name   string // e.g. "jobs/s", "handler start p50 (ms)"
	higher bool   // higher is better
}

// measurement is a metric's values over a system's runs, or why it has none.
type measurement struct {
	values []float64
	na     string // "n/a: …" reason, or an error
	err    bool   // na is an error, not a limitation
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the q-quantile (0 < q ≤ 1) of sorted by the nearest-rank method.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// formatValue prints v with thousands separators above 100 and three significant digits
// below.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return thousands(int64(math.Round(v)))
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ratio returns Lakeshore's median over the peer's, or "—" when it means nothing.
func ratio(ours, theirs float64) string {
	if math.IsNaN(ours) || math.IsNaN(theirs) || theirs == 0 || ours == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", ours/theirs)
}

func formatRange(v []float64) string {
	if len(v) < 2 {
		return ""
	}
	return formatValue(slices.Min(v)) + "–" + formatValue(slices.Max(v))
}

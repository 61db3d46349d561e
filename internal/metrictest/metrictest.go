// Package metrictest reads Prometheus metrics in tests: the sum of a metric's samples over
// the label values a test names, for the packages whose tests count what a component did
// through its metrics (provider, cmd/lakeshore).
package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sum gathers reg and returns the sum of the counter and gauge values of the samples of
// metric name whose labels hold every pair of labels (name, value, name, value, …; an odd
// last name is ignored): all its samples when labels is empty; 0 when there are none. It
// fails t when reg cannot be gathered.
func Sum(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	sample:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue sample
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

package provider

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a supervisor's Prometheus metrics. Labels: namespace, queue, provider, and
// what the metric's help says.
type Metrics struct {
	launches  *prometheus.CounterVec
	stops     *prometheus.CounterVec
	failures  *prometheus.CounterVec
	decisions *prometheus.CounterVec
	errors    *prometheus.CounterVec
	want      *prometheus.GaugeVec
	live      *prometheus.GaugeVec
	// shapeWant, shapeLive and unlaunchable are by shape too ("default" for the default shape).
	shapeWant    *prometheus.GaugeVec
	shapeLive    *prometheus.GaugeVec
	unlaunchable *prometheus.GaugeVec
	tick         prometheus.Histogram
}

// NewMetrics makes a supervisor's metrics and registers them with reg (nil: not
// registered, still counted).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	q := []string{"namespace", "queue", "provider"}
	m := &Metrics{
		launches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lakeshore_provider_launches_total",
			Help: "Worker launches asked of a provider, by result (ok, error)."}, append(q, "result")),
		stops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lakeshore_provider_stops_total",
			Help: "Workers stopped by the supervisor, by reason (idle, register_timeout)."}, append(q, "reason")),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lakeshore_provider_failures_total",
			Help: "Failed workers, by kind (launch: the provider refused; ended: it died without a stop; register_timeout: it never registered)."}, append(q, "kind")),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lakeshore_provider_decisions_total",
			Help: "Scaling decisions that launch or stop workers, by outcome (acted, dry_run)."}, append(q, "outcome")),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lakeshore_provider_errors_total",
			Help: "Provider calls that failed, by operation (resolve, check, list, stop)."}, []string{"provider", "operation"}),
		want: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakeshore_provider_workers_wanted",
			Help: "Workers the launch policy wants for the queue's backlog."}, q),
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakeshore_provider_workers_live",
			Help: "Workers registered plus launches pending, for the queue."}, q),
		shapeWant: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakeshore_provider_shape_workers_wanted",
			Help: "Workers the launch policy wants for one shape of the queue (shape=\"default\" for jobs without a requirement)."}, append(q, "shape")),
		shapeLive: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakeshore_provider_shape_workers_live",
			Help: "Workers registered plus launches pending or stopping, for one shape of the queue."}, append(q, "shape")),
		unlaunchable: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakeshore_provider_shape_unlaunchable",
			Help: "1 while no launch of the provider can offer the shape (its jobs wait for a worker started otherwise; the log says why), else 0."}, append(q, "shape")),
		tick: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lakeshore_provider_tick_seconds",
			Help: "Time of one supervisor tick over every queue, until the providers' work it started ended.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9)}),
	}
	if reg != nil {
		reg.MustRegister(m.launches, m.stops, m.failures, m.decisions, m.errors, m.want, m.live, m.shapeWant, m.shapeLive, m.unlaunchable, m.tick)
	}
	return m
}

// forget drops a queue's gauges when it loses its provider or its lease.
func (m *Metrics) forget(k queueKey) {
	match := prometheus.Labels{"namespace": k.namespace, "queue": k.queue}
	m.want.DeletePartialMatch(match)
	m.live.DeletePartialMatch(match)
	m.shapeWant.DeletePartialMatch(match)
	m.shapeLive.DeletePartialMatch(match)
	m.unlaunchable.DeletePartialMatch(match)
}

package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// metrics are the server's Prometheus metrics, registered with Config.Registerer.
type metrics struct {
	requests  *prometheus.HistogramVec
	submits   *prometheus.CounterVec
	claims    *prometheus.CounterVec
	settles   *prometheus.CounterVec
	frames    prometheus.Counter
	longPolls prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, drv plane.Driver) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lakeshore_http_request_duration_seconds",
			Help:    "Latency of HTTP requests by route and status (long-polls include their wait).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "status"}),
		submits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakeshore_submits_total", Help: "Invocations enqueued over HTTP (existing keys and ids not counted).",
		}, []string{"namespace", "queue"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakeshore_claims_total", Help: "Invocations claimed over HTTP.",
		}, []string{"namespace", "queue"}),
		settles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakeshore_settles_total", Help: "Invocations settled over HTTP, by outcome.",
		}, []string{"outcome"}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lakeshore_frames_posted_total", Help: "Frames posted over HTTP.",
		}),
		longPolls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lakeshore_http_long_polls_open", Help: "Long-polls and streams open now.",
		}),
	}
	reg.MustRegister(m.requests, m.submits, m.claims, m.settles, m.frames, m.longPolls, &depthCollector{drv: drv}, &demandCollector{drv: drv})
	return m
}

func (m *metrics) observe(route, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
}

// depthCollector reports queue depth by state, read from the plane at scrape time.
type depthCollector struct {
	drv plane.Driver
}

var depthDesc = prometheus.NewDesc("lakeshore_queue_invocations",
	"Invocations of each queue by state (queue depth is state=queued).", []string{"namespace", "queue", "state"}, nil)

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- depthDesc }

func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stats, err := c.drv.QueueStatsList(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(depthDesc, err)
		return
	}
	for _, st := range stats {
		for _, state := range plane.States() {
			ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(st.Counts[state]), st.Namespace, st.Queue, string(state))
		}
	}
}

// handleMetrics serves the metrics scoped to the token: a series labelled with a namespace
// (and queue) only when p holds some permission there; a series without a namespace label
// (the server's own: HTTP latency by route and status, long-polls open, settles by
// outcome, frames posted, the provider supervisor's ticks and errors) only to a token that
// covers every namespace (coversSeries), since it counts every tenant's traffic.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, p *principal) error {
	if p.all {
		s.metricsHandler(s.cfg.Gatherer).ServeHTTP(w, r)
		return nil
	}
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := s.cfg.Gatherer.Gather()
		out := fams[:0]
		for _, f := range fams {
			ms := f.Metric[:0]
			for _, m := range f.Metric {
				if p.coversSeries(m.GetLabel()) {
					ms = append(ms, m)
				}
			}
			f.Metric = ms
			if len(ms) > 0 {
				out = append(out, f)
			}
		}
		return out, err
	})
	s.metricsHandler(g).ServeHTTP(w, r)
	return nil
}

// seriesPerms: any permission on a queue shows its series, data queues' included.
var seriesPerms = append(append([]plane.Permission(nil), anyPerms...), plane.PermissionDataPut, plane.PermissionDataRead)

// coversSeries reports whether p may see a series with these labels: one without a
// namespace label only when p covers every namespace and queue (the admin token, auth off,
// a token for "*" / "*"): such a series sums every tenant's requests, and a tenant token
// would read another's traffic in it (its routes' counts and statuses, its frames, when
// the operator mints tokens); else when p holds any permission on its namespace (and
// queue, when labelled).
func (p *principal) coversSeries(labels []*dto.LabelPair) bool {
	var ns, q string
	var hasNS, hasQ bool
	for _, l := range labels {
		switch l.GetName() {
		case "namespace":
			ns, hasNS = l.GetValue(), true
		case "queue":
			q, hasQ = l.GetValue(), true
		}
	}
	switch {
	case !hasNS:
		return !p.scoped()
	case hasQ:
		return p.allows(ns, q, seriesPerms...)
	}
	return p.allowsNamespace(ns, seriesPerms...)
}

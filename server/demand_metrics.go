package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// demandCollector reports the demand per (queue, shape) (Driver.DemandList), read from the
// plane at scrape time: what an autoscaler scaling workers by shape follows. The default
// shape's series carry shape="default".
type demandCollector struct {
	drv plane.Driver
}

var (
	demandLabels      = []string{"namespace", "queue", "shape"}
	demandQueuedDesc  = prometheus.NewDesc("lakeshore_demand_queued", "Queued invocations of each (queue, shape), delayed ones included; shape=\"default\" for jobs without a requirement.", demandLabels, nil)
	demandRunningDesc = prometheus.NewDesc("lakeshore_demand_running", "Running invocations of each (queue, shape).", demandLabels, nil)
	demandOldestDesc  = prometheus.NewDesc("lakeshore_demand_oldest_ready_seconds", "How long the first claimable job (by id) of each (queue, shape) has been claimable; 0 when none is.", demandLabels, nil)
)

func (c *demandCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- demandQueuedDesc
	ch <- demandRunningDesc
	ch <- demandOldestDesc
}

func (c *demandCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := c.drv.DemandList(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(demandQueuedDesc, err)
		return
	}
	for _, d := range list {
		shape := d.Shape
		if shape == "" {
			shape = "default"
		}
		ch <- prometheus.MustNewConstMetric(demandQueuedDesc, prometheus.GaugeValue, float64(d.Queued), d.Namespace, d.Queue, shape)
		ch <- prometheus.MustNewConstMetric(demandRunningDesc, prometheus.GaugeValue, float64(d.Running), d.Namespace, d.Queue, shape)
		ch <- prometheus.MustNewConstMetric(demandOldestDesc, prometheus.GaugeValue, d.OldestReady.Seconds(), d.Namespace, d.Queue, shape)
	}
}

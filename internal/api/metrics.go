package api

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// MetricRequestDuration is each request's time in the instance's handlers, from the first
// middleware to the answer written into net/http's buffer, by route and status code: what the
// instance itself adds to an answer's latency. Reading the request before it and sending the
// answer after it are net/http's and the kernel's; a latency a client sees beyond it was spent
// in nginx, the network, or waiting for a core.
const MetricRequestDuration = "seckill_http_request_duration_seconds"

// RouteUnmatched is the route label of a request no route took (404 not_found, 405).
const RouteUnmatched = "unmatched"

// Metrics times the HTTP requests.
type Metrics struct {
	duration *prometheus.HistogramVec
}

// NewMetrics creates the HTTP metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricRequestDuration,
		Help:    "Time of each request in the instance's handlers, from the first middleware to the answer written, by route (method and path pattern, or unmatched) and status code.",
		Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10},
	}, []string{"route", "code"})}
	reg.MustRegister(m.duration)
	return m
}

// observe times each request. The route label is the method and gin's path pattern, a bounded
// set: a client's path or method never becomes a label of its own.
func (m *Metrics) observe() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := RouteUnmatched
		if p := c.FullPath(); p != "" {
			route = c.Request.Method + " " + p
		}
		m.duration.WithLabelValues(route, strconv.Itoa(c.Writer.Status())).Observe(time.Since(start).Seconds())
	}
}

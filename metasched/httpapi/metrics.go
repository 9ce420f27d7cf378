package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/metasched/metasched/internal/httpx"
)

// requestDurations returns the histogram of the requests served
// (metasched_api_request_duration_seconds), registered in reg: the one
// already there when another server of the same daemon registered it.
func requestDurations(reg prometheus.Registerer) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "metasched_api_request_duration_seconds",
		Help:    "Duration of the HTTP requests served, by method, route (the ServeMux pattern) and status code.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "route", "code"})
	if err := reg.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(*prometheus.HistogramVec); ok {
				return old
			}
		}
		panic("httpapi: register the request durations: " + err.Error())
	}
	return h
}

// metricsHandler serves reg in the Prometheus exposition formats.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg, // counts its own errors (promhttp_metric_handler_errors_total)
	})
}

// instrument times every request next serves in requests. The route label
// is the pattern the (innermost) ServeMux matched, read from the request
// after next ran; a request no pattern matched has "unmatched".
func instrument(requests *prometheus.HistogramVec, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &httpx.StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		requests.WithLabelValues(methodLabel(r.Method), route, strconv.Itoa(sw.Status())).Observe(time.Since(start).Seconds())
	})
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

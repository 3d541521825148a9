package main

import (
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// boltMetrics are the bbolt store's Prometheus series: it is the store's
// bolt.Observer, and reads the file's size at scrape time.
type boltMetrics struct {
	commitTook prometheus.Histogram
	writes     prometheus.Histogram
	errors     *prometheus.CounterVec
	sweepPause prometheus.Histogram
	damaged    prometheus.Counter
	checkFail  prometheus.Counter
}

var _ bolt.Observer = (*boltMetrics)(nil)

// newBoltMetrics registers the series of the store file at path on reg.
func newBoltMetrics(reg prometheus.Registerer, path string) (*boltMetrics, error) {
	latency := []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	m := &boltMetrics{
		commitTook: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "n8n_guard_store_commit_duration_seconds",
			Help:    "Time bbolt took to commit one write transaction of the store (writing and syncing its pages).",
			Buckets: latency,
		}),
		writes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "n8n_guard_store_commit_writes",
			Help:    "Writes (requests' changes, sweep batches) made durable by one commit.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8), // 1 … 16384
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_store_errors_total",
			Help: "Writes the store file refused (disk full, I/O error), by the step that failed; each is also a log line.",
		}, []string{"op"}),
		sweepPause: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "n8n_guard_sweep_pause_seconds",
			Help:    "Time one retention-sweep batch held the store's writer; writes queued behind it waited that long.",
			Buckets: latency,
		}),
		damaged: newDamagedCounter(),
		checkFail: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "n8n_guard_store_background_check_failures_total",
			Help: "Whole-file checks after start that found damage in the store file and stopped its writes; each is also a log line.",
		}),
	}
	for _, op := range bolt.StorageOps() { // at 0 from start: increase() sees the first error
		m.errors.WithLabelValues(op)
	}
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "n8n_guard_store_file_bytes",
		Help: "Size of the bbolt store file on disk.",
	}, func() float64 {
		fi, err := os.Stat(path)
		if err != nil {
			return 0
		}
		return float64(fi.Size())
	})
	if err := prom.Register(reg, m.commitTook, m.writes, m.errors, m.sweepPause, m.damaged, m.checkFail, size); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *boltMetrics) Committed(writes int, took time.Duration) {
	m.commitTook.Observe(took.Seconds())
	m.writes.Observe(float64(writes))
}

func (m *boltMetrics) StorageError(op string, _ error) { m.errors.WithLabelValues(op).Inc() }

func (m *boltMetrics) SweepPaused(took time.Duration) { m.sweepPause.Observe(took.Seconds()) }

func (m *boltMetrics) RecordDamaged() { m.damaged.Inc() }

func (m *boltMetrics) BackgroundCheckFailed() { m.checkFail.Inc() }

// newDamagedCounter is the series of records that failed their checksum,
// on either store.
func newDamagedCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "n8n_guard_records_damaged_total",
		Help: "Stored records found failing their checksum (once per record and process); their keys answer record_damaged. Each is also a log line naming the key.",
	})
}

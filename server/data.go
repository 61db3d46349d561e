package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// This file holds the data queues of the server (package persist over HTTP): where they
// live, how they are opened and closed, and how their errors are written. The handlers are
// in data_handlers.go, the Arrow and record conversions in data_records.go.

// DataStores opens and lists the data queues a server serves. Config.DataStores sets
// it; without it the server keeps file stores under Config.DataDir. Names reach it
// checked by plane.ValidateName. Its stores must keep namespaces apart: a queue of one
// namespace never shares a row with the queue of the same name in another.
type DataStores interface {
	// Open opens data queue queue of namespace, creating it if needed when create is
	// true (puts); when it is false (every other route), a queue that does not exist is
	// a *persist.NotFoundError naming it (Queue) and nothing is created. The server
	// keeps at most Config.MaxOpenDataQueues stores open, one per (namespace, queue),
	// closing the least recently used idle one to open another and any idle for
	// Config.DataQueueIdle, and closes the rest at Server.Close.
	Open(ctx context.Context, namespace, queue string, create bool) (persist.Store, error)
	// List returns the names of the data queues of namespace, sorted ([] for none). The
	// server also counts them against Config.MaxDataQueuesPerNamespace before a put
	// creates a queue, so it lists every queue the store holds, open or not.
	List(ctx context.Context, namespace string) ([]string, error)
}

// fileDataStores are the file stores of a server under root/{namespace}/{queue}/.
type fileDataStores struct {
	root string
	cfg  *persist.Config
}

func (f *fileDataStores) Open(ctx context.Context, namespace, queue string, create bool) (persist.Store, error) {
	cfg := persist.Config{}
	if f.cfg != nil {
		cfg = *f.cfg
	}
	cfg.Dir = filepath.Join(f.root, namespace)
	cfg.Existing = !create
	if !create {
		if _, err := os.Stat(cfg.Dir); errors.Is(err, os.ErrNotExist) {
			return nil, &persist.NotFoundError{Queue: queue}
		}
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	return filestore.Open(ctx, queue, &cfg)
}

// List returns the directories under the namespace's root.
func (f *fileDataStores) List(_ context.Context, namespace string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(f.root, namespace))
	if errors.Is(err, os.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, e := range ents {
		if e.IsDir() && plane.ValidateName("queue name", e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// dataQueues opens the data queues of a server lazily, one persist.Store per (namespace,
// queue) shared by every request, from stores (nil: the server serves no data queues).
// At most maxOpen are open (or opening, or closing) at once: to open another, the least
// recently used one that no request holds is closed first; when every one is held, the
// request is refused with 503 too_many_long_polls (the holders are long-polls and streams). A
// queue no request has held for idle is closed by the janitor. So no tenant, by naming
// many queues, holds more than maxOpen stores' files.
type dataQueues struct {
	stores  DataStores
	log     *slog.Logger
	maxOpen int
	idle    time.Duration

	metrics *dataMetrics

	mu      sync.Mutex
	open    map[string]*dataQueue
	busy    map[string]chan struct{} // keys being opened or closed, closed when done
	opening int                      // keys being opened (counted against maxOpen)
	closing map[string]chan struct{} // evicted queues whose stores are closing (counted against maxOpen), closed when done
	closed  bool
	janitor bool // the janitor runs
	stop    chan struct{}
	bg      sync.WaitGroup // closes of evicted queues, the janitor
}

// dataMetrics count what the data routes moved, per namespace and queue (scoped per token
// like every series with a namespace label).
type dataMetrics struct {
	put  *prometheus.CounterVec // records put (puts, field updates, KV puts)
	read *prometheus.CounterVec // rows answered by reads, streams and GetData
	meta *prometheus.CounterVec // samples handed out by GetMeta
}

func newDataMetrics(reg prometheus.Registerer, d *dataQueues) *dataMetrics {
	m := &dataMetrics{
		put: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakeshore_data_records_put_total", Help: "Records put into data queues over HTTP (puts, field updates, KV puts).",
		}, []string{"namespace", "queue"}),
		read: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakeshore_data_rows_read_total", Help: "Rows of data queues answered over HTTP (reads, streams, GetData).",
		}, []string{"namespace", "queue"}),
		meta: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakeshore_data_samples_handed_out_total", Help: "Samples of data queues handed out by GetMeta over HTTP.",
		}, []string{"namespace", "queue"}),
	}
	reg.MustRegister(m.put, m.read, m.meta, &dataStatsCollector{d: d})
	return m
}

// The series of dataStatsCollector, read from the Stats of every data queue this server
// has open, at scrape time.
var (
	dataTailRowsDesc = prometheus.NewDesc("lakeshore_data_tail_rows",
		"Rows (and field updates) of a data queue in its durable tail, not yet flushed into fragments (shared by every server of the queue).",
		[]string{"namespace", "queue"}, nil)
	dataFlushFailuresDesc = prometheus.NewDesc("lakeshore_data_flush_failures_total",
		"Flushes of a data queue by this server that failed, the rows staying durable in the tail (an unreachable object store, a full disk).",
		[]string{"namespace", "queue"}, nil)
	dataLastFlushDesc = prometheus.NewDesc("lakeshore_data_last_flush_timestamp_seconds",
		"When this server last completed a flush of a data queue (Unix seconds; absent before the first).",
		[]string{"namespace", "queue"}, nil)
	dataStaleDroppedDesc = prometheus.NewDesc("lakeshore_data_stale_dropped_total",
		"Records of a data queue dropped as stale by staleness-bounded reads, all tasks (shared by every server of the queue).",
		[]string{"namespace", "queue"}, nil)
	dataGroupsDroppedDesc = prometheus.NewDesc("lakeshore_data_groups_dropped_total",
		"Groups of a data queue dropped by GRPO's zero-variance filter, its straggler bound or DropGroup, all tasks (shared by every server of the queue).",
		[]string{"namespace", "queue"}, nil)
	dataSamplesUnusedDesc = prometheus.NewDesc("lakeshore_data_samples_unused_total",
		"Samples of over-sampled GRPO groups of a data queue left unused, all tasks (shared by every server of the queue).",
		[]string{"namespace", "queue"}, nil)
)

// dataStatsCollector reports the flush health of the open data queues: a tail that
// grows while flush failures climb is the alert that the object store (or disk) is away.
type dataStatsCollector struct{ d *dataQueues }

func (c *dataStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dataTailRowsDesc
	ch <- dataFlushFailuresDesc
	ch <- dataLastFlushDesc
	ch <- dataStaleDroppedDesc
	ch <- dataGroupsDroppedDesc
	ch <- dataSamplesUnusedDesc
}

func (c *dataStatsCollector) Collect(ch chan<- prometheus.Metric) {
	c.d.mu.Lock()
	open := make(map[string]*dataQueue, len(c.d.open))
	for k, q := range c.d.open {
		open[k] = q
	}
	c.d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for key, q := range open {
		ns, queue, _ := strings.Cut(key, "/")
		st, err := q.store.Stats(ctx)
		if err != nil {
			if !errors.Is(err, persist.ErrClosed) {
				ch <- prometheus.NewInvalidMetric(dataTailRowsDesc, fmt.Errorf("data queue %s: %w", key, err))
			}
			continue
		}
		ch <- prometheus.MustNewConstMetric(dataTailRowsDesc, prometheus.GaugeValue, float64(st.TailRows), ns, queue)
		ch <- prometheus.MustNewConstMetric(dataFlushFailuresDesc, prometheus.CounterValue, float64(st.FlushFailures), ns, queue)
		ch <- prometheus.MustNewConstMetric(dataStaleDroppedDesc, prometheus.CounterValue, float64(st.StaleDropped), ns, queue)
		ch <- prometheus.MustNewConstMetric(dataGroupsDroppedDesc, prometheus.CounterValue, float64(st.GroupsDropped), ns, queue)
		ch <- prometheus.MustNewConstMetric(dataSamplesUnusedDesc, prometheus.CounterValue, float64(st.SamplesUnused), ns, queue)
		if !st.LastFlush.IsZero() {
			ch <- prometheus.MustNewConstMetric(dataLastFlushDesc, prometheus.GaugeValue, float64(st.LastFlush.UnixNano())/1e9, ns, queue)
		}
	}
}

// count adds n to the counter c of the request's namespace and queue.
func count(c *prometheus.CounterVec, r *http.Request, n int) {
	if n > 0 {
		c.WithLabelValues(r.PathValue("namespace"), r.PathValue("queue")).Add(float64(n))
	}
}

// dataQueue is one open data queue and its change version.
type dataQueue struct {
	key   string // namespace/queue
	store persist.Store
	// queue is the SDK over store, kept while the store is open: Replay keeps the
	// window's weights in it between requests.
	queue *persist.Queue
	// users counts the requests holding the queue (dataQueues.get to release); lastUse
	// is when the last of them released it. Guarded by dataQueues.mu.
	users   int
	lastUse time.Time
	// version grows after every commit the store reports through Changes; changed is
	// closed (and replaced) at each increment. For a store with a shared version
	// (persist.ChangeVersioner: the distributed store) it is that version as last read,
	// so that every server of the queue answers comparable versions; else it counts
	// this server's wake-ups from the open's wall-clock time.
	version atomic.Int64
	shared  persist.ChangeVersioner
	mu      sync.Mutex
	changed chan struct{}
	done    chan struct{}
}

// errNoDataDir answers data routes on a server without a data directory.
var errNoDataDir = fmt.Errorf("%w: this server serves no data queues (start it with a data directory or store: lakeshore serve --data-dir or --data)", plane.ErrNotImplemented)

// served returns errNoDataDir when the server serves no data queues, else nil.
func (d *dataQueues) served() error {
	if d == nil || d.stores == nil {
		return errNoDataDir
	}
	return nil
}

// dataStoresOf returns the data stores a Config asks for.
func dataStoresOf(c *Config) DataStores {
	switch {
	case c.DataStores != nil:
		return c.DataStores
	case c.DataDir != "":
		return &fileDataStores{root: c.DataDir, cfg: c.DataConfig}
	}
	return nil
}

// get returns the open store of namespace/queue, held until release, opening it at its
// first use (creating the queue only when create is true; else a queue that does not
// exist is a *persist.NotFoundError and nothing is created). Names are validated by the
// caller (plane.ValidateName: no path separators, no leading dot).
func (d *dataQueues) get(ctx context.Context, namespace, queue string, create bool) (*dataQueue, error) {
	if err := d.served(); err != nil {
		return nil, err
	}
	key := namespace + "/" + queue
	d.mu.Lock()
	for {
		if d.closed {
			d.mu.Unlock()
			return nil, fmt.Errorf("%w: retry", api.ErrShuttingDown)
		}
		if q, ok := d.open[key]; ok {
			q.users++
			d.mu.Unlock()
			return q, nil
		}
		wait, ok := d.busy[key]
		if !ok && len(d.open)+d.opening+len(d.closing) < d.maxOpen {
			break
		}
		if !ok {
			// No room: close the least recently used idle queue and open this one once its
			// store is closed (a store closing still holds its files, so it counts), or
			// wait for one closing already.
			d.evictLocked(func(*dataQueue) bool { return true })
			for _, c := range d.closing {
				wait = c
				break
			}
			if wait == nil {
				d.mu.Unlock()
				return nil, fmt.Errorf("%w: %d data queues are in use at once by requests in progress (the server's limit); retry", api.ErrTooManyLongPolls, d.maxOpen)
			}
		}
		d.mu.Unlock() // being opened or closed by another request, or room being made: wait, then look again
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		d.mu.Lock()
	}
	done := make(chan struct{})
	if d.busy == nil {
		d.busy = map[string]chan struct{}{}
	}
	d.busy[key] = done
	d.opening++
	d.mu.Unlock()

	q, err := d.openQueue(ctx, namespace, queue, create)

	d.mu.Lock()
	defer d.mu.Unlock()
	d.opening--
	delete(d.busy, key)
	close(done)
	if err != nil {
		return nil, err
	}
	if d.closed { // Server.Close began while the store opened
		d.mu.Unlock()
		d.closeQueue(q)
		d.mu.Lock()
		return nil, fmt.Errorf("%w: retry", api.ErrShuttingDown)
	}
	q.key, q.users = key, 1
	if d.open == nil {
		d.open = map[string]*dataQueue{}
	}
	d.open[key] = q
	if !d.janitor && d.idle > 0 {
		d.janitor = true
		d.bg.Add(1)
		go d.closeIdle()
	}
	return q, nil
}

// openQueue opens the store of namespace/queue and starts watching its changes.
func (d *dataQueues) openQueue(ctx context.Context, namespace, queue string, create bool) (*dataQueue, error) {
	s, err := d.stores.Open(ctx, namespace, queue, create)
	if err != nil {
		return nil, err
	}
	q := &dataQueue{store: s, queue: persist.New(s), changed: make(chan struct{}), done: make(chan struct{})}
	ch, release := s.Changes()
	if sv, ok := s.(persist.ChangeVersioner); ok {
		// The store's own version, the same on every server of the queue (taken after
		// Changes, so that no commit after it is missed).
		v, err := sv.ChangeVersion(ctx)
		if err != nil {
			release()
			_ = s.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		q.shared = sv
		q.version.Store(v)
	} else {
		// Versions start at the open's wall-clock time, so that a client that saw
		// versions of an earlier run of the server (or of the queue's earlier opening)
		// is woken at once instead of waiting for the count to climb past them.
		q.version.Store(time.Now().UnixNano())
	}
	go q.watch(ch, release)
	return q, nil
}

// release ends a request's hold on q (from get).
func (d *dataQueues) release(q *dataQueue) {
	d.mu.Lock()
	q.users--
	q.lastUse = time.Now()
	d.mu.Unlock()
}

// evictLocked closes, in the background, the least recently used open queue that no
// request holds and that ok accepts; false when there is none (or the server closed).
// d.mu is held.
func (d *dataQueues) evictLocked(ok func(*dataQueue) bool) bool {
	if d.closed {
		return false
	}
	var victim *dataQueue
	for _, q := range d.open {
		if q.users == 0 && ok(q) && (victim == nil || q.lastUse.Before(victim.lastUse)) {
			victim = q
		}
	}
	if victim == nil {
		return false
	}
	delete(d.open, victim.key)
	done := make(chan struct{})
	if d.busy == nil {
		d.busy = map[string]chan struct{}{}
	}
	if d.closing == nil {
		d.closing = map[string]chan struct{}{}
	}
	d.busy[victim.key] = done
	d.closing[victim.key] = done
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		d.closeQueue(victim)
		d.mu.Lock()
		delete(d.busy, victim.key)
		delete(d.closing, victim.key)
		close(done)
		d.mu.Unlock()
	}()
	return true
}

// closeQueue closes q's store (flushing its tail) and waits for its watcher.
func (d *dataQueues) closeQueue(q *dataQueue) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.store.Close(ctx); err != nil && d.log != nil {
		d.log.Warn("closing a data queue failed; its tail stays durable", "queue", q.key, logError, err.Error())
	}
	<-q.done
}

// closeIdle is the janitor: it closes the queues no request has held for d.idle, until
// the last open one is closed or the server closes.
func (d *dataQueues) closeIdle() {
	defer d.bg.Done()
	t := time.NewTicker(max(d.idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.mu.Lock()
		cutoff := time.Now().Add(-d.idle)
		for d.evictLocked(func(q *dataQueue) bool { return q.lastUse.Before(cutoff) }) {
		}
		if len(d.open) == 0 || d.closed {
			d.janitor = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
}

// watch counts the store's commits into version. The next watch is taken before the
// version moves, so a client that read version v and then read the queue is woken by any
// commit its read missed. It returns once the store is closed (its Changes then answers
// the same closed channel).
func (q *dataQueue) watch(ch <-chan struct{}, release func()) {
	defer close(q.done)
	for {
		<-ch
		release()
		next, nextRelease := q.store.Changes()
		q.advance()
		if next == ch {
			nextRelease()
			return
		}
		ch, release = next, nextRelease
	}
}

// advance moves the version past the commit just reported and wakes the waiters. A
// shared version is read from the store; while that fails (the catalog unreachable) the
// waiters are woken anyway (they read again) and the read is retried until it succeeds
// or the store is closed, so a client's version is never passed by a number the other
// servers do not share.
func (q *dataQueue) advance() {
	if q.shared == nil {
		q.version.Add(1)
		q.signal()
		return
	}
	backoff := 20 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, err := q.shared.ChangeVersion(ctx)
		cancel()
		if err == nil {
			for cur := q.version.Load(); v > cur && !q.version.CompareAndSwap(cur, v); cur = q.version.Load() {
			}
			q.signal()
			return
		}
		q.signal()
		if errors.Is(err, persist.ErrClosed) {
			return
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// signal wakes every waiter of the version.
func (q *dataQueue) signal() {
	q.mu.Lock()
	close(q.changed)
	q.changed = make(chan struct{})
	q.mu.Unlock()
}

// waitChange returns a channel closed once the version passes after.
func (q *dataQueue) waitChange(after int64) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.version.Load() > after {
		c := make(chan struct{})
		close(c)
		return c
	}
	return q.changed
}

// list returns the names of the data queues of namespace.
func (d *dataQueues) list(ctx context.Context, namespace string) ([]string, error) {
	if err := d.served(); err != nil {
		return nil, err
	}
	return d.stores.List(ctx, namespace)
}

// close closes every open store (flushing their tails), after the closes of evicted
// ones in progress; later gets fail.
func (d *dataQueues) close(ctx context.Context) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	open := d.open
	d.open = nil
	close(d.stop)
	d.mu.Unlock()
	d.bg.Wait()
	var errs []error
	for key, q := range open {
		if err := q.store.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("data queue %s: %w", key, err))
		}
		<-q.done
	}
	return errors.Join(errs...)
}

// Close closes the data queues the server opened (their tails are flushed into
// fragments), after Stop and once the http.Server has finished its requests. Requests to
// data queues after it fail with 503 shutting_down. It does not close the plane.
func (s *Server) Close(ctx context.Context) error { return s.data.close(ctx) }

// dataHandler handles a request to one data queue, opened (and the token checked) by
// dataRoutes before it runs.
type dataHandler func(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error

// dataWriter handles a request of a route that creates its queue when it does not exist
// (a put, a trainer's first version). It reads and checks the request before the queue is
// opened (the token checked), so that a request it refuses creates nothing, and returns
// the rest of the work.
type dataWriter func(w http.ResponseWriter, r *http.Request, p *principal) (*dataWrite, error)

// dataWrite is a request of a creating route, read and checked by its dataWriter.
type dataWrite struct {
	// check refuses what every store refuses of the request whatever its queue holds
	// (the stores' own checks of their arguments and records: a bad partition name or put
	// id, records that disagree on a field's kind, values no store keeps); nil: nothing.
	// It runs only before the request creates its queue: a queue that exists has its
	// store check the request, refusing it without a change.
	check func() error
	// run applies the request to the open queue.
	run func(dq *dataQueue) error
}

// dataRoutes returns the handlers of api.DataRoutes()(). Every route to one queue shares one
// prologue (dataQueueNames: validate the namespace and queue, check the token for the
// route's permission; dataQueueOf: open the store); every handler writes its errors with
// the details of persist's typed errors. Only the routes with a dataWriter (puts, and a
// trainer's first version) create a queue that does not exist, and only once their
// request is read and checked, so that bad input creates nothing.
func (s *Server) dataRoutes() map[string]handlerFunc {
	d := api.DataPath
	put, read := dataPutPerms, dataReadPerms
	queueRoutes := map[string]struct {
		perms []plane.Permission
		h     dataHandler // nil for a creating route: its dataWriter in writers
	}{
		"POST " + d + "/records":                  {put, nil},
		"GET " + d + "/records":                   {read, s.handleDataRead},
		"GET " + d + "/stream":                    {read, s.handleDataStream},
		"POST " + d + "/fields":                   {put, s.handleDataPutFields},
		"POST " + d + "/flush":                    {put, s.handleDataFlush},
		"POST " + d + "/data":                     {read, s.handleDataGet},
		"POST " + d + "/meta":                     {read, s.handleDataMeta},
		"POST " + d + "/batch":                    {read, s.handleDataBatch},
		"POST " + d + "/produced":                 {read, s.handleDataProduced},
		"POST " + d + "/consumption/mark":         {read, s.handleDataMark},
		"POST " + d + "/consumption/reset":        {read, s.handleDataReset},
		"GET " + d + "/consumption":               {read, s.handleDataConsumed},
		"POST " + d + "/clear":                    {put, s.handleDataClear},
		"DELETE " + d + "/partitions/{partition}": {put, s.handleDataClearPartition},
		"POST " + d + "/kv":                       {put, nil},
		"POST " + d + "/kv/get":                   {read, s.handleDataKVGet},
		"GET " + d + "/kv":                        {read, s.handleDataKVList},
		"POST " + d + "/kv/clear":                 {put, s.handleDataKVClear},
		"GET " + d + "/schema":                    {read, s.handleDataSchema},
		"GET " + d + "/stats":                     {read, s.handleDataStats},
		"GET " + d + "/changes":                   {read, s.handleDataChanges},
		"GET " + d + "/version":                   {read, s.handleDataVersion},
		"POST " + d + "/version":                  {put, nil},
		"POST " + d + "/replay":                   {read, s.handleDataReplay},
		"POST " + d + "/groups/drop":              {read, s.handleDataDropGroup},
		"POST " + d + "/partial/patch":            {put, s.handleDataPatchPartial},
		"POST " + d + "/priorities":               {put, s.handleDataPriorities},
	}
	writers := map[string]dataWriter{ // the routes that create their queue
		"POST " + d + "/records": s.readDataPut,
		"POST " + d + "/kv":      s.readDataKVPut,
		"POST " + d + "/version": s.readDataSetVersion,
	}
	// The routes whose request every store checks the same way whatever the queue holds:
	// to a queue no put has created, a request they refuse is refused as in process (a
	// bad batch size, no fields), not answered as a missing queue (which the SDKs take for
	// an empty one).
	missingChecks := map[string]func(w http.ResponseWriter, r *http.Request) error{
		"POST " + d + "/meta":  s.checkMetaRequest,
		"POST " + d + "/batch": s.checkMetaRequest,
	}
	hs := map[string]handlerFunc{"GET /v1/namespaces/{namespace}/data": func(w http.ResponseWriter, r *http.Request, p *principal) error {
		if err := s.handleDataQueues(w, r, p); err != nil {
			s.writeDataError(w, r, err)
		}
		return nil
	}}
	for k, route := range queueRoutes {
		writer := writers[k]
		hs[k] = func(w http.ResponseWriter, r *http.Request, p *principal) error {
			var write *dataWrite
			var dq *dataQueue
			ns, q, err := dataQueueNames(r, p, route.perms)
			if err == nil && writer != nil {
				if err = s.data.served(); err == nil { // before the body: 501 on a server without data queues
					write, err = writer(w, r, p)
				}
			}
			if err == nil {
				dq, err = s.dataQueueOf(w, r, ns, q, write)
			}
			if check := missingChecks[k]; check != nil && queueMissing(err) {
				if cerr := check(w, r); cerr != nil {
					err = cerr
				}
			}
			if k == "GET "+d+"/version" && queueMissing(err) {
				// A queue no put created yet is at version 0 (as the SDKs answer), not 404.
				s.write(w, r, http.StatusOK, &api.DataWeightVersion{Version: 0})
				return nil
			}
			if err == nil {
				if write != nil {
					err = write.run(dq)
				} else {
					err = route.h(w, r, p, dq)
				}
				s.data.release(dq)
			}
			if err != nil {
				s.writeDataError(w, r, err)
			}
			return nil
		}
	}
	return hs
}

// dataLongPoll is longPoll for a request that holds data queue dq while it waits (a read or
// GetMeta that waits, a stream, a put blocked by back-pressure, a wait for a change): it
// also takes a place in the tenant's share of the data queues held by waits, at most
// Config.MaxDataQueuesPerTenant distinct queues at once (waits on a queue the tenant already waits on take
// none). A queue held by a request is never closed to make room, so without the share one
// tenant waiting on MaxOpenDataQueues queues at once held them all, and every data request
// of every other tenant answered 503. Errors: longPoll's, ErrTooManyLongPolls past the share.
func (s *Server) dataLongPoll(r *http.Request, p *principal, dq *dataQueue, wait time.Duration) (context.Context, time.Duration, func(), error) {
	ctx, capped, release, err := s.longPoll(r, p, wait)
	if err != nil || capped <= 0 {
		return ctx, capped, release, err
	}
	tenant, share := longPollTenant(r, p), s.cfg.MaxDataQueuesPerTenant
	s.tenantMu.Lock()
	held := s.tenantDataQueues[tenant]
	if held[dq.key] == 0 && len(held) >= share {
		s.tenantMu.Unlock()
		release()
		return nil, 0, nil, fmt.Errorf("%w: this token (or namespace) waits on its share of %d data queues at once (of the server's %d); retry later",
			api.ErrTooManyLongPolls, share, s.cfg.MaxOpenDataQueues)
	}
	if held == nil {
		held = map[string]int{}
		s.tenantDataQueues[tenant] = held
	}
	held[dq.key]++
	s.tenantMu.Unlock()
	return ctx, capped, func() {
		s.tenantMu.Lock()
		if held[dq.key]--; held[dq.key] <= 0 {
			delete(held, dq.key)
			if len(held) == 0 {
				delete(s.tenantDataQueues, tenant)
			}
		}
		s.tenantMu.Unlock()
		release()
	}, nil
}

// queueMissing reports whether err says the data queue itself does not exist (no put
// created it yet): persist's *NotFoundError naming the queue.
func queueMissing(err error) bool {
	var nf *persist.NotFoundError
	return errors.As(err, &nf) && nf.Queue != ""
}

// dataPerms: data:put and data:read (admin tokens hold both).
var (
	dataPutPerms  = []plane.Permission{plane.PermissionDataPut}
	dataReadPerms = []plane.Permission{plane.PermissionDataRead}
)

// dataQueueNames returns the namespace and queue of a data route, validated, once the token
// is checked for perms.
func dataQueueNames(r *http.Request, p *principal, perms []plane.Permission) (string, string, error) {
	ns, q, err := queueOf(r)
	if err != nil {
		return "", "", err
	}
	if err := persist.CheckName("queue name", q); err != nil { // data queues: not starting with _ either
		return "", "", err
	}
	if err := authorizeQueue(p, ns, q, perms...); err != nil {
		return "", "", err
	}
	return ns, q, nil
}

// dataQueueOf returns the open data queue ns/q (held: the caller releases it), with the
// change version when the request started in its answer's header. Only for a creating
// route's request (write, read and checked) is a queue that does not exist created,
// once write.check accepts the request; else it is 404 not_found.
func (s *Server) dataQueueOf(w http.ResponseWriter, r *http.Request, ns, q string, write *dataWrite) (*dataQueue, error) {
	dq, err := s.data.get(r.Context(), ns, q, false)
	if write != nil && queueMissing(err) { // a put's first: within the namespace's cap (caps.go)
		if write.check != nil {
			if err := write.check(); err != nil {
				return nil, err
			}
		}
		dq, err = s.createDataQueue(r.Context(), ns, q)
	}
	if err != nil {
		return nil, err
	}
	w.Header().Set(api.HeaderDataVersion, strconv.FormatInt(dq.version.Load(), 10))
	return dq, nil
}

// dataStatuses are the statuses of persist's codes that the plane does not have.
var dataStatuses = map[string]int{
	persist.ErrSchema.Code:           http.StatusBadRequest,
	persist.ErrUnsupportedValue.Code: http.StatusBadRequest,
	persist.ErrCorrupt.Code:          http.StatusInternalServerError,
	persist.ErrPutIDReused.Code:      http.StatusConflict,
}

// corruptDataMessage is the message of a data queue's corrupt error (500 corrupt): what is
// wrong and what to do, without the store's text (its paths, its parser's errors), which
// the server's log keeps.
const corruptDataMessage = "the data queue's stored state is damaged: a file of its store cannot be read back " +
	"(the server's log names it); nothing was read or written; an operator restores the queue from a backup or deletes it"

// writeDataError writes err as a DataErrorBody when it is one of persist's typed errors
// (with their details, so a client rebuilds them), else as the server's ErrorBody.
func (s *Server) writeDataError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		tl  *tooLargeError
		inv *plane.InvalidError
		se  *persist.SchemaError
		ue  *persist.UnsupportedValueError
		nf  *persist.NotFoundError
		bp  *persist.BackpressureError
		pr  *persist.PutIDReusedError
	)
	code := persist.Code(err)
	out := api.DataErrorBody{Code: code, Message: err.Error()}
	switch {
	case errors.As(err, &tl):
		s.writeError(w, r, err)
		return
	case errors.As(err, &se):
		out.Details = &api.DataErrorDetails{Field: se.Field, Have: string(se.Have), Got: string(se.Got), Reason: se.Reason}
	case errors.As(err, &ue):
		out.Details = &api.DataErrorDetails{Field: ue.Field, GoType: ue.GoType, Reason: ue.Reason}
		// Said without the Go type (details.go_type keeps it, for the Go client): a
		// caller of HTTP sent a JSON or msgpack value, not a Go one.
		out.Message = fmt.Sprintf("field %q: cannot store this value", ue.Field)
		if ue.Reason != "" {
			out.Message += ": " + ue.Reason
		}
		out.Message += " (allowed: booleans, integers in the int64 range, floats, strings, bytes, lists of numbers, tensors, and values the wire codec encodes)"
	case errors.As(err, &nf):
		out.Details = &api.DataErrorDetails{Queue: nf.Queue, Partition: nf.Partition, Keys: nf.Keys, Indexes: nf.Indexes}
	case errors.As(err, &bp):
		out.Details = &api.DataErrorDetails{Partition: bp.Partition, Backpressure: &api.DataBackpressure{Unconsumed: bp.Unconsumed, Records: bp.Records,
			Limit: bp.Limit, Version: bp.Version, Target: bp.Target, MaxAhead: bp.MaxAhead, Waited: bp.Waited.Seconds()}}
	case errors.As(err, &pr):
		out.Details = &api.DataErrorDetails{Field: "put_id", Value: plane.Truncate(pr.ID)}
	case errors.As(err, &inv):
		body, _ := api.NewErrorBody(inv)
		out.Details = &api.DataErrorDetails{Field: inv.Field, Value: body.Details.Value, Rule: inv.Rule}
	case dataStatuses[code] != 0:
	default:
		s.writeError(w, r, err)
		return
	}
	status := api.Status(code)
	if st, ok := dataStatuses[code]; ok {
		status = st
	}
	out.Message = escapeInvalidUTF8(cut(out.Message, maxErrorAnswerText))
	if d := out.Details; d != nil {
		d.Field, d.Rule = escapeInvalidUTF8(cut(d.Field, maxErrorAnswerText)), escapeInvalidUTF8(cut(d.Rule, maxErrorAnswerText))
		d.Reason = escapeInvalidUTF8(cut(d.Reason, maxErrorAnswerText))
	}
	if rec, ok := w.(*recorder); ok {
		rec.code, rec.msg = out.Code, out.Message
		if out.Details != nil {
			rec.field = loggedField(out.Details.Field)
		}
	}
	switch {
	case code == persist.ErrCorrupt.Code:
		// The server's fault (500), said in words: the store's own text names files and
		// carries its parser's errors, for the log only.
		out.Message = corruptDataMessage
	case status == http.StatusInternalServerError:
		out.Message = "internal error" // the log has the rest
	}
	s.write(w, r, status, &out)
}

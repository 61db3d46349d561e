package server

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Per-namespace caps on what a tenant leaves stored through the server: data queues
// (Config.MaxDataQueuesPerNamespace), bytes of code archives (MaxCodeBytesPerNamespace) and
// admission blocks (MaxAdmissionBlocksPerNamespace). Without them one token that may put,
// submit or administer its own queues could fill the server's disk (or the plane) for
// every other tenant: none of these is ever removed by the server.
//
// Decision (docs/http-api.md, "Per-namespace caps"): they are enforced here, in the server,
// once, and not in the stores or the planes. Data queues and code archives exist only
// behind a server (the code store is the server's own; an embedded persist.Queue is one
// program's files on its own disk); an admission block is an operator's declaration, and
// an embedded plane has one tenant. The caps on schedules, topics and registered workers
// stay in the planes (plane.CheckScheduleCount, CheckTopicCount, CheckWorkerCount), where
// those rows are created, in the creating transaction. The count and the creation are
// serialized per namespace within one server (namespaceLocks), so one server never takes
// a namespace past a cap; servers sharing a PostgreSQL plane or a distributed data store
// count apart, so concurrent creations through N servers may pass a cap by at most N−1.
// A refusal writes nothing, and what a namespace holds already keeps working: putting
// into one of its data queues, uploading an archive already stored, replacing a block.

// Defaults of the per-namespace caps: generous, so that no ordinary use meets them, and
// finite, so that one tenant cannot take the server's disk from the rest.
const (
	// MaxDataQueuesPerNamespaceDefault is 1,000 data queues: a queue per experiment or
	// run for years of work, while each is a directory of files (or a store's catalog
	// rows and objects) that stays until an operator removes it.
	MaxDataQueuesPerNamespaceDefault = 1000
	// MaxCodeBytesPerNamespaceDefault is 10 GiB of code archives: ten thousand uploads of
	// a 1 MiB tree, or a hundred of the largest archive (MaxCodeBytesDefault); every change
	// of a submitter's code is a new archive, and none is ever deleted by the server.
	MaxCodeBytesPerNamespaceDefault = 10 << 30
	// MaxAdmissionBlocksPerNamespaceDefault is 10,000 admission blocks, as many as
	// schedules (plane.SchedulesPerNamespaceDefault): a block per queue for far more
	// queues than a namespace declares by hand or from a config file.
	MaxAdmissionBlocksPerNamespaceDefault = 10000
)

// The flags of `lakeshore serve` that set each cap (Config's fields of the same names),
// named in its error so that whoever meets one knows what raises it.
const (
	MaxDataQueuesPerNamespaceFlag      = "max-data-queues-per-namespace"
	MaxCodeBytesPerNamespaceFlag       = "max-code-bytes-per-namespace"
	MaxAdmissionBlocksPerNamespaceFlag = "max-admission-blocks-per-namespace"
)

// limitExceeded is the error of a per-namespace cap: plane.ErrLimitExceeded's code (409),
// saying what the namespace holds against its cap (held), what frees room, and the serve
// flag that raises it.
func limitExceeded(held, free, flag string) error {
	return &plane.Error{Code: plane.ErrLimitExceeded.Code, Message: fmt.Sprintf(
		"%s: %s, or have the server started with a larger --%s", held, free, flag)}
}

// namespaceLocks serialize, per kind of object and namespace, a cap's count and the
// creation it admits within this server; namespaces are spread over a fixed set of
// mutexes, so that no map grows with the namespaces a client names.
type namespaceLocks struct {
	stripes [64]sync.Mutex
}

// namespaceLockSeed hashes (kind, namespace) to a stripe.
var namespaceLockSeed = maphash.MakeSeed()

// lock takes the lock of kind in namespace and returns its unlock.
func (l *namespaceLocks) lock(kind, namespace string) func() {
	m := &l.stripes[maphash.String(namespaceLockSeed, kind+"\x00"+namespace)%uint64(len(l.stripes))]
	m.Lock()
	return m.Unlock
}

// createDataQueue opens data queue queue of namespace, creating it (a put's first) when
// namespace holds fewer than Config.MaxDataQueuesPerNamespace; a queue that exists by the
// time the lock is held (created meanwhile) is opened, not counted. The caller holds no
// data queue. Errors: dataQueues.get's, ErrLimitExceeded at the cap.
func (s *Server) createDataQueue(ctx context.Context, namespace, queue string) (*dataQueue, error) {
	limit := s.cfg.MaxDataQueuesPerNamespace
	if limit < 0 {
		return s.data.get(ctx, namespace, queue, true)
	}
	defer s.capLocks.lock("data", namespace)()
	names, err := s.data.stores.List(ctx, namespace)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(names, queue) && len(names) >= limit {
		return nil, limitExceeded(fmt.Sprintf("namespace %s holds %d data queues, its maximum (%d)", namespace, len(names), limit),
			"put into one of them, or have an operator remove one the namespace no longer needs", MaxDataQueuesPerNamespaceFlag)
	}
	return s.data.get(ctx, namespace, queue, true)
}

// codeReservation is the room an upload of a code archive holds in its namespace from
// before its body is read (reserveCode) until it is stored or refused: its bytes count
// against Config.MaxCodeBytesPerNamespace, beside the archives stored, in codeRoom. nil:
// no room held (no cap, or a body of undeclared length, checked once it is read).
type codeReservation struct {
	s         *Server
	namespace string
	bytes     int64
}

// release gives the room back. Safe on nil and twice.
func (r *codeReservation) release() {
	if r == nil || r.bytes == 0 {
		return
	}
	r.s.codeReserved.add(r.namespace, -r.bytes)
	r.bytes = 0
}

// reservedBytes are the bytes that uploads under way hold, by namespace (codeReservation);
// a namespace's entry goes when its uploads end, so the map holds at most one entry per
// upload under way.
type reservedBytes struct {
	mu    sync.Mutex
	bytes map[string]int64
}

func (r *reservedBytes) add(namespace string, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bytes == nil {
		r.bytes = map[string]int64{}
	}
	if r.bytes[namespace] += n; r.bytes[namespace] == 0 {
		delete(r.bytes, namespace)
	}
}

func (r *reservedBytes) of(namespace string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes[namespace]
}

// reserveCode gives an upload to namespace that declares size bytes its room, before its
// body is read, so that a full namespace is refused before it uploads: under the
// namespace's lock, codeRoom lists the namespace's archives (once for the upload: storeCode
// does not list them again for a body no larger than its room) and counts the room other
// uploads under way hold. Errors: the code store's, ErrLimitExceeded past the cap.
func (s *Server) reserveCode(ctx context.Context, namespace string, size int64) (*codeReservation, error) {
	if s.cfg.MaxCodeBytesPerNamespace < 0 {
		return nil, nil
	}
	defer s.capLocks.lock("code", namespace)()
	if err := s.codeRoom(ctx, namespace, size); err != nil {
		return nil, err
	}
	s.codeReserved.add(namespace, size)
	return &codeReservation{s: s, namespace: namespace, bytes: size}, nil
}

// storeCode stores f, a checked archive of size bytes, under key in namespace (codeStore's
// put), when the namespace's archives stay within Config.MaxCodeBytesPerNamespace with it:
// an upload whose room (reserveCode) holds size is stored without counting again; one
// without room enough (a body of undeclared length) is checked here, under the
// namespace's lock (codeRoom). An archive stored under key meanwhile (another upload of
// the same digest) is replaced by the same bytes, not counted twice. The room is released
// once the archive is stored. Errors: the code store's, ErrLimitExceeded past the cap
// (nothing stored).
func (s *Server) storeCode(ctx context.Context, namespace, key string, f *os.File, size int64, room *codeReservation) error {
	limit := s.cfg.MaxCodeBytesPerNamespace
	if limit < 0 {
		return s.code.put(ctx, key, f)
	}
	defer s.capLocks.lock("code", namespace)()
	defer room.release() // under the lock: the next count sees the archive or the room, not both
	if room != nil && room.bytes >= size {
		return s.code.put(ctx, key, f)
	}
	if _, err := s.code.size(ctx, key); err == nil {
		return s.code.put(ctx, key, f)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	room.release()
	if err := s.codeRoom(ctx, namespace, size); err != nil {
		return err
	}
	return s.code.put(ctx, key, f)
}

// codeRoom checks that namespace's code archives, and the room uploads under way hold
// (reserveCode), stay within Config.MaxCodeBytesPerNamespace with one more of size bytes.
// Its caller holds the namespace's lock. Errors: the code store's, ErrLimitExceeded past
// the cap.
func (s *Server) codeRoom(ctx context.Context, namespace string, size int64) error {
	limit := s.cfg.MaxCodeBytesPerNamespace
	archives, held, err := s.code.usage(ctx, namespace)
	if err != nil {
		return err
	}
	reserved := s.codeReserved.of(namespace)
	if held+reserved+size > limit {
		underWay := ""
		if reserved > 0 {
			underWay = fmt.Sprintf(" (with %d bytes of uploads under way)", reserved)
		}
		return limitExceeded(fmt.Sprintf("namespace %s holds %d code archives of %d bytes, and this one of %d bytes would pass its maximum (%d bytes)%s",
			namespace, archives, held, size, limit, underWay),
			"ship less code (code.mounts' exclude in lakeshore.yaml), or have an operator remove archives no run needs from the code store", MaxCodeBytesPerNamespaceFlag)
	}
	return nil
}

// admitAdmissionBlock checks that namespace may hold a block on queue: a queue with a block
// already may always replace it; else the namespace must hold fewer than
// Config.MaxAdmissionBlocksPerNamespace. It returns the unlock the caller calls once the
// block is set. Errors: the plane's, ErrLimitExceeded at the cap.
func (s *Server) admitAdmissionBlock(ctx context.Context, namespace, queue string) (func(), error) {
	limit := s.cfg.MaxAdmissionBlocksPerNamespace
	if limit < 0 {
		return func() {}, nil
	}
	unlock := s.capLocks.lock("admission", namespace)
	a, err := s.drv.QueueAdmissionGet(ctx, namespace, queue)
	if err != nil && !errors.Is(err, plane.ErrNotFound) {
		unlock()
		return nil, err
	}
	if a != nil {
		return unlock, nil
	}
	stats, err := s.drv.QueueStatsList(ctx, namespace)
	if err != nil {
		unlock()
		return nil, err
	}
	blocks := 0
	for i := range stats {
		if stats[i].Admission != nil {
			blocks++
		}
	}
	if blocks >= limit {
		unlock()
		return nil, limitExceeded(fmt.Sprintf("namespace %s holds %d admission blocks, its maximum (%d)", namespace, blocks, limit),
			"delete one (DELETE …/admission) before declaring another, or replace one", MaxAdmissionBlocksPerNamespaceFlag)
	}
	return unlock, nil
}

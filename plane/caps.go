package plane

import "fmt"

// Caps on what one tenant grows in a plane without bound: the topics of a queue and the
// registered workers of a namespace (the schedules of a namespace: CheckScheduleCount).
// Each is the rule of every plane, applied where the object is created, in the creating
// transaction; a refusal stores nothing, and what exists keeps working (a post to a topic
// that exists, a worker's refresh of its registration).

// TopicsPerQueueDefault is the most topics one queue holds when the plane's configuration
// does not say (sqliteplane.Config and pgplane.Config MaxTopicsPerQueue): a topic per run
// or session for years of work; a topic stays, closed or not, until the plane's retention
// drops it after its last post.
const TopicsPerQueueDefault = 100000

// WorkersPerNamespaceDefault is the most registered workers one namespace holds when the
// plane's configuration does not say (MaxWorkersPerNamespace): a fleet of thousands of
// workers that restart every day, each under a new id, whose registrations stay until the
// plane's retention (RetentionDefault, 7 days) after their last refresh.
const WorkersPerNamespaceDefault = 100000

// The `lakeshore serve` flags that set the caps (the planes' Config fields
// MaxTopicsPerQueue and MaxWorkersPerNamespace), named in their errors.
const (
	MaxTopicsPerQueueFlag      = "max-topics-per-queue"
	MaxWorkersPerNamespaceFlag = "max-workers-per-namespace"
)

// CheckTopicCount is the cap on topics per queue, the rule of every plane's FramePost to
// a topic: creating a topic (its first post) in queue of namespace, which holds stored
// topics besides it, is refused with ErrLimitExceeded when stored is max or more (max 0:
// TopicsPerQueueDefault; negative: no cap).
func CheckTopicCount(namespace, queue string, stored, max int) error {
	max, reached := capReached(stored, max, TopicsPerQueueDefault)
	if !reached {
		return nil
	}
	return &Error{Code: ErrLimitExceeded.Code, Message: fmt.Sprintf(
		"queue %s of namespace %s holds %d topics, its maximum (%d): post to one of them (a topic is dropped by the plane's retention after its last post), or have the plane configured with a larger MaxTopicsPerQueue (lakeshore serve --%s)",
		queue, namespace, stored, max, MaxTopicsPerQueueFlag)}
}

// CheckWorkerCount is the cap on registered workers per namespace, the rule of every
// plane's WorkerRegister: registering a worker id that namespace does not hold, while it
// holds stored registrations, is refused with ErrLimitExceeded when stored is max or more
// (max 0: WorkersPerNamespaceDefault; negative: no cap).
func CheckWorkerCount(namespace string, stored, max int) error {
	max, reached := capReached(stored, max, WorkersPerNamespaceDefault)
	if !reached {
		return nil
	}
	return &Error{Code: ErrLimitExceeded.Code, Message: fmt.Sprintf(
		"namespace %s holds %d registered workers, its maximum (%d): remove the registrations of workers that are gone (a stopped worker removes its own; a crashed one's is dropped by the plane's retention after its last refresh), or have the plane configured with a larger MaxWorkersPerNamespace (lakeshore serve --%s)",
		namespace, stored, max, MaxWorkersPerNamespaceFlag)}
}

// capReached is the rule of every count cap: stored objects reach the cap max (0: def;
// negative: no cap), which it returns.
func capReached(stored, max, def int) (int, bool) {
	if max == 0 {
		max = def
	}
	return max, max >= 0 && stored >= max
}

// DiskFullError is a write refused because the disk holding a file has no room left
// (SQLite's SQLITE_FULL or the system's ENOSPC). It matches ErrLimitExceeded (HTTP 409, not
// retried): nothing of the refused write is stored, reads go on working, and writes
// succeed again once space is freed. Its Error names the file (for an embedded caller, whose
// file it is, and for the server's log); an HTTP answer says PublicMessage, which does not
// name the server's paths.
type DiskFullError struct {
	// What is the file in words, e.g. "the plane's database", "the data queue's meta.db".
	What string
	// Path is the file's path.
	Path string
}

// DiskFull returns a *DiskFullError for the file what (in words) at path.
func DiskFull(what, path string) error { return &DiskFullError{What: what, Path: path} }

// Error is PublicMessage with the file's path.
func (e *DiskFullError) Error() string {
	return fmt.Sprintf("the disk holding %s is full (%s): %s", e.What, e.Path, diskFullAdvice)
}

// PublicMessage is the message without the file's path: what an HTTP client is told.
func (e *DiskFullError) PublicMessage() string {
	return fmt.Sprintf("the disk holding %s is full (the server's log names the file): %s", e.What, diskFullAdvice)
}

// Is matches ErrLimitExceeded.
func (e *DiskFullError) Is(target error) bool { return ErrLimitExceeded.Is(target) }

const diskFullAdvice = "nothing was written; reads still work. " +
	"Free space on that disk (the operator: remove other files, or move it to a larger disk), then retry"

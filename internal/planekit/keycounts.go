package planekit

// KeyRef names the counter row of a concurrency key of a queue.
type KeyRef struct{ Namespace, Queue, Key string }

// KeySet is a set of the counter rows of concurrency keys (pgplane: those a transaction's
// queued writes change, which it locks in key order before them).
type KeySet map[KeyRef]struct{}

// Add adds k to s, making s when it is nil.
func (s *KeySet) Add(k KeyRef) {
	if *s == nil {
		*s = make(KeySet)
	}
	(*s)[k] = struct{}{}
}

// Columns are the counter rows of s as the arrays of a statement, in no order (the
// statement orders them).
func (s KeySet) Columns() (namespaces, queues, keys []string) {
	namespaces, queues, keys = make([]string, 0, len(s)), make([]string, 0, len(s)), make([]string, 0, len(s))
	for k := range s {
		namespaces, queues, keys = append(namespaces, k.Namespace), append(queues, k.Queue), append(keys, k.Key)
	}
	return namespaces, queues, keys
}

// KeyCounts count locked rows per concurrency key, as the arrays of a statement that counts
// them in their keys' rows (pgplane): the claimable keyed rows (StateKeyed) a start takes
// or a terminal write ends, and the running keyed rows a terminal write ends. The rows are
// locked, so the state read is theirs until the write.
type KeyCounts struct {
	Namespaces, Queues, Keys []string
	Queued, Running          []int64
	index                    map[KeyRef]int
}

// Add counts a row of the concurrency key (namespace, queue, key): claimable (StateKeyed)
// or running.
func (k *KeyCounts) Add(namespace, queue, key string, claimable bool) {
	ref := KeyRef{namespace, queue, key}
	i, ok := k.index[ref]
	if !ok {
		if k.index == nil {
			k.index = map[KeyRef]int{}
		}
		i = len(k.Keys)
		k.index[ref] = i
		k.Namespaces, k.Queues, k.Keys = append(k.Namespaces, namespace), append(k.Queues, queue), append(k.Keys, key)
		k.Queued, k.Running = append(k.Queued, 0), append(k.Running, 0)
	}
	if claimable {
		k.Queued[i]++
	} else {
		k.Running[i]++
	}
}

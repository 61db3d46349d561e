package planekit

// Cached is the value of key in cache, read by read and kept in cache when cache holds none
// yet: a writer's cache of what it reads of its database (sqliteplane: a queue's admission
// block, pause and queued count), which the writer drops whenever it may be stale. A
// failed read is not kept.
func Cached[K comparable, V any](cache map[K]V, key K, read func() (V, error)) (V, error) {
	if v, ok := cache[key]; ok {
		return v, nil
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	cache[key] = v
	return v, nil
}

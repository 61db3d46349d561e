package planekit

// ExpireFound ends, of the invocations a maintenance step found due (Maintenance.Expire),
// each that its rule still ends: read reads one, locked (nil: trimmed since it was found,
// skipped), end ends it unless it changed since it was found and reports whether it did.
// It returns how many it ended, and a SQL failure.
func ExpireFound[T any](found []T, read func(T) (*Head, error), end func(*Head) (bool, error)) (ended int, err error) {
	for _, f := range found {
		h, err := read(f)
		if err != nil {
			return ended, err
		}
		if h == nil { // trimmed since it was found
			continue
		}
		ok, err := end(h)
		if err != nil {
			return ended, err
		}
		if ok {
			ended++
		}
	}
	return ended, nil
}

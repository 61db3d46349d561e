package planekit

import "fmt"

// ReadHead reads the head of invocation id from s (ScanHead), nil when there is none.
func ReadHead(s Scanner, seq bool, id string) (*Head, error) {
	h, err := ScanHead(s, seq)
	if NoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read invocation %s: %w", id, err)
	}
	return h, nil
}

// EarlierDue is the earlier of two due times in Unix milliseconds, 0 standing for none.
func EarlierDue(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

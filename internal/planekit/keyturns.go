package planekit

import (
	"fmt"
	"time"
)

// ScanTurn scans a ready concurrency key's row into k: the key, its token bucket's tokens
// and time in ms, then, when head, the key's head (ScanRow's columns, after the row's
// sequence number when seq), then after: the columns of SQLite's keyReadySQL and of
// PostgreSQL's keyTurns.
func ScanTurn(s Scanner, k *KeyTurn, head, seq bool, after ...any) error {
	var tokensMS int64
	var err error
	dest := append(append(make([]any, 0, 3+len(after)), &k.Key, &k.Bucket.Tokens, &tokensMS), after...)
	if head { // one slice for Before and After: after's own never escapes (no allocation)
		k.Head, err = ScanRow(Around{Scanner: s, Before: dest[:3], After: dest[3:]}, seq)
	} else {
		err = s.Scan(dest...)
	}
	k.Bucket.At = time.UnixMilli(tokensMS)
	return err
}

// TurnRows are the rows of a read of ready keys whose heads are locked with them (pgx's):
// RawValues tells a head another transaction holds (its id NULL) before the scan.
type TurnRows interface {
	ClosingRows
	RawValues() [][]byte
}

// ReadTurns reads the rows of a read of ready keys with their locked heads (ScanTurn's
// columns, the head's without a sequence number), closing rs: each a ready key whose turn
// it is, its token bucket, and its head, nil when another transaction holds it (the head's
// columns NULL). err is the query's; no row gives nil (ClaimKeyed then reads the turns
// itself). Errors say "claim: read concurrency keys: …".
func ReadTurns(rs TurnRows, err error) ([]KeyTurn, error) {
	if err != nil {
		return nil, fmt.Errorf("claim: read concurrency keys: %w", err)
	}
	defer rs.Close()
	var turns []KeyTurn
	for rs.Next() {
		var k KeyTurn
		if held := rs.RawValues(); held[3] == nil { // the head's id: another transaction holds it
			err = ScanTurn(rs, &k, false, false, make([]any, len(held)-3)...) // nil skips a column
		} else {
			err = ScanTurn(rs, &k, true, false)
		}
		if err != nil {
			return nil, fmt.Errorf("claim: read concurrency keys: %w", err)
		}
		turns = append(turns, k)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("claim: read concurrency keys: %w", err)
	}
	return turns, nil
}

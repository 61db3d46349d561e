package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// maxTimestampSeconds is the largest Unix second time.Unix represents without overflow
// (time's internal epoch is year 1, 62135596800 s before 1970).
const maxTimestampSeconds = math.MaxInt64 - 62135596800

// appendTimestamp appends t as the msgpack timestamp extension (-1) in the smallest of its
// three forms: 32-bit (whole seconds in [0, 2^32)), 64-bit (seconds in [0, 2^34) with
// nanoseconds) and 96-bit (anything else). Location and monotonic reading are dropped.
func appendTimestamp(b []byte, t time.Time) ([]byte, error) {
	sec, nsec := t.Unix(), int64(t.Nanosecond())
	if !time.Unix(sec, nsec).Equal(t) {
		return b, &EncodeError{Type: "time.Time", Reason: "time is outside the range of Unix seconds in an int64"}
	}
	if sec>>34 == 0 {
		data64 := uint64(nsec)<<34 | uint64(sec)
		if data64>>32 == 0 {
			b = appendExtHeader(b, ExtTimestamp, 4)
			return binary.BigEndian.AppendUint32(b, uint32(data64)), nil
		}
		b = appendExtHeader(b, ExtTimestamp, 8)
		return binary.BigEndian.AppendUint64(b, data64), nil
	}
	b = appendExtHeader(b, ExtTimestamp, 12)
	b = binary.BigEndian.AppendUint32(b, uint32(nsec))
	return binary.BigEndian.AppendUint64(b, uint64(sec)), nil
}

// readTimestamp decodes a timestamp extension payload (4, 8 or 12 bytes) as a UTC time, or
// returns the reason it is invalid.
func readTimestamp(p []byte) (time.Time, string) {
	var sec, nsec int64
	switch len(p) {
	case 4:
		sec = int64(binary.BigEndian.Uint32(p))
	case 8:
		data64 := binary.BigEndian.Uint64(p)
		nsec, sec = int64(data64>>34), int64(data64&(1<<34-1))
	case 12:
		nsec = int64(binary.BigEndian.Uint32(p))
		sec = int64(binary.BigEndian.Uint64(p[4:]))
	default:
		return time.Time{}, fmt.Sprintf("timestamp payload is %d bytes; want 4, 8 or 12", len(p))
	}
	if nsec >= 1e9 {
		return time.Time{}, fmt.Sprintf("timestamp nanoseconds %d; want < 1000000000", nsec)
	}
	if sec > maxTimestampSeconds {
		return time.Time{}, fmt.Sprintf("timestamp seconds %d; want <= %d", sec, int64(maxTimestampSeconds))
	}
	return time.Unix(sec, nsec).UTC(), ""
}

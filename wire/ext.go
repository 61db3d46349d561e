package wire

import (
	"encoding/binary"
	"math"
)

// Version is the version of the wire format this package writes. Version 2 adopted the
// extension codes of the dreamlake-lakeshore codec (tuple 5, thunk moved to 64) and accepts
// its byte-order dtype names and map key order; version 1 wrote tuples as ext 4 and thunks as
// ext 5. Decode reads both versions except where they collide (ext 5): DecodeOptions.Version
// 1 reads ext 5 as version 1 wrote it.
const Version = 2

// Extension type codes (msgpack ext, application range), as written on the wire.
const (
	ExtTimestamp int8 = -1 // the standard msgpack timestamp ↔ time.Time
	ExtNDArray   int8 = 1  // [dtype str, shape [uint…], data bin] ↔ NDArray
	ExtTensor    int8 = 2  // same payload as ExtNDArray ↔ Tensor
	ExtImage     int8 = 3  // [format str, data bin] ↔ Image
	ExtTuple     int8 = 5  // [values…] ↔ Tuple (the dreamlake-lakeshore code)
	ExtThunk     int8 = 64 // [language str, data bin] ↔ Thunk (far from the codes it appends)

	// ExtTupleV1 is the tuple code of wire version 1. Decode still reads it as a Tuple (no
	// other writer uses 4); Marshal writes ExtTuple.
	ExtTupleV1 int8 = 4
	// ExtThunkV1 is the thunk code of wire version 1. It is ExtTuple now, so only
	// DecodeOptions{Version: 1} reads it as a Thunk.
	ExtThunkV1 int8 = 5
)

// Image is an encoded image (wire extension 3), kept as its file bytes. The zero value has
// no format and does not encode (use *Image or omitempty for optional fields).
type Image struct {
	// Format names the encoding, e.g. "png", "jpeg", "webp"; it must not be empty. Its case
	// carries no meaning (PIL and dreamlake-lakeshore write "PNG"; Lakeshore writes lower
	// case), and it is kept as written. The bytes are not inspected.
	Format string
	// Data holds the encoded image file.
	Data []byte
}

// Tuple is an ordered, fixed collection of values (wire extension 5; version 1 wrote 4). It decodes back to a
// Tuple, never a []any, so a Python tuple survives the trip. A nil Tuple encodes as the empty
// tuple.
type Tuple []any

// Thunk is code passed by value (wire extension 64; version 1 wrote 5), opaque to Go: a runtime that knows
// Language can run it. The zero value has no language and does not encode.
type Thunk struct {
	// Language names the runtime, e.g. "python-cloudpickle"; it must not be empty.
	Language string
	// Data holds the serialized code.
	Data []byte
}

// Map is a map that keeps its key order: DecodeOptions.Verbatim decodes maps to it, and
// Marshal writes its entries in order (a map[string]any has no order, so Marshal sorts its
// keys). Keys must be unique.
type Map []MapEntry

// MapEntry is one key and value of a Map.
type MapEntry struct {
	// Key is the entry's key.
	Key string
	// Value is the entry's value, any value Marshal accepts.
	Value any
}

// Get returns the value of key and whether m has it.
func (m Map) Get(key string) (any, bool) {
	for _, e := range m {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// Size of msgpack headers, used to size extension payloads before writing them.

func strSize(n int) int {
	switch {
	case n < 32:
		return 1 + n
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	}
	return 5 + n
}

func binSize(n int) int {
	switch {
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	}
	return 5 + n
}

func arrayHeaderSize(n int) int {
	switch {
	case n < 16:
		return 1
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

func uintSize(u uint64) int {
	switch {
	case u < 128:
		return 1
	case u <= math.MaxUint8:
		return 2
	case u <= math.MaxUint16:
		return 3
	case u <= math.MaxUint32:
		return 5
	}
	return 9
}

// appendExtHeader appends the header of an extension of type typ with an n-byte payload in
// the smallest form: fixext 1/2/4/8/16 when n matches, else ext 8/16/32.
func appendExtHeader(b []byte, typ int8, n int) []byte {
	switch n {
	case 1:
		return append(b, 0xd4, byte(typ))
	case 2:
		return append(b, 0xd5, byte(typ))
	case 4:
		return append(b, 0xd6, byte(typ))
	case 8:
		return append(b, 0xd7, byte(typ))
	case 16:
		return append(b, 0xd8, byte(typ))
	}
	switch {
	case n <= math.MaxUint8:
		return append(b, 0xc7, byte(n), byte(typ))
	case n <= math.MaxUint16:
		return append(b, 0xc8, byte(n>>8), byte(n), byte(typ))
	}
	b = append(b, 0xc9)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	return append(b, byte(typ))
}

// readExtHeader reads an extension header from b (whose first byte is an ext lead) and returns
// its type, its payload and the bytes after it; ok is false if b is too short.
func readExtHeader(b []byte) (typ int8, payload, rest []byte, ok bool) {
	var n, off int
	switch lead := b[0]; lead {
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		n, off = 1<<(lead-0xd4), 2
	case 0xc7:
		if len(b) < 3 {
			return 0, nil, nil, false
		}
		n, off = int(b[1]), 3
	case 0xc8:
		if len(b) < 4 {
			return 0, nil, nil, false
		}
		n, off = int(binary.BigEndian.Uint16(b[1:])), 4
	case 0xc9:
		if len(b) < 6 {
			return 0, nil, nil, false
		}
		n, off = int(binary.BigEndian.Uint32(b[1:])), 6
	default:
		return 0, nil, nil, false
	}
	if len(b) < off || len(b)-off < n {
		return 0, nil, nil, false
	}
	return int8(b[off-1]), b[off : off+n], b[off+n:], true
}

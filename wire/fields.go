package wire

import (
	"reflect"
	"strings"
	"time"
)

// Go types with a fixed wire form; they are never walked as structs or slices.
var (
	timeType    = reflect.TypeFor[time.Time]()
	ndarrayType = reflect.TypeFor[NDArray]()
	tensorType  = reflect.TypeFor[Tensor]()
	imageType   = reflect.TypeFor[Image]()
	tupleType   = reflect.TypeFor[Tuple]()
	thunkType   = reflect.TypeFor[Thunk]()
)

// isWireType reports whether t is one of the types above.
func isWireType(t reflect.Type) bool {
	switch t {
	case timeType, ndarrayType, tensorType, imageType, tupleType, thunkType:
		return true
	}
	return false
}

// field is one encoded field of a struct type.
type field struct {
	name      string // key on the wire
	index     []int  // path for reflect.Value.FieldByIndex, through inlined embedded structs
	omitEmpty bool   // skip the zero value on encode
	depth     int    // embedding depth, for resolving duplicate names
}

// structFields lists the fields of struct type t in declaration order, embedded structs
// inlined in place. Of fields sharing a name the shallowest wins, then the first declared.
// It is recomputed per call: the package keeps no cache (no package-level mutable state).
func structFields(t reflect.Type) []field {
	var all []field
	collectFields(t, nil, 0, map[reflect.Type]bool{t: true}, &all)
	best := make(map[string]int, len(all)) // name → index in all of the winner
	for i, f := range all {
		if j, ok := best[f.name]; !ok || f.depth < all[j].depth {
			best[f.name] = i
		}
	}
	out := make([]field, 0, len(best))
	for i, f := range all {
		if best[f.name] == i {
			out = append(out, f)
		}
	}
	return out
}

func collectFields(t reflect.Type, index []int, depth int, seen map[reflect.Type]bool, out *[]field) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("msgpack")
		if !ok {
			tag = sf.Tag.Get("json")
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		idx := append(append([]int(nil), index...), i)
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !isWireType(ft) {
				if !seen[ft] {
					seen[ft] = true
					collectFields(ft, idx, depth+1, seen, out)
					delete(seen, ft)
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		*out = append(*out, field{
			name:      name,
			index:     idx,
			omitEmpty: hasOption(opts, "omitempty"),
			depth:     depth,
		})
	}
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

package wire

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStructFields(t *testing.T) {
	t.Parallel()
	type Deep struct {
		Name string // "Name": differs from Mid's "name" (names are case-sensitive)
		Only string
	}
	type Mid struct {
		Deep
		Name string `msgpack:"name"`
		Dup  int
	}
	type selfEmbedding struct {
		*selfEmbedding
		X int
	}
	type top struct {
		Mid
		*Deep     `msgpack:"deep"` // tagged: a field, not inlined
		Dup       string           // depth 0 beats Mid.Dup
		JSONOnly  int              `json:"json_only,omitempty"`
		Both      int              `msgpack:"m" json:"j"`
		Hidden    int              `msgpack:"-"`
		JSONDash  int              `json:"-"`
		hidden    int
		Recursive selfEmbedding
	}
	names := func(typ reflect.Type) []string {
		var out []string
		for _, f := range structFields(typ) {
			out = append(out, f.name)
		}
		return out
	}
	require.Equal(t, []string{"Name", "Only", "name", "deep", "Dup", "json_only", "m", "Recursive"}, names(reflect.TypeFor[top]()))
	require.Equal(t, []string{"X"}, names(reflect.TypeFor[selfEmbedding]()))

	fields := structFields(reflect.TypeFor[top]())
	require.Equal(t, []int{0, 0, 1}, fields[1].index, "Only is reached through Mid.Deep")
	require.Equal(t, []int{2}, fields[4].index, "top.Dup shadows Mid.Dup")
	require.True(t, fields[5].omitEmpty)
	require.False(t, fields[6].omitEmpty)
}

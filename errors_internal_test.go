package lakeshore

import (
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
)

type typedError string

func (e typedError) Error() string     { return "boom \xff" }
func (e typedError) ErrorType() string { return string(e) }

// TestErrorInfoTypeKeepsRule: an ErrorType the plane would refuse (a space, too long) is
// recorded as "error", so the nack still settles the job.
func TestErrorInfoTypeKeepsRule(t *testing.T) {
	for _, c := range []struct{ typ, want string }{
		{"ValueError", "ValueError"},
		{"two words", ErrorTypeDefault},
		{string(make([]byte, 200)), ErrorTypeDefault},
	} {
		info := errorInfo(typedError(c.typ))
		if info.Type != c.want {
			t.Errorf("type %q: got %q, want %q", c.typ, info.Type, c.want)
		}
		p := plane.SettleParams{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Outcome: plane.OutcomeFailed, Error: info}
		if err := p.Validate(); err != nil {
			t.Errorf("type %q: the settle is refused: %v", c.typ, err)
		}
	}
}

package planekit

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Placement's shared rules (plane/placement.go; docs/semantics.md, "Placement"): which warm
// (host key, shape) pairs a claim reads, and which head a placed claim takes next. The
// drivers read the heads (their SQL) and start the chosen row.

// WarmPair is a (host key, shape) of a queue's invocations (a placement_warm row).
type WarmPair struct {
	HostKey, Shape string
}

// Requirements caches the requirement of each shape a plane's claims read from its
// placement_shapes rows (a shape is a digest of its requirement: it never changes).
type Requirements struct{ m sync.Map }

// Satisfied reads rs, a queue's placement_shapes rows (shape, requirement), and returns the
// shapes whose requirement offers satisfy. It closes rs.
func (c *Requirements) Satisfied(rs ClosingRows, offers *plane.Offers) ([]string, error) {
	defer rs.Close()
	var out []string
	for rs.Next() {
		var shape, stored string
		if err := rs.Scan(&shape, &stored); err != nil {
			return nil, fmt.Errorf("claim: read shapes: %w", err)
		}
		var req *plane.Requirement
		if v, ok := c.m.Load(shape); ok {
			req = v.(*plane.Requirement)
		} else {
			var err error
			if req, err = plane.DecodeRequirement([]byte(stored)); err != nil {
				return nil, fmt.Errorf("claim: shape %s: %w", shape, err)
			}
			c.m.Store(shape, req)
		}
		if offers.Satisfies(req) {
			out = append(out, shape)
		}
	}
	return out, rs.Err()
}

// WarmClaim reports whether a claim of kind with warm host keys looks for warm jobs at all:
// a boltzmann claim draws and has no order to bend, so it does not.
func WarmClaim(p *plane.ClaimParams, kind plane.Kind) bool {
	return len(p.WarmHostKeys) > 0 && kind != plane.KindBoltzmann
}

// KeepWarm returns the pairs of pairs a claim may take jobs of: those of the default
// shape, and those of a shape in satisfied (the shapes the claim's offers satisfy).
func KeepWarm(pairs []WarmPair, satisfied []string) []WarmPair {
	out := pairs[:0]
	for _, pr := range pairs {
		if pr.Shape == "" || slices.Contains(satisfied, pr.Shape) {
			out = append(out, pr)
		}
	}
	return out
}

// First returns the first of heads in kind's order (plane.KeyTurnFirst) and its index (nil,
// -1 when every head is nil).
func First(kind plane.Kind, heads []*Row) (*Row, int) {
	var best *Row
	at := -1
	for i, h := range heads {
		if h != nil && (best == nil || plane.KeyTurnFirst(kind, h.ID, h.Priority, best.ID, best.Priority)) {
			best, at = h, i
		}
	}
	return best, at
}

// Placed is what a placed claim takes next.
type Placed int

// What a placed claim takes next.
const (
	// PlacedNone: no head at all; the default shape's claim takes what it can.
	PlacedNone Placed = iota
	// PlacedWarm: the warm head.
	PlacedWarm
	// PlacedShaped: the shaped head.
	PlacedShaped
	// PlacedDefault: the default shape's claim (its head went first).
	PlacedDefault
)

// ChoosePlaced chooses among the first warm head, the first shaped head and the default
// shape's head (each nil when none): the first of the shaped and default heads in kind's
// order is the cold head; the warm head goes before it when plane.WarmFirst says so.
func ChoosePlaced(kind plane.Kind, warm, shaped, def *Row) Placed {
	cold, coldIs := shaped, PlacedShaped
	if def != nil && (cold == nil || !plane.KeyTurnFirst(kind, cold.ID, cold.Priority, def.ID, def.Priority)) {
		cold, coldIs = def, PlacedDefault
	}
	switch {
	case warm != nil && (cold == nil || plane.WarmFirst(kind, warm.ID, warm.Priority, cold.ID, cold.Priority)):
		return PlacedWarm
	case cold == nil:
		return PlacedNone
	}
	return coldIs
}

// ClaimPlaced is the loop of a claim with offers or warm host keys, for want jobs in all
// (got: how many it has). Each round heads returns the head of each shape the offers
// satisfy, of each warm pair and of the default shape's unkeyed jobs (each nil when none),
// and ChoosePlaced chooses among the first of each: a default job is the default shape's
// claim's (claimDefault, for n more jobs, returns how many it took; when it takes none the
// shaped or warm head goes instead), a shaped or warm one take's (warm: r is the first of
// the warm heads, at its index there; else of the shaped heads). With no shaped or warm
// head left, the default shape's claim takes the rest.
func ClaimPlaced(kind plane.Kind, want int, got func() int, heads func() (shaped, warm []*Row, def *Row, err error),
	claimDefault func(n int) (int, error), take func(r *Row, warm bool, at int) error,
) error {
	for got() < want {
		shaped, warm, def, err := heads()
		if err != nil {
			return err
		}
		best, at := First(kind, shaped)
		hot, hotAt := First(kind, warm)
		if best == nil && hot == nil {
			_, err := claimDefault(want - got())
			return err
		}
		choice := ChoosePlaced(kind, hot, best, def)
		if choice == PlacedDefault {
			n, err := claimDefault(1)
			if err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			choice = PlacedShaped
			if best == nil {
				choice = PlacedWarm
			}
		}
		if choice == PlacedWarm {
			err = take(hot, true, hotAt)
		} else {
			err = take(best, false, at)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// EncodeOffers is the stored form of a worker's offers: plane.EncodeRequirement's JSON, ""
// for none.
func EncodeOffers(o *plane.Offers) string {
	return string(plane.EncodeRequirement((*plane.Requirement)(o)))
}

// DecodeOffers reads stored offers (nil for none or unreadable).
func DecodeOffers(s string) *plane.Offers {
	r, err := plane.DecodeRequirement([]byte(s))
	if err != nil || r == nil {
		return nil
	}
	return (*plane.Offers)(r)
}

// EncodeHostKeys is the stored form of a worker's warm host keys: space-separated (a host
// key has no space), "" for none.
func EncodeHostKeys(keys []string) string { return strings.Join(keys, " ") }

// DecodeHostKeys reads stored warm host keys (nil for none).
func DecodeHostKeys(s string) []string { return strings.Fields(s) }

// PlacementIdleTrim is how long a placement_shapes or placement_warm row stays after a
// maintenance pass found no live invocation (delayed, queued or running) of its shape (and
// host key): a later pass that still finds none, this long after, deletes it. A submit of
// the shape re-creates the row with the invocation (the insert trigger), in the same
// transaction, so a claim never misses a claimable job of a trimmed shape.
const PlacementIdleTrim = 10 * time.Minute

// PlacementTrim is the trim of one placement table (PlacementTrimSQL): the table's name and
// its three statements.
type PlacementTrim struct {
	Table string
	SQL   [3]string
}

// PlacementTrimSQL are the statements of a maintenance pass's placement trim, per table in
// order (placement_shapes', then placement_warm's), for a plane's dialect: table names tables (placement_shapes, placement_warm, invocations,
// with their schema), hint what follows "invocations" in a live probe (SQLite's INDEXED
// BY), param the dialect's first parameter. Per table, three statements: clear the idle
// mark of rows with a live invocation (no parameter); mark rows without one (param: the
// time now, ms); delete rows marked at or before param (now − PlacementIdleTrim, ms) that
// still have none. Each live probe is one index probe (invocations_placed).
func PlacementTrimSQL(shapes, warm, invocations, hint, param string) []PlacementTrim {
	live := func(table, alias string) string {
		cond := `i.namespace = ` + alias + `.namespace AND i.queue = ` + alias + `.queue AND i.shape = ` + alias + `.shape`
		if table == warm {
			cond += ` AND i.host_key = ` + alias + `.host_key`
		}
		return `EXISTS (SELECT 1 FROM ` + invocations + ` AS i ` + hint + ` WHERE ` + cond +
			` AND (i.shape <> '' OR i.host_key <> '') AND i.state < 2)`
	}
	var out []PlacementTrim
	for _, table := range []string{shapes, warm} {
		out = append(out, PlacementTrim{table, [3]string{
			`UPDATE ` + table + ` AS p SET idle_since_ms = 0 WHERE idle_since_ms > 0 AND ` + live(table, "p"),
			`UPDATE ` + table + ` AS p SET idle_since_ms = ` + param + ` WHERE idle_since_ms = 0 AND NOT ` + live(table, "p"),
			`DELETE FROM ` + table + ` AS p WHERE idle_since_ms > 0 AND idle_since_ms <= ` + param + ` AND NOT ` + live(table, "p")}})
	}
	return out
}

package planekit

import (
	"slices"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// HeartbeatIDs are the ids of the heartbeats params, sorted, each once: the order in which
// a transaction locks their rows, so that concurrent transactions lock alike (as
// SettledIDs for settles).
func HeartbeatIDs(params []plane.HeartbeatParams) []string {
	ids := make([]string, len(params))
	for i := range params {
		ids[i] = params[i].ID
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

package planekit

import "github.com/lakeshore-dev/lakeshore/plane"

// BatchableAcks are the indexes of the settles of params that may go in one batched ack
// statement, whose order among themselves does not matter: acks (OutcomeSucceeded) of
// ids that appear once in params, by unscoped callers (a scoped settle's scope is checked
// on the row read for it). None when fewer than two qualify (a batch of one is no batch).
func BatchableAcks(params []plane.SettleParams) []int {
	if len(params) < 2 {
		return nil
	}
	seen := make(map[string]int, len(params))
	for i := range params {
		seen[params[i].ID]++
	}
	var which []int
	for i := range params {
		if params[i].Outcome == plane.OutcomeSucceeded && seen[params[i].ID] == 1 && params[i].Scope == (plane.Scope{}) {
			which = append(which, i)
		}
	}
	if len(which) < 2 {
		return nil
	}
	return which
}

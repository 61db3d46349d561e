package planekit

import "github.com/lakeshore-dev/lakeshore/plane"

// TrimBatch is how many rows one trim transaction deletes at most, so a large trim never
// holds a plane's writes for long.
const TrimBatch = 1000

// Trim is Driver.InvocationTrim over a plane's trim of one transaction (batch deletes up to
// limit terminal invocations of p finished before p.FinishedBefore): it checks p, then
// trims batches until one comes back short.
func Trim(p *plane.TrimParams, batch func(limit int) (int64, error)) (int64, error) {
	if p.Namespace != "" {
		if err := plane.ValidateNamespace(p.Namespace); err != nil {
			return 0, err
		}
	}
	if p.Queue != "" {
		if err := plane.ValidateName("queue name", p.Queue); err != nil {
			return 0, err
		}
	}
	var total int64
	for {
		n, err := batch(TrimBatch)
		total += n
		if err != nil || n < TrimBatch {
			return total, err
		}
	}
}

// Ending is what an operator's cancel or kill does: the stored states it ends an
// invocation from, the terminal state it ends in and the error it records.
type Ending struct {
	From func(state int) bool
	To   int
	Info plane.ErrorInfo
}

// Cancel ends a queued (or delayed) invocation as cancelled; Kill a running one as killed.
var (
	Cancel = Ending{From: Queued, To: StateCancelled,
		Info: plane.ErrorInfo{Type: plane.ErrorTypeCancelled, Message: "cancelled before it ran"}}
	Kill = Ending{From: func(s int) bool { return s == StateRunning }, To: StateKilled,
		Info: plane.ErrorInfo{Type: plane.ErrorTypeKilled, Message: "killed while running"}}
)

// ValidateAll checks every item of a batch (settles, heartbeats), before any is applied.
func ValidateAll[P any, PP interface {
	*P
	Validate() error
}](items []P) error {
	for i := range items {
		if err := PP(&items[i]).Validate(); err != nil {
			return err
		}
	}
	return nil
}

package persist

import "context"

// kickCompaction asks the background compactor to look for work.
func (q *Queue) kickCompaction() {}

func (q *Queue) compactLoop(ctx context.Context) { <-ctx.Done() }

package persist

import (
	"context"
	"strings"
	"sync"
)

// TargetOpener opens the store of queue name at target, a URL whose scheme a store
// package registered with RegisterTarget; cfg is the Config given to Open (its Dir is
// target), whose store-independent settings (FlushInterval, FlushRows, RowGroupRows,
// PollInterval, Logger) the store may honour.
type TargetOpener func(ctx context.Context, name, target string, cfg *Config) (Store, error)

var targets sync.Map // scheme → TargetOpener

// RegisterTarget makes Open accept Config.Dir values of the form scheme://…, opened by
// open. Store packages call it from init (persist/lakestore registers postgres and
// postgresql), so a program chooses its store by configuration once it imports the
// package. A later registration of a scheme replaces the earlier one.
func RegisterTarget(scheme string, open TargetOpener) {
	targets.Store(strings.ToLower(scheme), open)
}

// targetOpener returns the opener registered for the scheme of dir, if dir is a URL
// with a registered scheme.
func targetOpener(dir string) (TargetOpener, bool) {
	scheme, _, ok := strings.Cut(dir, "://")
	if !ok {
		return nil, false
	}
	o, ok := targets.Load(strings.ToLower(scheme))
	if !ok {
		return nil, false
	}
	return o.(TargetOpener), true
}

package persist

import (
	"context"
	"os"
	"strings"
	"sync"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TargetOpener opens the store of queue name at target, a URL whose scheme a store
// package registered with RegisterTarget (from Config.URL, Config.Dir or
// $LAKESHORE_URL); cfg is the Config given to Open (nil when none was), whose
// store-independent settings (FlushInterval, FlushRows, RowGroupRows,
// PollInterval, Logger, Namespace) the store may honour.
type TargetOpener func(ctx context.Context, name, target string, cfg *Config) (Store, error)

var targets sync.Map // scheme → TargetOpener

// RegisterTarget makes Open accept targets of the form scheme://… (in Config.Dir, or in
// $LAKESHORE_URL when Config names no target), opened by open. Store packages call it
// from init, as database/sql drivers register themselves: persist/lakestore registers
// postgres and postgresql, so a program reaches the distributed store by configuration
// once it has the one blank import
//
//	import _ "github.com/lakeshore-dev/lakeshore/persist/lakestore"
//
// (persist itself cannot import it: the distributed store is built on persist, and it
// brings PostgreSQL and the object-store drivers, which a program of the file or HTTP
// store does not need). A later registration of a scheme replaces the earlier one.
func RegisterTarget(scheme string, open TargetOpener) {
	targets.Store(strings.ToLower(scheme), open)
}

// LakestorePackage is the import path of the package that registers the postgres://
// targets of the distributed store.
const LakestorePackage = "github.com/lakeshore-dev/lakeshore/persist/lakestore"

// schemeOf returns the scheme of target when it is a URL scheme://… ("" when target is
// a path: a directory of the file store).
func schemeOf(target string) string {
	scheme, _, ok := strings.Cut(target, "://")
	if !ok || scheme == "" {
		return ""
	}
	for i, c := range scheme { // RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return strings.ToLower(scheme)
}

// targetOpener returns the opener registered for the scheme of target, if target is a
// URL with a registered scheme.
func targetOpener(target string) (TargetOpener, bool) {
	scheme := schemeOf(target)
	if scheme == "" {
		return nil, false
	}
	o, ok := targets.Load(scheme)
	if !ok {
		return nil, false
	}
	return o.(TargetOpener), true
}

// unknownTarget is the error for a target URL whose scheme no store serves: field names
// where it came from. A postgres:// target names the import that registers it.
func unknownTarget(field, target string) error {
	scheme := schemeOf(target)
	rule := "a directory path, an http:// or https:// URL of a lakeshore server, or a URL whose scheme a store package registered " +
		"(postgres://…?blob=<bucket URL> with " + LakestorePackage + " imported); no store serves " + scheme + "://"
	if scheme == "postgres" || scheme == "postgresql" {
		rule = "a registered target: " + scheme + ":// is the distributed store, which this program does not link; add the import " +
			`_ "` + LakestorePackage + `" (the lakeshore command has it)`
	}
	return &InvalidError{Field: field, Value: redactURL(target), Rule: rule}
}

// redactURL drops the secrets of a URL for messages (plane.RedactURL).
func redactURL(s string) string { return plane.RedactURL(s) }

// resolveTarget says which store Open uses for cfg: a registered target (open set,
// target its URL), the HTTP store (http set), or the file store (neither). The target is
// Config.URL, else Config.Dir, else $LAKESHORE_URL when Dir is empty. Errors:
// *InvalidError for a URL whose scheme no store serves (a postgres:// target without
// persist/lakestore imported: the error names the import).
func (c *Config) resolveTarget() (target string, open TargetOpener, http bool, err error) {
	field := "queue option Dir"
	switch {
	case c != nil && c.URL != "":
		target, field = c.URL, "queue option URL"
	case c != nil && c.Dir != "":
		target = c.Dir
	default:
		target, field = os.Getenv(EnvURL), "$"+EnvURL
	}
	if isHTTP(target) {
		return target, nil, true, nil
	}
	if schemeOf(target) == "" {
		if field != "queue option Dir" && target != "" {
			return "", nil, false, &InvalidError{Field: field, Value: target, Rule: "an http:// or https:// URL, or a URL whose scheme a store package registered (postgres://…?blob=…)"}
		}
		return "", nil, false, nil // the file store (or a missing Dir, which it reports)
	}
	if o, ok := targetOpener(target); ok {
		return target, o, false, nil
	}
	return "", nil, false, unknownTarget(field, target)
}

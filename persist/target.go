package persist

import (
	"context"
	"net/url"
	"os"
	"strings"
)

// StoreDriver is a store package's entry for Open: the URL schemes of the targets it
// serves and how it opens one. persist links the file store and the HTTP store itself;
// any other store is given to Open explicitly, never registered behind the caller's
// back — persist/lakestore's Driver() serves postgres:// and postgresql:// targets:
//
//	q, err := persist.Open(ctx, "rollouts", cfg, lakestore.Driver())
//
// (persist cannot import it: the distributed store is built on persist, and it brings
// PostgreSQL and the object-store drivers, which a program of the file or HTTP store
// does not need.)
type StoreDriver struct {
	// Schemes are the URL schemes (before "://", any case) of the targets the driver
	// serves.
	Schemes []string
	// Open opens the store of queue name at target (from Config.URL, Config.Dir or
	// $LAKESHORE_URL); cfg is the Config given to Open (nil when none was), whose
	// store-independent settings (FlushInterval, FlushRows, RowGroupRows,
	// PollInterval, Logger, Namespace, Existing, Samplers) the store may honour.
	Open func(ctx context.Context, name, target string, cfg *Config) (Store, error)
}

// LakestorePackage is the import path of the package whose Driver serves the
// postgres:// targets of the distributed store.
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

// driverFor returns the driver of drivers serving the scheme of target, if target is a
// URL of such a scheme.
func driverFor(target string, drivers []StoreDriver) (StoreDriver, bool) {
	scheme := schemeOf(target)
	if scheme == "" {
		return StoreDriver{}, false
	}
	for _, d := range drivers {
		for _, s := range d.Schemes {
			if strings.EqualFold(s, scheme) && d.Open != nil {
				return d, true
			}
		}
	}
	return StoreDriver{}, false
}

// unknownTarget is the error for a target URL whose scheme no store serves: field names
// where it came from. A postgres:// target names the driver to give Open.
func unknownTarget(field, target string) error {
	scheme := schemeOf(target)
	rule := "a directory path, an http:// or https:// URL of a lakeshore server, or a URL whose scheme a store driver given to Open serves " +
		"(postgres://…?blob=<bucket URL> with the Driver() of " + LakestorePackage + "); no store serves " + scheme + "://"
	if scheme == "postgres" || scheme == "postgresql" {
		rule = "a target of a store given to Open: " + scheme + ":// is the distributed store, which this call was not given; pass " +
			"lakestore.Driver() (package " + LakestorePackage + ") to persist.Open (the lakeshore command does)"
	}
	return &InvalidError{Field: field, Value: redactURL(target), Rule: rule}
}

// redactURL drops the password of a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// resolveTarget says which store Open uses for cfg: one of drivers (open set, target its
// URL), the HTTP store (http set), or the file store (neither). The target is
// Config.URL, else Config.Dir, else $LAKESHORE_URL when Dir is empty. Errors:
// *InvalidError for a URL whose scheme no store serves (a postgres:// target without
// lakestore.Driver(): the error names it).
func (c *Config) resolveTarget(drivers []StoreDriver) (target string, open *StoreDriver, http bool, err error) {
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
			return "", nil, false, &InvalidError{Field: field, Value: target, Rule: "an http:// or https:// URL, or a URL whose scheme a store driver given to Open serves (postgres://…?blob=…)"}
		}
		return "", nil, false, nil // the file store (or a missing Dir, which it reports)
	}
	if d, ok := driverFor(target, drivers); ok {
		return target, &d, false, nil
	}
	return "", nil, false, unknownTarget(field, target)
}

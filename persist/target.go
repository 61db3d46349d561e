package persist

import (
	"context"
	"os"
	"strings"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Environment variables read by Open when Config leaves the target or token empty.
const (
	// EnvURL names the target of a Config without Dir or URL: LAKESHORE_URL, as the
	// job queue's SDK and CLI use.
	EnvURL = "LAKESHORE_URL"
	// EnvToken is the bearer token the HTTP store sends when Config.Token is empty.
	EnvToken = "LAKESHORE_TOKEN"
)

// NamespaceDefault is the namespace of a data queue reached over HTTP or in the
// distributed store without Config.Namespace.
const NamespaceDefault = "default"

// isHTTP reports whether target is an http(s) URL.
func isHTTP(target string) bool {
	return strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://")
}

// StoreDriver is a store package's entry for Open: the targets it serves and how it
// opens one. Every store is given to Open explicitly, never registered behind the
// caller's back: persist/filestore's Driver() serves directory paths, persist/httpstore's
// http:// and https:// URLs, persist/lakestore's postgres:// and postgresql:// ones:
//
//	q, err := persist.Open(ctx, "rollouts", cfg, filestore.Driver(), httpstore.Driver(), lakestore.Driver())
//
// (persist cannot import them: they are built on persist, and they bring Parquet, the
// HTTP API types, PostgreSQL and the object-store drivers, which a program of another
// store does not need.)
type StoreDriver struct {
	// Schemes are the URL schemes (before "://", any case) of the targets the driver
	// serves.
	Schemes []string
	// Paths says the driver serves targets that are not URLs: directory paths (the
	// file store's), including the empty target of a Config without Dir, URL or
	// $LAKESHORE_URL, which such a store refuses with *InvalidError.
	Paths bool
	// Open opens the store of queue name at target (from Config.URL, Config.Dir or
	// $LAKESHORE_URL); cfg is the Config given to Open (nil when none was), whose
	// store-independent settings (FlushInterval, FlushRows, RowGroupRows,
	// PollInterval, Logger, Namespace, Existing, Samplers) the store may honour.
	Open func(ctx context.Context, name, target string, cfg *Config) (Store, error)
}

// FileStorePackage is the import path of the package whose Driver serves the
// directory paths of the file store.
const FileStorePackage = "github.com/lakeshore-dev/lakeshore/persist/filestore"

// HTTPStorePackage is the import path of the package whose Driver serves the http://
// and https:// targets of the HTTP store.
const HTTPStorePackage = "github.com/lakeshore-dev/lakeshore/persist/httpstore"

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

// driverFor returns the driver of drivers serving target: the one serving its scheme
// when target is a URL, the one serving paths when it is not.
func driverFor(target string, drivers []StoreDriver) (StoreDriver, bool) {
	scheme := schemeOf(target)
	for _, d := range drivers {
		if scheme == "" {
			if d.Paths && d.Open != nil {
				return d, true
			}
			continue
		}
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
	rule := "a directory path (with the Driver() of " + FileStorePackage + "), or a URL whose scheme a store driver given to Open serves " +
		"(http(s):// with the Driver() of " + HTTPStorePackage + ", postgres://…?blob=<bucket URL> with the Driver() of " + LakestorePackage + "); no store serves " + scheme + "://"
	switch scheme {
	case "":
		rule = "a target of a store given to Open: a directory path is the file store's, which this call was not given; pass " +
			"filestore.Driver() (package " + FileStorePackage + ") to persist.Open (the lakeshore command does)"
		return &InvalidError{Field: field, Value: target, Rule: rule}
	case "http", "https":
		rule = "a target of a store given to Open: " + scheme + ":// is the HTTP store, which this call was not given; pass " +
			"httpstore.Driver() (package " + HTTPStorePackage + ") to persist.Open (the lakeshore command does)"
	case "postgres", "postgresql":
		rule = "a target of a store given to Open: " + scheme + ":// is the distributed store, which this call was not given; pass " +
			"lakestore.Driver() (package " + LakestorePackage + ") to persist.Open (the lakeshore command does)"
	}
	return &InvalidError{Field: field, Value: plane.RedactURL(target), Rule: rule}
}

// resolveTarget says which of drivers Open uses for cfg, and its target: Config.URL,
// else Config.Dir, else $LAKESHORE_URL when Dir is empty. A target that is not a URL is
// a directory path, served by the driver with Paths (the file store's). Errors:
// *InvalidError for a non-URL $LAKESHORE_URL or Config.URL, and for a target no given
// driver serves (the error names the driver to give).
func (c *Config) resolveTarget(drivers []StoreDriver) (target string, open *StoreDriver, err error) {
	field := "queue option Dir"
	switch {
	case c != nil && c.URL != "":
		target, field = c.URL, "queue option URL"
	case c != nil && c.Dir != "":
		target = c.Dir
	default:
		target, field = os.Getenv(EnvURL), "$"+EnvURL
	}
	if schemeOf(target) == "" && field != "queue option Dir" && target != "" {
		return "", nil, &InvalidError{Field: field, Value: target, Rule: "an http:// or https:// URL, or a URL whose scheme a store driver given to Open serves (postgres://…?blob=…)"}
	}
	if d, ok := driverFor(target, drivers); ok {
		return target, &d, nil
	}
	return "", nil, unknownTarget(field, target)
}

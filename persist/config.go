package persist

import (
	"cmp"
	"log/slog"
	"net/http"
	"os"
	"time"
)

// Durability says when a put is acknowledged.
type Durability int

const (
	// Durable (the default) acknowledges a put after its transaction is fsynced
	// (SQLite synchronous=FULL): a returned index survives a crash of the process, of
	// the operating system and a power loss.
	Durable Durability = iota
	// Buffered acknowledges a put after its transaction is committed to the WAL without
	// fsync (synchronous=NORMAL; the WAL is fsynced at checkpoints): a returned index
	// survives a crash of the process (SIGKILL) but may be lost with the last writes on
	// an operating-system crash or power loss, which never corrupt meta.db. Fragments
	// are still fsynced before they enter the manifest.
	Buffered
)

// Defaults of Config.
const (
	BusyTimeoutDefault      = 30 * time.Second
	CacheBytesDefault       = 256 << 20
	CompactFragmentsDefault = 8
	CompactIntervalDefault  = 10 * time.Second
	FlushIntervalDefault    = 5 * time.Second
	FlushRowsDefault        = 50_000
	PollIntervalDefault     = 50 * time.Millisecond
	RowGroupRowsDefault     = 65_536
)

// Config configures Open. The zero value of every field but Dir means its default.
//
// Where the queue lives is configuration, not code: Open uses the HTTP store (a
// `lakeshore serve` on another machine) when URL is set, when Dir holds an http:// or
// https:// URL, or when Dir is empty and $LAKESHORE_URL is set; a store given to Open (the
// distributed one, lakestore.Driver()) when that target is a postgres:// URL; else the
// file store under Dir. The same program thus runs against a local directory, a server
// or PostgreSQL and object storage.
type Config struct {
	// BusyTimeout is how long a transaction waits for another process's write lock on
	// meta.db before failing. Defaults to BusyTimeoutDefault (30 s).
	BusyTimeout time.Duration
	// CacheBytes bounds the memory of decoded fragment column chunks kept for reads.
	// Defaults to CacheBytesDefault (256 MiB).
	CacheBytes int64
	// CompactFragments is how many small fragments of one level trigger a background
	// compaction that merges them into one. Defaults to CompactFragmentsDefault (8);
	// -1 disables background compaction (Compact still works).
	CompactFragments int
	// CompactInterval is how often the background compactor looks for work besides
	// after each flush. Defaults to CompactIntervalDefault (10 s).
	CompactInterval time.Duration
	// Dir is the root directory; the queue lives in Dir/{name}/. It may instead hold a
	// target URL (http(s)://… or postgres://…?blob=…; see Config). Required unless URL
	// or $LAKESHORE_URL names the target.
	Dir string
	// URL is the target when set: the server of the HTTP store
	// ("http://127.0.0.1:7077"), or the target of a store given to Open (postgres://…?blob=…); see
	// Config. The file-store fields below (Dir aside) do not apply to the HTTP store:
	// the server's own configuration does.
	URL string
	// Namespace is the queue's namespace (tenant) in stores that have namespaces: the
	// HTTP store's namespace on the server, and the distributed store's (a postgres://
	// target; persist/lakestore) namespace in its catalog, the same one a server
	// started with `lakeshore serve --data postgres://…` serves, so a program sees the
	// same queue through either. The file store has none (a directory is one tenant's).
	// Defaults to "default".
	Namespace string
	// Token is the bearer token the HTTP store sends. Defaults to $LAKESHORE_TOKEN.
	Token string
	// HTTPClient makes the HTTP store's requests. Defaults to a client keeping up to
	// 1,024 idle connections.
	HTTPClient *http.Client
	// Durability chooses Durable (the default) or Buffered acknowledgement of puts.
	Durability Durability
	// FlushInterval is the longest time a row waits in the tail before a background
	// flush writes it into a fragment. Defaults to FlushIntervalDefault (5 s); -1
	// disables interval flushes.
	FlushInterval time.Duration
	// FlushRows starts a background flush when the tail holds this many rows. Defaults
	// to FlushRowsDefault (50,000); -1 disables row-count flushes.
	FlushRows int
	// Logger receives warnings from background work. Defaults to a text logger on
	// stderr at level Warn.
	Logger *slog.Logger
	// PollInterval is how often the queue checks meta.db for changes made by other
	// processes, to wake waiting streams and readers. Defaults to PollIntervalDefault
	// (50 ms).
	PollInterval time.Duration
	// RowGroupRows is the largest number of rows in one Parquet row group (row groups
	// are also cut at 64 MiB of data). Defaults to RowGroupRowsDefault (65,536).
	RowGroupRows int
	// Existing opens only a queue that exists: Open of one that does not fails with a
	// *NotFoundError naming it (Queue; ErrNotFound) and creates nothing (no directory,
	// no catalog row). The HTTP store then also fails Open for a queue its server does
	// not have. Defaults to false: Open creates the queue (the HTTP store's server
	// creates it at its first put; reads before then are *NotFoundError).
	Existing bool
	// Samplers are the samplers GetMeta runs by name (MetaRequest.Sampler). The zero
	// value means DefaultSamplers(). The HTTP store ignores it: its server's stores run
	// the samplers of the server's configuration.
	Samplers Samplers
}

// WithDefaults returns c with each zero setting replaced by its default (the *Default
// constants; Samplers: DefaultSamplers; Logger: warnings and errors to standard error),
// as a store reads them.
func (c Config) WithDefaults() Config {
	c.BusyTimeout = cmp.Or(c.BusyTimeout, BusyTimeoutDefault)
	c.CacheBytes = cmp.Or(c.CacheBytes, CacheBytesDefault)
	c.CompactFragments = cmp.Or(c.CompactFragments, CompactFragmentsDefault)
	c.CompactInterval = cmp.Or(c.CompactInterval, CompactIntervalDefault)
	c.FlushInterval = cmp.Or(c.FlushInterval, FlushIntervalDefault)
	c.FlushRows = cmp.Or(c.FlushRows, FlushRowsDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.RowGroupRows = cmp.Or(c.RowGroupRows, RowGroupRowsDefault)
	c.Samplers = c.Samplers.orDefault()
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return c
}

// Validate checks the settings of c the file store reads (Dir a directory path, not a
// URL; every duration, size and count in its range). Errors: *InvalidError naming the
// setting and what it allows.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return &InvalidError{Field: "queue option Dir", Value: "", Rule: "a directory path, and none was given: set Config.Dir, or Config.URL or $LAKESHORE_URL to reach a server"}
	case isHTTP(c.Dir):
		return &InvalidError{Field: "queue option Dir", Value: c.Dir, Rule: "a directory path for the file store (open an http(s) URL with Open and httpstore.Driver())"}
	case schemeOf(c.Dir) != "":
		return unknownTarget("queue option Dir", c.Dir)
	case c.BusyTimeout < 0:
		return &InvalidError{Field: "queue option BusyTimeout", Value: c.BusyTimeout, Rule: "positive, or 0 for the default"}
	case c.CacheBytes < 0:
		return &InvalidError{Field: "queue option CacheBytes", Value: c.CacheBytes, Rule: "positive, or 0 for the default"}
	case c.CompactFragments < -1 || c.CompactFragments == 1:
		return &InvalidError{Field: "queue option CompactFragments", Value: c.CompactFragments, Rule: "at least 2, 0 for the default, or -1 to disable"}
	case c.CompactInterval < 0:
		return &InvalidError{Field: "queue option CompactInterval", Value: c.CompactInterval, Rule: "positive, or 0 for the default"}
	case c.Durability != Durable && c.Durability != Buffered:
		return &InvalidError{Field: "queue option Durability", Value: c.Durability, Rule: "Durable or Buffered"}
	case c.FlushInterval < 0 && c.FlushInterval != -1:
		return &InvalidError{Field: "queue option FlushInterval", Value: c.FlushInterval, Rule: "positive, 0 for the default, or -1 to disable"}
	case c.FlushRows < -1:
		return &InvalidError{Field: "queue option FlushRows", Value: c.FlushRows, Rule: "positive, 0 for the default, or -1 to disable"}
	case c.PollInterval < 0:
		return &InvalidError{Field: "queue option PollInterval", Value: c.PollInterval, Rule: "positive, or 0 for the default"}
	case c.RowGroupRows < 0:
		return &InvalidError{Field: "queue option RowGroupRows", Value: c.RowGroupRows, Rule: "positive, or 0 for the default"}
	}
	return nil
}

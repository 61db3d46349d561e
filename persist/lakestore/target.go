package lakestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Driver returns the distributed store's entry for persist.Open: it serves the targets
// "postgres://…?blob=<bucket URL>" and "postgresql://…" (see openTarget):
//
//	q, err := persist.Open(ctx, "rollouts", &persist.Config{URL: target}, lakestore.Driver())
func Driver() persist.StoreDriver {
	return persist.StoreDriver{Schemes: []string{"postgres", "postgresql"}, Open: openTarget}
}

// openTarget opens the store of a persist.Open target "postgres://…?blob=<bucket URL>"
// (see ParseTargetConfig: its settings win), with persist.Config's FlushInterval,
// FlushRows, RowGroupRows, PollInterval, Logger and Namespace (a queue opened with a
// namespace is kept apart from the queues of other namespaces; see Config.Namespace).
// The namespace defaults to persist.NamespaceDefault, as over HTTP, so persist.Open
// names the same queue with a postgres:// target as with the URL of a server serving
// that catalog.
func openTarget(ctx context.Context, name, target string, pc *persist.Config) (persist.Store, error) {
	t, err := ParseTargetConfig(target)
	if err != nil {
		return nil, err
	}
	if pc == nil {
		pc = &persist.Config{}
	}
	cfg := Config{FlushInterval: pc.FlushInterval, FlushRows: pc.FlushRows, RowGroupRows: pc.RowGroupRows, PollInterval: pc.PollInterval,
		Logger: pc.Logger, Namespace: cmp.Or(pc.Namespace, persist.NamespaceDefault), Existing: pc.Existing, Samplers: pc.Samplers}.overlay(t)
	return Open(ctx, name, &cfg)
}

// ListQueues returns the names of the queues of namespace in the catalog at catalog (a
// postgres:// URL), sorted: the queues opened with Config.Namespace = namespace. A
// catalog no store has migrated yet has none. Errors: *persist.InvalidError for a bad
// URL or namespace, connection errors as Open's.
func ListQueues(ctx context.Context, catalog, namespace string) ([]string, error) {
	if err := persist.CheckName("namespace", namespace); err != nil {
		return nil, err
	}
	if !plane.IsPostgresURL(catalog) {
		return nil, &persist.InvalidError{Field: "catalog", Value: plane.RedactURL(catalog), Rule: "a postgres:// or postgresql:// URL"}
	}
	pc, err := pgdb.ParseConfig("catalog", catalog) // pgx's own error repeats the URL
	if err != nil {
		return nil, err
	}
	cc := pc.ConnConfig
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, &connectError{err: pgdb.Classify(cc, err)}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	prefix := catalogKey(namespace, "")
	rows, err := conn.Query(ctx, `SELECT substr(queue, $2) FROM `+catalogSchema+`.queues WHERE starts_with(queue, $1) ORDER BY queue`,
		prefix, len(prefix)+1)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined table or schema: nothing migrated yet
			return []string{}, nil
		}
		return nil, catalogFailure(ctx, cc, fmt.Errorf("lakestore: list queues: %w", err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, catalogFailure(ctx, cc, fmt.Errorf("lakestore: list queues: %w", err))
	}
	return out, nil
}

// Stores opens the queues of one catalog and bucket by namespace: the data queues
// `lakeshore serve --data postgres://…?blob=…` serves (it is a server.DataStores). Each
// queue opened is its own Store (its own catalog pool and bucket handle).
type Stores struct {
	cfg Config
}

// NewStores returns the Stores of target, a "postgres://…?blob=<bucket URL>" as
// ParseTargetConfig reads it (the settings it carries win), with cfg's other settings
// (nil: defaults; its Catalog, Blob and Namespace are ignored). Errors:
// *persist.InvalidError for a bad target or Config.
func NewStores(target string, cfg *Config) (*Stores, error) {
	t, err := ParseTargetConfig(target)
	if err != nil {
		return nil, err
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c = c.overlay(t)
	c.Namespace = ""
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Stores{cfg: c}, nil
}

// Open opens queue in namespace (Config.Namespace), creating it when create is true;
// else a queue the catalog does not have is *persist.NotFoundError and nothing is added.
// Errors are Open's, except that a catalog the server cannot connect to is
// plane.ErrUnavailable whatever refused it (serving).
func (s *Stores) Open(ctx context.Context, namespace, queue string, create bool) (persist.Store, error) {
	c := s.cfg
	c.Namespace = namespace
	c.Existing = !create
	st, err := Open(ctx, queue, &c)
	if err != nil {
		return nil, serving(err)
	}
	return st, nil
}

// List returns the queues of namespace (ListQueues; its errors as Open's).
func (s *Stores) List(ctx context.Context, namespace string) ([]string, error) {
	names, err := ListQueues(ctx, s.cfg.Catalog, namespace)
	return names, serving(err)
}

// serving returns err, an error of Stores, as the server's callers are to see it: a failure
// to connect to the catalog is unavailable (pgdb.Unreachable), even when the catalog refused
// the server's password (not the caller's: over HTTP plane.ErrUnauthorized reads as the
// caller's token refused) or has no such database (else an internal error), as pgplane's
// failures to connect mid-run are; so the server answers 502 and a client moves to
// another replica.
func serving(err error) error {
	var ce *connectError
	if errors.As(err, &ce) {
		return pgdb.Unreachable(err)
	}
	return err
}

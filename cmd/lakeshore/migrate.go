package main

import (
	"cmp"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
)

func newMigrateCmd(a *app) *cobra.Command {
	var (
		check  bool
		schema string
	)
	c := &cobra.Command{
		Use:   "migrate [--check] [--schema NAME]",
		Short: "Bring a PostgreSQL plane's schema up to this build's version, or check it with --check",
		Long: `Migrate applies the embedded schema migrations of the PostgreSQL plane named by --target
(or $LAKESHORE_URL), a postgres:// or postgresql:// URL, under --schema (or the URL's
schema= parameter; the two must agree when both are given). Concurrent
migrators are serialised by the database; each migration is one transaction. Opening a
plane migrates it too: run migrate ahead of a rolling upgrade to do it once, in one place.

With --check nothing is written: it prints the schema's version and this build's, and exits
0 when they match, 1 when migrations are pending, and 5 when the schema is newer than this
build (which every verb, serve and worker refuse to run against).

SQLite planes migrate their file when opened, and a server migrates its own plane: migrate
refuses other targets.`,
		Example: `  lakeshore migrate --target postgres://lakeshore@db.internal/jobs --check
  LAKESHORE_URL=postgres://lakeshore@db.internal/jobs lakeshore migrate`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			target := a.planeURL()
			if plane.IsMiscasedPostgresURL(target) {
				return usagef("migrate --target %s: %s", plane.RedactURL(target), plane.PostgresURLRule)
			}
			if !plane.IsPostgresURL(target) {
				return usagef("migrate needs a postgres:// or postgresql:// --target (or $LAKESHORE_URL); SQLite planes migrate when opened and servers migrate their own plane")
			}
			_, fromURL, err := pgplane.ParseURL(target, &pgplane.Config{Schema: schema}) // ?schema= or --schema
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			schema = cmp.Or(fromURL.Schema, pgplane.SchemaDefault)
			pool, err := pgplane.OpenPool(c.Context(), target)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			defer pool.Close()
			before, err := pgplane.CurrentVersion(c.Context(), pool, schema)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			after, latest := before, pgplane.SchemaVersion()
			if before > latest {
				return fmt.Errorf("migrate: schema %s is at version %d, this build knows up to %d: upgrade lakeshore: %w",
					schema, before, latest, pgplane.ErrSchemaNewer)
			}
			if !check && before < latest {
				if err := pgplane.Migrate(c.Context(), pool, schema); err != nil {
					return fmt.Errorf("migrate: %w", err)
				}
				after = latest
			}
			status := "up to date"
			switch {
			case after < latest:
				status = "migrations pending: run lakeshore migrate"
			case before < after:
				status = fmt.Sprintf("migrated from version %d", before)
			}
			if a.json {
				err = a.printJSON(map[string]any{"schema": schema, "version": after, "build_version": latest,
					"previous_version": before, "up_to_date": after == latest})
			} else {
				_, err = fmt.Fprintf(a.stdout, "schema %s: version %d (this build: %d): %s\n", schema, after, latest, status)
			}
			if err == nil && after < latest {
				return silentExit(exitJobFailed)
			}
			return err
		},
	}
	c.Flags().BoolVar(&check, "check", false, "print the schema's version and exit non-zero when it is behind or newer; write nothing")
	c.Flags().StringVar(&schema, "schema", "", `PostgreSQL schema holding the plane's tables (default "`+pgplane.SchemaDefault+`")`)
	return c
}

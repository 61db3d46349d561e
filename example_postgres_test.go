package lakeshore_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
)

// Run the PostgreSQL plane on a pool the application already has. pgplane.New returns the
// driver and an error, and lakeshore.New takes the driver and a Config, so the two calls
// stay two: lakeshore.New(pgplane.New(pool, cfg)) does not compile. The pool stays the
// application's: neither Dispatch.Close nor the driver's Close closes it. (Not run: it needs
// a database; TestNewOnPostgresPool runs the same steps on the test server.)
func ExampleNew_postgres() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // the application's pool
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	drv, err := pgplane.New(pool, &pgplane.Config{Schema: "jobs"}) // migrates schema "jobs"
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close() // stops the plane; the pool stays open
	d := lakeshore.New(drv, &lakeshore.Config{Namespace: "examples"})

	q, err := d.Queue("embed", nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.Submit(ctx, map[string]any{"doc": 1}, nil); err != nil {
		log.Fatal(err)
	}
}

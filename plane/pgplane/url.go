package pgplane

import (
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// URL parameters of the plane. Open, OpenPool and ParseURL read them from a database URL
// (postgres://…?schema=jobs&poll_only=true) or a key=value connection string (… schema=jobs)
// and remove them before connecting: pgx sends every parameter it does not know to the
// server as a run-time setting, and PostgreSQL refuses the connection over one it does not
// know ("unrecognized configuration parameter"). They reach the plane where only a URL
// can be given: --target and $LAKESHORE_URL of every CLI verb, `serve` and `worker`.
const (
	// URLSchema sets Config.Schema.
	URLSchema = "schema"
	// URLPollOnly sets Config.PollOnly: true or false (also 1/0, t/f).
	URLPollOnly = "poll_only"
	// URLPollInterval sets Config.PollInterval: a Go duration, e.g. 500ms.
	URLPollInterval = "poll_interval"
	// URLRetention sets Config.Retention: a Go duration, e.g. 6h; negative keeps terminal
	// jobs forever.
	URLRetention = "retention"
)

// ParseURL parses url as Open does (a postgres:// URL or a key=value connection string,
// with the PG* environment variables as defaults) and returns the pool's configuration,
// with the plane's URL parameters (URLSchema, URLPollOnly, URLPollInterval, URLRetention)
// removed, and a copy of cfg (nil: the zero Config) with those parameters applied. A
// parameter and a field of cfg that both set a value must agree. Defaults are not filled
// in. Errors: *plane.InvalidError (never showing the password) for a URL that does not
// parse, a parameter value that does not parse, or a parameter that contradicts cfg
// (planekit.URLParams).
func ParseURL(url string, cfg *Config) (*pgxpool.Config, *Config, error) {
	var out Config
	if cfg != nil {
		out = *cfg
	}
	if plane.IsMiscasedPostgresURL(url) {
		return nil, nil, &plane.InvalidError{Field: "database URL", Value: plane.RedactURL(url), Rule: plane.PostgresURLRule}
	}
	if scheme, _, ok := strings.Cut(url, "://"); ok && !plane.IsPostgresURL(url) && !strings.ContainsAny(scheme, " =") {
		return nil, nil, &plane.InvalidError{Field: "database URL", Value: plane.RedactURL(url),
			Rule: "use a postgres:// or postgresql:// URL (" + strconv.Quote(scheme) + " is not PostgreSQL's scheme), or a key=value connection string"}
	}
	pc, err := pgdb.ParseConfig("database URL", url)
	if err != nil {
		return nil, nil, err
	}
	params := planekit.URLParams(pc.ConnConfig.RuntimeParams)
	if err := params.String(URLSchema, &out.Schema, validateSchema); err != nil {
		return nil, nil, err
	}
	if err := params.Bool(URLPollOnly, &out.PollOnly); err != nil {
		return nil, nil, err
	}
	if err := params.Duration(URLPollInterval, &out.PollInterval, "use a positive duration, e.g. 500ms or 2s",
		func(d time.Duration) bool { return d > 0 }); err != nil {
		return nil, nil, err
	}
	if err := params.Duration(URLRetention, &out.Retention, "use a non-zero duration, e.g. 6h or 168h (negative: keep forever)",
		func(d time.Duration) bool { return d != 0 }); err != nil {
		return nil, nil, err
	}
	return pc, &out, nil
}

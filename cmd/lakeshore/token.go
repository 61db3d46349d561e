package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TokenCreateOpts are the options of `lakeshore token create`.
type TokenCreateOpts struct {
	// Target is the plane that stores the token: the served plane's file, or the server's
	// URL (then $LAKESHORE_TOKEN must be the admin token).
	Target string
	// ID names the token. Defaults to a ULID.
	ID string
	// Namespace is a glob (path.Match) of the namespaces the token covers. Defaults to the
	// current namespace ($LAKESHORE_NAMESPACE, else "default"), never to every namespace:
	// "*" must be asked for.
	Namespace string
	// Queue is a glob of the queues it covers. Defaults to "*": every queue of Namespace.
	Queue string
	// Can lists the permissions: submit, consume, read, admin, data:put, data:read.
	Can []string
	// TTL is how long the token lives; 0: forever.
	TTL time.Duration
	// JSON prints one JSON object instead of text.
	JSON bool
}

// tokenPermissions lists the permissions --can takes, for its errors: every one of them,
// data:put and data:read included (a missing --can named only the first four).
const tokenPermissions = "submit,consume,read,admin,data:put,data:read"

// Validate checks o. Errors: *plane.InvalidError naming the flag.
func (o *TokenCreateOpts) Validate() error {
	if len(o.Can) == 0 {
		return plane.Invalid("--can", nil, "name at least one of "+tokenPermissions)
	}
	for _, c := range o.Can {
		switch plane.Permission(c) {
		case plane.PermissionSubmit, plane.PermissionConsume, plane.PermissionRead, plane.PermissionAdmin,
			plane.PermissionDataPut, plane.PermissionDataRead:
		default:
			return plane.Invalid("--can", c, "use "+tokenPermissions)
		}
	}
	if o.TTL < 0 {
		return plane.Invalid("--ttl", o.TTL, "use a duration ≥ 0 (0: never expires)")
	}
	return nil
}

// RunTokenCreate makes a random secret, stores its hash in the plane and prints the secret
// once to out. A defaulted scope is said on notes (the command's stderr).
func RunTokenCreate(ctx context.Context, o *TokenCreateOpts, out, notes io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	ns := o.Namespace
	if ns == "" {
		ns = cmp.Or(os.Getenv(lakeshore.EnvNamespace), lakeshore.NamespaceDefault)
		fmt.Fprintf(notes, "lakeshore token: scope defaults to namespace %q (the current namespace); pass --namespace '*' for every namespace\n", ns)
	}
	d, err := lakeshore.Open(ctx, o.Target, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	perms := make([]lakeshore.Permission, len(o.Can))
	for i, c := range o.Can {
		perms[i] = lakeshore.Permission(c)
	}
	secret, tok, err := d.Admin().CreateToken(ctx, &lakeshore.TokenOptions{ID: o.ID, Namespace: ns,
		Queue: cmp.Or(o.Queue, "*"), Permissions: perms, TTL: o.TTL})
	if err != nil {
		return err
	}
	if target := cmp.Or(o.Target, os.Getenv(lakeshore.EnvURL)); isHTTPTarget(target) && os.Getenv(lakeshore.EnvToken) == "" {
		// A server with authentication refuses an admin verb without a token: this one has
		// none, and checks no token, so the scope just printed restricts nobody yet.
		fmt.Fprintf(notes, "lakeshore token: note: %s took this request without a token, so it runs without authentication "+
			"and checks no token, this one included: a client without a token, or with any, may do everything; "+
			"tokens take effect once the server is started with an admin token (LAKESHORE_ADMIN_TOKEN or --admin-token-file)\n",
			plane.RedactURL(target))
	}
	if o.JSON {
		return printJSONTo(out, tokenJSON{ID: tok.ID, Namespace: tok.Namespace, Queue: tok.Queue, Can: o.Can,
			CreatedAt: tok.CreatedAt.UTC(), ExpiresAt: optTime(tok.ExpiresAt), Token: secret})
	}
	expires := "never"
	if !tok.ExpiresAt.IsZero() {
		expires = tok.ExpiresAt.UTC().Format(time.RFC3339)
	}
	_, err = fmt.Fprintf(out, "id:      %s\nscope:   %s/%s\ncan:     %s\nexpires: %s\ntoken:   %s\n\nThe token is shown once; only its hash is stored. Clients send it as LAKESHORE_TOKEN.\n",
		tok.ID, tok.Namespace, tok.Queue, strings.Join(o.Can, ","), expires, secret)
	return err
}

// tokenJSON is a token as `--json` prints it: one object per line.
// Its fields are in alphabetical order of their keys, as in every --json object of the CLI.
type tokenJSON struct {
	Can       []string   `json:"can"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"` // null: never
	ID        string     `json:"id"`
	Namespace string     `json:"namespace"`
	Queue     string     `json:"queue"`
	Status    string     `json:"status,omitempty"`
	Token     string     `json:"token,omitempty"` // the secret, by create only
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func printJSONTo(out io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("print JSON: %w", err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// RunTokenList prints every token (never a secret or hash) to out: a table, or one JSON
// object per line when jsonOut.
func RunTokenList(ctx context.Context, target string, jsonOut bool, out io.Writer) error {
	d, err := lakeshore.Open(ctx, target, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	toks, err := d.Admin().Tokens(ctx)
	if err != nil {
		return fmt.Errorf("list tokens: %w", err)
	}
	tw := newTable(out)
	if !jsonOut {
		tw.row("ID", "NAMESPACE", "QUEUE", "CAN", "CREATED", "EXPIRES", "STATUS")
	}
	now := plane.ClockOf(d.Driver())() // the clock the server checks expiries on
	for _, t := range toks {
		perms := make([]string, len(t.Permissions))
		for i, p := range t.Permissions {
			perms[i] = string(p)
		}
		status, expires := "live", "never"
		if !t.ExpiresAt.IsZero() {
			expires = t.ExpiresAt.UTC().Format(time.RFC3339)
			if !now.Before(t.ExpiresAt) {
				status = "expired"
			}
		}
		if !t.RevokedAt.IsZero() {
			status = "revoked"
		}
		if jsonOut {
			if err := printJSONTo(out, tokenJSON{ID: t.ID, Namespace: t.Namespace, Queue: t.Queue, Can: perms,
				CreatedAt: t.CreatedAt.UTC(), ExpiresAt: optTime(t.ExpiresAt), Status: status}); err != nil {
				return err
			}
			continue
		}
		tw.row(t.ID, t.Namespace, t.Queue, strings.Join(perms, ","),
			t.CreatedAt.UTC().Format(time.RFC3339), expires, status)
	}
	return tw.Flush()
}

// RunTokenRevoke revokes token id and says whether it was live (as {"id", "revoked"} when
// jsonOut).
func RunTokenRevoke(ctx context.Context, target, id string, jsonOut bool, out io.Writer) error {
	d, err := lakeshore.Open(ctx, target, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	ok, err := d.Admin().RevokeToken(ctx, id)
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	if jsonOut {
		return printJSONTo(out, map[string]any{"id": id, "revoked": ok})
	}
	if ok {
		_, err = fmt.Fprintf(out, "revoked %s\n", id)
	} else {
		_, err = fmt.Fprintf(out, "%s was already revoked\n", id)
	}
	return err
}

// newTokenCmd is `lakeshore token create|list|revoke`, on the plane named by the global
// --target. They print JSON (one object per line) with the global --json.
func newTokenCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:  "token",
		Args: cobra.ArbitraryArgs,
		RunE: unknownSubcommand,
		// One-shot verbs: fail fast on a server that refuses connections.
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if err := a.reach.check(c.Context(), a.planeURL(), a.stderr); err != nil {
				return fmt.Errorf("open plane: %w", err)
			}
			return nil
		},
		Short: "Create, list and revoke access tokens of a served plane",
		Long: `Access tokens let clients of 'lakeshore serve' submit, consume or read on the queues
their namespace and queue globs cover. Tokens are random, shown once, and stored only as
SHA-256 hashes in the plane. Run these next to the plane's file (--target), or against the
server's URL with the admin token in LAKESHORE_TOKEN. A server started without an admin token
(LAKESHORE_ADMIN_TOKEN or --admin-token-file) checks no token at all: the tokens stored in
its plane take effect once it is started with one.`,
	}

	co := &TokenCreateOpts{}
	create := &cobra.Command{
		Use:   "create --can PERMS [--namespace GLOB] [--queue GLOB]",
		Short: "Create a token and print its secret once",
		Long: `Create a token and print its secret once. Its scope is --namespace (default: the
current namespace, $LAKESHORE_NAMESPACE else "default", which is said on stderr — never
every namespace unless you pass --namespace '*') and --queue (default "*": every queue of
that namespace).`,
		Example: `  lakeshore token create --can submit,read --namespace team-a
  lakeshore token create --can consume --namespace team-a --queue 'embed-*' --ttl 720h`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			co.Target = a.target
			co.JSON = a.json
			return RunTokenCreate(c.Context(), co, a.stdout, a.stderr)
		},
	}
	f := create.Flags()
	f.StringVar(&co.ID, "id", "", "token id (default: a ULID)")
	f.StringVar(&co.Namespace, "namespace", "", "namespace glob (default: the current namespace; '*' for all)")
	f.StringVar(&co.Queue, "queue", "*", "queue glob")
	f.StringSliceVar(&co.Can, "can", nil, "permissions: submit,consume,read,admin,data:put,data:read")
	f.DurationVar(&co.TTL, "ttl", 0, "lifetime, e.g. 720h (default: never expires)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			return RunTokenList(c.Context(), a.target, a.json, a.stdout)
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return RunTokenRevoke(c.Context(), a.target, args[0], a.json, a.stdout)
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

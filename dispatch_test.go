package lakeshore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

func TestResolveTarget(t *testing.T) {
	t.Parallel()

	noHome := func() (string, error) { return "", errors.New("no home directory") }
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}

	t.Run("Paths", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ target, want string }{
			{":memory:", ":memory:"},
			{"/var/lib/lakeshore/jobs.db", "/var/lib/lakeshore/jobs.db"},
			{"jobs.db", "jobs.db"},
			{"./data/jobs.db", "./data/jobs.db"},
			{"sqlite:///var/lib/jobs.db", "/var/lib/jobs.db"},
			{"sqlite://jobs.db", "jobs.db"},
			{"SQLite://jobs.db", "jobs.db"},
			{"sqlite://:memory:", ":memory:"},
		} {
			got, err := resolveTarget(tc.target, env(nil), noHome)
			require.NoError(t, err, tc.target)
			require.Equal(t, tc.want, got, tc.target)
		}
	})

	t.Run("DefaultHomeCreated0700", func(t *testing.T) {
		t.Parallel()
		home := filepath.Join(t.TempDir(), "nested", "lakeshore-home")
		got, err := resolveTarget("", env(map[string]string{EnvHome: home}), noHome)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(home, "lakeshore.db"), got)
		fi, err := os.Stat(home)
		require.NoError(t, err)
		require.True(t, fi.IsDir())
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	})

	t.Run("DefaultUserHome", func(t *testing.T) {
		t.Parallel()
		user := t.TempDir()
		got, err := resolveTarget("", env(nil), func() (string, error) { return user, nil })
		require.NoError(t, err)
		require.Equal(t, filepath.Join(user, ".lakeshore", "lakeshore.db"), got)
		fi, err := os.Stat(filepath.Join(user, ".lakeshore"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	})

	t.Run("DefaultNoHome", func(t *testing.T) {
		t.Parallel()
		_, err := resolveTarget("", env(nil), noHome)
		require.ErrorContains(t, err, "LAKESHORE_HOME")
	})

	t.Run("LakeshoreURL", func(t *testing.T) {
		t.Parallel()
		home := filepath.Join(t.TempDir(), "home")
		got, err := resolveTarget("", env(map[string]string{EnvURL: "http://plane:8080", EnvHome: home}), noHome)
		require.NoError(t, err)
		require.Equal(t, "http://plane:8080", got)
		require.NoDirExists(t, home, "LAKESHORE_URL wins: the SQLite home must not be created")

		_, err = resolveTarget("", env(map[string]string{EnvURL: "ftp://plane", EnvHome: home}), noHome)
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "LAKESHORE_URL")
		require.ErrorContains(t, err, "http(s)://")
		require.NoDirExists(t, home)
	})

	t.Run("HTTP", func(t *testing.T) {
		t.Parallel()
		for _, target := range []string{"http://localhost:8080", "https://plane.example.com/prefix"} {
			got, err := resolveTarget(target, env(nil), noHome)
			require.NoError(t, err, target)
			require.Equal(t, target, got)
		}
	})

	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		for _, target := range []string{"postgres://u@db/lakeshore", "postgresql://u@db:5432/lakeshore"} {
			got, err := resolveTarget(target, env(nil), noHome)
			require.NoError(t, err, target)
			require.Equal(t, target, got)
			require.True(t, plane.IsPostgresURL(got), target)
		}
		// libpq and pgx read a URL only in lower case: "POSTGRES://…" reached pgx as a
		// keyword/value string, refused in words naming the URL lower-cased.
		for _, target := range []string{"POSTGRES://u@db/x", "Postgresql://u@db/x"} {
			_, err := resolveTarget(target, env(nil), noHome)
			var inv *InvalidError
			require.ErrorAs(t, err, &inv, target)
			require.Equal(t, "target", inv.Field)
			require.Equal(t, plane.PostgresURLRule, inv.Rule, target)
			_, err = resolveTarget("", env(map[string]string{EnvURL: target}), noHome)
			require.ErrorAs(t, err, &inv, target)
			require.Equal(t, EnvURL, inv.Field)
			require.Equal(t, plane.PostgresURLRule, inv.Rule, target)
		}
		home := filepath.Join(t.TempDir(), "home")
		got, err := resolveTarget("", env(map[string]string{EnvURL: "postgres://u@db/lakeshore", EnvHome: home}), noHome)
		require.NoError(t, err)
		require.Equal(t, "postgres://u@db/lakeshore", got, "LAKESHORE_URL may name a PostgreSQL plane")
		require.NoDirExists(t, home)
	})

	t.Run("UnknownScheme", func(t *testing.T) {
		t.Parallel()
		for _, target := range []string{"ftp://host/x.db", "redis://localhost", "file:///tmp/x.db", "s3://bucket/key"} {
			_, err := resolveTarget(target, env(nil), noHome)
			require.ErrorIs(t, err, ErrInvalid, target)
			var inv *InvalidError
			require.ErrorAs(t, err, &inv, target)
			require.Equal(t, "target", inv.Field)
			require.Equal(t, target, inv.Value)
			for _, form := range []string{`""`, `":memory:"`, "a file path", "sqlite://path", "http(s)://", "postgres://"} {
				require.ErrorContains(t, err, form, target)
			}
		}
	})

	t.Run("SQLiteWithoutPath", func(t *testing.T) {
		t.Parallel()
		_, err := resolveTarget("sqlite://", env(nil), noHome)
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "sqlite:// needs a path")
	})
}

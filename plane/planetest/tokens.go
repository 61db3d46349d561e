package planetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

func testTokens(t *testing.T, s *suite) {
	t.Run("StoppedTokensTrimmedAfterRetention", func(t *testing.T) {
		// A token revoked or expired more than the retention period ago
		// (plane.RetentionDefault) is deleted by maintenance; a live one, and one stopped
		// since, are kept. Before, every revoked token stayed for ever: a provider
		// supervisor revokes one per launch.
		t.Parallel()
		b := s.setup(t, config{})
		prefix := b.ns + "-" // the tokens table is the plane's, shared by parallel cases
		create := func(id string, expires time.Time) {
			_, hash := plane.NewTokenSecret()
			must(t, b.drv.TokenCreate(b.ctx, &plane.TokenInfo{ID: prefix + id, Hash: hash, Namespace: b.ns, Queue: "*",
				Permissions: []plane.Permission{plane.PermissionRead}, CreatedAt: b.now(), ExpiresAt: expires}), "create "+id)
		}
		listed := func() []string {
			list, err := b.drv.TokenList(b.ctx)
			must(t, err, "list tokens")
			var ids []string
			for _, tok := range list {
				if len(tok.ID) > len(prefix) && tok.ID[:len(prefix)] == prefix {
					ids = append(ids, tok.ID[len(prefix):])
				}
			}
			return ids
		}
		create("live", time.Time{})
		create("revoked", time.Time{})
		create("expiring", b.now().Add(time.Hour))
		create("revoked-later", time.Time{})
		live, err := b.drv.TokenRevoke(b.ctx, prefix+"revoked")
		must(t, err, "revoke")
		require.True(t, live, "the token was live")

		b.advance(plane.RetentionDefault - time.Minute)
		_, err = b.drv.TokenRevoke(b.ctx, prefix+"revoked-later")
		must(t, err, "revoke later")
		b.maintain(t)
		require.ElementsMatch(t, []string{"live", "revoked", "expiring", "revoked-later"}, listed(),
			"stopped less than the retention period ago: kept")

		b.advance(2 * time.Minute)
		b.maintain(t)
		require.ElementsMatch(t, []string{"live", "expiring", "revoked-later"}, listed(), "revoked past retention: trimmed")

		b.advance(time.Hour)
		b.maintain(t)
		require.ElementsMatch(t, []string{"live", "revoked-later"}, listed(), "expired past retention: trimmed")
	})
}

package provider_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/localprovider"
)

// launchTokenOf launches one worker of queue on r's local provider under s and returns
// its launch id and the LAKESHORE_TOKEN its process was given (the worker writes it to a
// file and waits).
func launchTokenOf(t *testing.T, r *rig, s *provider.Supervisor, logs *logBuffer, queue string, env map[string]string) (id, token string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "token")
	r.setProvider(queue, plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 1, Env: env,
		Command: []string{"sh", "-c", `printf %s "$LAKESHORE_TOKEN" > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60`, out}})
	r.submit(queue, 1)
	r.tick(s)
	launched := regexp.MustCompile(`msg="provider supervisor: launched".* queue=` + queue + ` .* launch=(\w+)`).FindStringSubmatch(logs.String())
	if launched == nil {
		t.Fatalf("no launch:\n%s", logs.String())
	}
	waitUntil(t, "the worker writes its token", func() bool { _, err := os.Stat(out); return err == nil })
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return launched[1], string(b)
}

// endLaunch stops launch id and waits until its worker is gone.
func endLaunch(t *testing.T, r *rig, id string) {
	t.Helper()
	if err := r.local.Stop(t.Context(), id, 0); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the worker ends", func() bool { return !slices.Contains(r.launches(), id) })
}

// tickTwice ticks s twice, a second apart: after a launch ended, the first List leaves it
// out and the second confirms it, which revokes its token.
func tickTwice(r *rig, s *provider.Supervisor) {
	for range 2 {
		r.clock.add(time.Second)
		r.tick(s)
	}
}

// requireRevoked fails t unless the worker's token (its secret) is stored and revoked;
// by says by whom it should have been (appended to the failure).
func requireRevoked(t *testing.T, r *rig, token, by string) {
	t.Helper()
	if tok, err := r.drv.TokenGet(t.Context(), plane.HashTokenSecret(token)); err != nil || tok.RevokedAt.IsZero() {
		t.Fatalf("after its launch ended, the worker's token is %+v (%v), want revoked%s", tok, err, by)
	}
}

// TestSupervisorLaunchGetsItsOwnToken: a launched worker runs its submitters' code
// (shipped code, thunks), which can read its environment, so it must not hold the
// supervisor's token, an admin token (of the server, or of the namespace). Each launch
// gets a token of its own — id launch-<launch id>, every permission but admin on the
// queue's namespace only — revoked when the launch ends; a policy that sets
// LAKESHORE_TOKEN keeps its own. Before, every launch got the supervisor's token: a
// submit-only tenant whose job ran on a launched worker read the server's admin token.
func TestSupervisorLaunchGetsItsOwnToken(t *testing.T) {
	r := newRig(t)
	const own = "supervisor-admin-token-1"
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, func(c *provider.SupervisorConfig) {
		c.WorkerEnv = map[string]string{"LAKESHORE_TOKEN": own}
	})
	id, token := launchTokenOf(t, r, s, logs, "minted", nil)
	if token == own || !strings.HasPrefix(token, plane.TokenSecretPrefix) {
		t.Fatalf("the worker got LAKESHORE_TOKEN %q, want a token of its own (not the supervisor's %q)", token, own)
	}
	tok, err := r.drv.TokenGet(t.Context(), plane.HashTokenSecret(token))
	if err != nil {
		t.Fatalf("the worker's token is not stored: %v", err)
	}
	if tok.ID != provider.LaunchTokenID(id) || tok.Namespace != "default" || tok.Queue != "*" ||
		!slices.Equal(tok.Permissions, provider.LaunchTokenPermissions) || slices.Contains(tok.Permissions, plane.PermissionAdmin) ||
		!tok.RevokedAt.IsZero() {
		t.Fatalf("the worker's token is %+v; want id %s on default/* with %v, live", tok, provider.LaunchTokenID(id), provider.LaunchTokenPermissions)
	}
	if strings.Contains(logs.String(), token) {
		t.Fatalf("the log quotes the worker's token:\n%s", logs.String())
	}

	// The launch ends (it crashed, or was stopped): its token is revoked at the tick whose
	// List still leaves it out (TestSupervisorLaunchTokenSurvivesAListThatMissesIt).
	endLaunch(t, r, id)
	tickTwice(r, s)
	requireRevoked(t, r, token, "")

	// A policy that gives its workers a token of its own keeps it; nothing is minted.
	_, token = launchTokenOf(t, r, s, logs, "chosen", map[string]string{"LAKESHORE_TOKEN": "operator-chosen-token"})
	if token != "operator-chosen-token" {
		t.Fatalf("the worker of a policy setting LAKESHORE_TOKEN got %q", token)
	}
}

// refusingTokens is a plane whose TokenCreate is refused as a namespace's admin token is
// refused by a server (only the server's admin token creates tokens).
type refusingTokens struct{ plane.Driver }

func (refusingTokens) TokenCreate(context.Context, *plane.TokenInfo) error {
	return plane.ErrForbidden
}

// TestSupervisorLaunchTokenRefused: a supervisor whose token may not create tokens (a
// namespace's admin) still launches, with its own token as before, and says once, as a
// warning, that its workers hold it and what to do.
func TestSupervisorLaunchTokenRefused(t *testing.T) {
	r := newRig(t)
	const own = "supervisor-namespace-admin"
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	r.drv = refusingTokens{r.drv}
	s := r.supervisor(reg, logs, func(c *provider.SupervisorConfig) {
		c.WorkerEnv = map[string]string{"LAKESHORE_TOKEN": own}
	})
	if _, token := launchTokenOf(t, r, s, logs, "refused", nil); token != own {
		t.Fatalf("the worker got %q, want the supervisor's token", token)
	}
	if _, token := launchTokenOf(t, r, s, logs, "refused2", nil); token != own {
		t.Fatalf("the second worker got %q, want the supervisor's token", token)
	}
	if n := strings.Count(logs.String(), "refused a token for the launched workers"); n != 1 {
		t.Fatalf("the refusal is logged %d times, want once:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), own) {
		t.Fatalf("the log quotes the supervisor's token:\n%s", logs.String())
	}
}

// blinkingList is the local provider whose List leaves every launch out while hide is set:
// a provider whose view lags (a Kubernetes list served from a stale cache, a squeue that
// misses a job for a moment).
type blinkingList struct {
	*localprovider.Provider
	hide atomic.Bool
}

func (b *blinkingList) List(ctx context.Context) ([]provider.LaunchStatus, error) {
	if b.hide.Load() {
		return nil, nil
	}
	return b.Provider.List(ctx)
}

// TestSupervisorLaunchTokenSurvivesAListThatMissesIt: a token is revoked only once its
// launch stays out of its provider's List at the next tick too. Before, one List that left
// a running launch out revoked its token at once: the supervisor adopted the launch again
// at the next tick, but its worker, still running, could no longer claim or settle.
func TestSupervisorLaunchTokenSurvivesAListThatMissesIt(t *testing.T) {
	r := newRig(t)
	blink := &blinkingList{Provider: r.local}
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, func(c *provider.SupervisorConfig) {
		c.WorkerEnv = map[string]string{"LAKESHORE_TOKEN": "supervisor-admin-token-1"}
		c.Resolve = func(string) (provider.Provider, error) { return blink, nil }
	})
	id, token := launchTokenOf(t, r, s, logs, "blink", nil)
	live := func(when string) {
		t.Helper()
		if tok, err := r.drv.TokenGet(t.Context(), plane.HashTokenSecret(token)); err != nil || !tok.RevokedAt.IsZero() {
			t.Fatalf("%s, the running worker's token is %+v (%v), want live", when, tok, err)
		}
	}
	r.clock.add(time.Second) // past the grace of a launch not listed yet
	blink.hide.Store(true)
	r.tick(s)
	live("after one List that left its launch out")
	blink.hide.Store(false)
	r.tick(s)
	live("once its launch is listed again")
	r.clock.add(time.Second)
	r.tick(s)
	live("a tick later")
	if !slices.Contains(r.launches(), id) {
		t.Fatalf("launch %s no longer runs", id)
	}

	// It really ends: revoked at the tick that finds it still gone.
	endLaunch(t, r, id)
	tickTwice(r, s)
	requireRevoked(t, r, token, "")
}

// TestSupervisorEndedLogLineCutKeepsSecretsOut: a worker's last log line longer than what
// a "worker failed failure=ended" line quotes of it (its last 512 bytes, from the file's
// last 4 KiB) is cut after its secrets are hidden, never before: a secret cut short is one
// no redaction recognises. Before, the line was cut first, so a launch token (or a
// policy's secret) straddling the cut was quoted in part — its last characters, enough to
// guess the few missing ones.
func TestSupervisorEndedLogLineCutKeepsSecretsOut(t *testing.T) {
	const policySecret = "hf_policysecret-0123456789"
	for _, c := range []struct{ name, script string }{
		// The 512-byte cut falls 21 bytes before the token's end.
		{"token", `printf 'unauthorized: key %s, token %s %0490d\n' "$HF_TOKEN" "$LAKESHORE_TOKEN" 0 >&2; exit 3`},
		// The 512-byte cut falls 11 bytes before the end of the policy's secret.
		{"env", `printf 'unauthorized: token %s, key %s %0500d\n' "$LAKESHORE_TOKEN" "$HF_TOKEN" 0 >&2; exit 3`},
		// The last non-blank line began before the file's last 4 KiB, which begin 16 bytes
		// before the token's end.
		{"window", `printf 'unauthorized: token %s' "$LAKESHORE_TOKEN" >&2; printf '\n%.0s' $(seq 4080) >&2; exit 3`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			out := filepath.Join(t.TempDir(), "token")
			script := `printf %s "$LAKESHORE_TOKEN" > "$0"; ` + c.script
			r.setProvider("cut", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 1, Command: []string{"sh", "-c", script, out},
				Env: map[string]string{"HF_TOKEN": policySecret}})
			r.submit("cut", 1)
			reg, logs := prometheus.NewRegistry(), &logBuffer{}
			s := r.supervisor(reg, logs, func(c *provider.SupervisorConfig) {
				c.WorkerEnv = map[string]string{"LAKESHORE_TOKEN": "supervisor-admin-token-1"}
			})
			r.tick(s)
			launched := regexp.MustCompile(`msg="provider supervisor: launched".* launch=(\w+)`).FindStringSubmatch(logs.String())
			if launched == nil {
				t.Fatalf("no launch:\n%s", logs.String())
			}
			waitUntil(t, "the worker exits", func() bool { return !slices.Contains(r.launches(), launched[1]) })
			r.clock.add(time.Second)
			r.tick(s)
			token, err := os.ReadFile(out)
			if err != nil || !strings.HasPrefix(string(token), plane.TokenSecretPrefix) {
				t.Fatalf("the worker's token: %q (%v)", token, err)
			}
			log := logs.String()
			if !strings.Contains(log, "failure=ended") {
				t.Fatalf("no failure=ended line:\n%s", log)
			}
			for _, secret := range []string{string(token), policySecret} {
				for i := 0; i+8 <= len(secret); i++ {
					if part := secret[i:]; len(part) >= 8 && strings.Contains(log, part[:8]) && strings.Contains(log, part) {
						t.Fatalf("the log quotes the secret %q in part (%q):\n%s", secret, part, log)
					}
				}
			}
		})
	}
}

// TestSupervisorAdoptingWithoutTokenRevokes: a supervisor that gives its workers no token
// (its plane is postgres:// or a file, say `lakeshore serve --providers` on the server)
// and adopts the launches of one that minted tokens (it took the queue's lease over)
// revokes their tokens when they end: the token's id is the launch's. Before, only a
// supervisor with a LAKESHORE_TOKEN of its own revoked, so these stayed valid for ever.
func TestSupervisorAdoptingWithoutTokenRevokes(t *testing.T) {
	r := newRigClocked(t, true) // leases end when the test advances the clock
	logs := &logBuffer{}
	minting := r.supervisor(prometheus.NewRegistry(), logs, func(c *provider.SupervisorConfig) {
		c.WorkerEnv = map[string]string{"LAKESHORE_TOKEN": "supervisor-admin-token-1"}
	})
	id, token := launchTokenOf(t, r, minting, logs, "adopted", nil)
	r.clock.add(time.Minute) // the minting supervisor is gone: its lease expires
	adoptingLogs := &logBuffer{}
	adopting := r.supervisor(prometheus.NewRegistry(), adoptingLogs, nil)
	r.tick(adopting)
	if !strings.Contains(adoptingLogs.String(), "adopted a running launch") {
		t.Fatalf("the second supervisor did not adopt the launch:\n%s", adoptingLogs.String())
	}
	endLaunch(t, r, id)
	tickTwice(r, adopting)
	requireRevoked(t, r, token, " by the supervisor that adopted it")
}

// TestSupervisorLeaseLostStillRevokes: a supervisor that saw a launch end and then lost
// the queue's lease before the next List confirmed it (another supervisor took the queue
// over, never having seen the launch) still revokes its token at that next tick: revoking
// needs no lease, and no other supervisor knows the launch.
func TestSupervisorLeaseLostStillRevokes(t *testing.T) {
	r := newRigClocked(t, true) // leases end when the test advances the clock
	logs := &logBuffer{}
	first := r.supervisor(prometheus.NewRegistry(), logs, func(c *provider.SupervisorConfig) {
		c.WorkerEnv = map[string]string{"LAKESHORE_TOKEN": "supervisor-admin-token-1"}
	})
	id, token := launchTokenOf(t, r, first, logs, "handover", nil)
	endLaunch(t, r, id)
	r.clock.add(time.Second)
	r.tick(first) // its List leaves the launch out once
	r.clock.add(time.Minute)
	r.tick(r.supervisor(prometheus.NewRegistry(), &logBuffer{}, nil)) // takes the expired lease over
	r.tick(first)                                                     // the lease is the other's now
	requireRevoked(t, r, token, "")
}

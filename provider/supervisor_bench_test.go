package provider_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// memoryProvider accepts every launch and lists it as running until stopped.
type memoryProvider struct {
	mu       sync.Mutex
	launches map[string]provider.LaunchStatus
}

func (m *memoryProvider) Name() string { return plane.ProviderLocal }

func (m *memoryProvider) Launch(_ context.Context, l *provider.Launch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.launches[l.ID] = provider.LaunchStatus{ID: l.ID, Namespace: l.Namespace, Queue: l.Queue, State: provider.LaunchRunning}
	return nil
}

func (m *memoryProvider) Stop(_ context.Context, id string, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.launches, id)
	return nil
}

func (m *memoryProvider) List(context.Context) ([]provider.LaunchStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]provider.LaunchStatus, 0, len(m.launches))
	for _, l := range m.launches {
		out = append(out, l)
	}
	return out, nil
}

// BenchmarkSupervisorTick is one supervisor tick over 1,000 queues with a provider on an
// embedded plane file, each queue with one queued job and its one worker launched (the
// steady state: counts, workers and launches read, nothing to do, leases renewed every
// third of their TTL as in production).
func BenchmarkSupervisorTick(b *testing.B) {
	for _, queues := range []int{10, 1000} {
		b.Run(fmt.Sprintf("queues=%d", queues), func(b *testing.B) {
			ctx := context.Background()
			drv, err := sqliteplane.Open(ctx, filepath.Join(b.TempDir(), "p.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer drv.Close()
			for i := range queues {
				q := fmt.Sprintf("q%04d", i)
				if err := drv.QueueProviderSet(ctx, &plane.ProviderParams{Namespace: "default", Queue: q,
					Provider: plane.ProviderRef{Name: plane.ProviderLocal, Policy: plane.LaunchPolicy{Command: []string{"w"}}}}); err != nil {
					b.Fatal(err)
				}
				if _, err := drv.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: q,
					Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}}); err != nil {
					b.Fatal(err)
				}
			}
			mem := &memoryProvider{launches: map[string]provider.LaunchStatus{}}
			s, err := provider.NewSupervisor(provider.SupervisorConfig{Driver: drv,
				Resolve: func(string) (provider.Provider, error) { return mem, nil },
				Logger:  slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Tick(ctx); err != nil { // takes the leases, launches one worker a queue
				b.Fatal(err)
			}
			if len(mem.launches) != queues {
				b.Fatalf("%d launches after the first tick; expected %d", len(mem.launches), queues)
			}
			b.ResetTimer()
			for b.Loop() {
				if err := s.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if len(mem.launches) != queues {
				b.Fatalf("%d launches after the ticks; expected %d", len(mem.launches), queues)
			}
		})
	}
}

// Package sshprovider is the "ssh:NAME" provider: it runs workers on the machines of an
// inventory (a provider of type ssh declared in lakeshore.yaml), started over SSH with
// golang.org/x/crypto/ssh.
//
// Each launch is a detached process group on one host (setsid), in a fresh working
// directory DIR/work/ID, with its output appended to DIR/logs/ID.log and a record
// DIR/run/ID.json plus DIR/run/ID.pid on the host. The records are the state: a supervisor
// started later lists every host's records and adopts the workers that still run, so the
// workers outlive the supervisor and its SSH connections. A record's process is alive
// when /proc/PID/environ holds LAKESHORE_LAUNCH_ID=ID, so a reused pid is never taken for
// a worker. Stop sends SIGTERM to the group (a Lakeshore worker drains), then SIGKILL after
// the grace. Host keys are checked against known_hosts files; there is no way to skip it.
//
// Hosts must be Linux (setsid, /proc) with a POSIX sh. docs/providers.md describes the
// inventory and the decisions.
package sshprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// EnvHost is set in every worker's environment to the address of the host it runs on.
const EnvHost = "LAKESHORE_SSH_HOST"

// envCodeCache is the Python worker's code cache directory (shared by a host's workers).
const envCodeCache = "LAKESHORE_CODE_CACHE"

// ErrNoHost is returned by Launch when no host of the inventory can take the launch (all
// full, down, or offering less than it asks); the error says why for each host.
var ErrNoHost = errors.New("no host can take the launch")

// ErrUnreachable matches errors of a host that did not answer (connection refused, timed
// out, name not found, SSH handshake failed); such an error also matches
// plane.ErrUnavailable (it is transient to the supervisor), but its message names the host,
// not the plane: "host not reachable: dial tcp ...".
var ErrUnreachable error = unreachableError{}

// unreachableError is ErrUnreachable: its message is about the host, and errors.Is matches
// it to plane.ErrUnavailable without "plane unavailable" in the text.
type unreachableError struct{}

func (unreachableError) Error() string { return "host not reachable" }

// Is matches plane.ErrUnavailable.
func (unreachableError) Is(target error) bool { return plane.ErrUnavailable.Is(target) }

// Provider runs workers on the hosts of an inventory over SSH. Create it with New; safe for
// concurrent use.
type Provider struct {
	cfg     Config
	hostKey ssh.HostKeyCallback
	hosts   []*host

	mu     sync.Mutex
	hostOf map[string]*host // launch id → the host that runs it (from Launch and List)
}

// host is one machine and what the provider knows of it.
type host struct {
	Host
	index int

	dial   sync.Mutex // one dial at a time
	client *ssh.Client

	// guarded by Provider.mu
	downUntil time.Time
	downErr   error
	launches  map[string]plane.Resources // live launches and what each asked
}

func (h *host) addr() string { return net.JoinHostPort(h.Address, strconv.Itoa(h.Port)) }

// New checks cfg, reads the known_hosts files and returns the provider. It connects to no
// host (Check does). Errors: *plane.InvalidError for a bad Config; a known_hosts file that
// cannot be read or parsed.
func New(cfg Config) (*Provider, error) {
	if cfg.Name == "" {
		return nil, plane.Invalid("ssh provider name", cfg.Name, "give the name the provider is declared under in lakeshore.yaml")
	}
	if len(cfg.Hosts) == 0 {
		return nil, plane.Invalid("ssh provider hosts", nil, "list at least one host")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DialTimeoutDefault
	}
	if cfg.HostRetry <= 0 {
		cfg.HostRetry = HostRetryDefault
	}
	if len(cfg.KnownHosts) == 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("ssh provider %s: no known_hosts file given and no home directory: %w", cfg.Name, err)
		}
		cfg.KnownHosts = []string{filepath.Join(home, ".ssh", "known_hosts")}
	}
	for _, f := range cfg.KnownHosts {
		// knownhosts reads each file whole: a FIFO would hang it, a device fill memory.
		// /dev/null, OpenSSH's idiom for "no known host", reads empty and is taken.
		if st, err := os.Stat(f); err == nil && !st.Mode().IsRegular() && f != os.DevNull {
			return nil, fmt.Errorf("ssh provider %s: known_hosts %s is not a regular file (%s): name a known_hosts file", cfg.Name, f, st.Mode().Type())
		}
	}
	cb, err := knownhosts.New(cfg.KnownHosts...)
	if err != nil {
		return nil, fmt.Errorf("ssh provider %s: read known_hosts (%s): %w", cfg.Name, strings.Join(cfg.KnownHosts, ", "), err)
	}
	p := &Provider{cfg: cfg, hostKey: cb, hostOf: map[string]*host{}}
	local := ""
	if u, err := user.Current(); err == nil {
		local = u.Username
	}
	for i, h := range cfg.Hosts {
		if err := h.check(); err != nil {
			return nil, plane.Invalid(fmt.Sprintf("ssh provider %s host %d", cfg.Name, i), h.Address, err.Error())
		}
		if h.Port == 0 {
			h.Port = PortDefault
		}
		if h.User == "" {
			h.User = local
		}
		if h.Lakeshore == "" {
			h.Lakeshore = LakeshoreDefault
		}
		if h.Dir == "" {
			h.Dir = DirDefault
		}
		if h.Workers == 0 {
			h.Workers = WorkersDefault
		}
		p.hosts = append(p.hosts, &host{Host: h, index: i, launches: map[string]plane.Resources{}})
	}
	return p, nil
}

// Name implements provider.Provider: "ssh:" + the declared name.
func (p *Provider) Name() string { return plane.ProviderSSHPrefix + p.cfg.Name }

// record is a launch's DIR/run/ID.json on its host. It holds no environment (a token is
// never written to a file by the provider).
type record struct {
	ID        string          `json:"id"`
	Namespace string          `json:"namespace"`
	Queue     string          `json:"queue"`
	Host      string          `json:"host"`
	Resources plane.Resources `json:"resources,omitzero"`
	// Shape is the launch's shape ("" for the default shape): List reports it.
	Shape string `json:"shape,omitempty"`
}

// Launch implements provider.Provider: it starts l.Command on the host with the fewest
// launches among those that have a free worker slot, are in the launch's pool (its
// Resources.Partition, when set), whose offers satisfy the launch's shape
// (l.Requirement: plane.Offers.Satisfies) and have the CPUs, memory and GPUs it asks left
// (the shape's, where it names them, else the policy's); a host
// that does not answer is left out for HostRetry and the next one tried. A first word
// "lakeshore" is the host's Lakeshore binary. The worker gets l.Env, EnvHost, the host's
// PlaneURL as LAKESHORE_URL when set, and LAKESHORE_CODE_CACHE=DIR/code-cache unless
// l.Env sets it. Errors: ErrNoHost (wrapping each host's reason), or the last host's
// failure: the program is not found there, the worker exited at once (its log's tail).
// A launch whose connection is lost after its script was sent may have started, so it is
// counted on that host and Launch returns nil: the next List reports it running there, or
// ended (the host is down, or the script never ran), and the supervisor launches anew; it
// is never started a second time on another host under the same id.
func (p *Provider) Launch(ctx context.Context, l *provider.Launch) error {
	if len(l.Command) == 0 {
		return plane.Invalid("worker command", l.Command, "give the worker's command")
	}
	if !validID(l.ID) {
		return plane.Invalid("launch id", l.ID, "use letters and digits only")
	}
	res := shapeResources(l)
	var reasons []error
	for _, h := range p.candidates(res, l.Requirement, &reasons) {
		err := p.launchOn(ctx, h, l)
		// A launch whose connection was lost after its script was sent may have started:
		// it is counted on h, never started again elsewhere under the same id; the next
		// List finds it running there, or ended (host down, or the script never ran) and
		// the supervisor launches anew.
		if err == nil || errors.Is(err, errOutcomeUnknown) && ctx.Err() == nil {
			p.mu.Lock()
			h.launches[l.ID] = res
			p.hostOf[l.ID] = h
			p.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		reasons = append(reasons, err)
	}
	return fmt.Errorf("ssh provider %s: %w: %w", p.cfg.Name, ErrNoHost, errors.Join(reasons...))
}

// shapeResources is what launch l takes of its host: the policy's resources, with those its
// shape's requirement names in their place (CPUs and MiB rounded up).
func shapeResources(l *provider.Launch) plane.Resources {
	res := l.Resources
	if q := l.Requirement; q != nil {
		if q.MilliCPUs > 0 {
			res.CPUs = int((q.MilliCPUs + 999) / 1000)
		}
		if q.MemoryBytes > 0 {
			res.MemoryMB = (q.MemoryBytes + 1<<20 - 1) >> 20
		}
		if q.GPUs > 0 {
			res.GPUs = int(q.GPUs)
		}
	}
	return res
}

// offers is what host h offers, as placement reads it.
func (h *host) offers() *plane.Offers {
	o := h.Offers
	return &plane.Offers{MilliCPUs: o.MilliCPUs, MemoryBytes: o.MemoryBytes, GPUs: o.GPUs, GPUType: o.GPUType, Labels: o.Labels}
}

// CanOffer implements provider.ShapeChecker: some host of the inventory offers what r asks
// (plane.Offers.Satisfies on its offers:), however busy it is now.
func (p *Provider) CanOffer(r *plane.Requirement) error {
	for _, h := range p.hosts {
		if h.offers().Satisfies(r) {
			return nil
		}
	}
	offers, _ := plane.FormatOffers((*plane.Offers)(r))
	return fmt.Errorf("ssh provider %s: no host of the inventory offers %s (a host's offers: must satisfy the shape)", p.cfg.Name, offers)
}

// candidates returns the hosts that may take a launch asking res for a shape requiring req
// (nil: the default shape), fewest launches first; each host left out adds its reason.
func (p *Provider) candidates(res plane.Resources, req *plane.Requirement, reasons *[]error) []*host {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var out []*host
	for _, h := range p.hosts {
		if !h.offers().Satisfies(req) {
			*reasons = append(*reasons, fmt.Errorf("%s: its offers do not satisfy the launch's shape", h.addr()))
			continue
		}
		if why := p.refuse(h, res, now); why != "" {
			*reasons = append(*reasons, fmt.Errorf("%s: %s", h.addr(), why))
			continue
		}
		out = append(out, h)
	}
	slices.SortStableFunc(out, func(a, b *host) int { return len(a.launches) - len(b.launches) })
	return out
}

// refuse says why h cannot take a launch asking res now ("" when it can). p.mu is held.
func (p *Provider) refuse(h *host, res plane.Resources, now time.Time) string {
	if now.Before(h.downUntil) {
		return fmt.Sprintf("left out until %s after it did not answer (%v)", h.downUntil.Format(time.TimeOnly), h.downErr)
	}
	if len(h.launches) >= h.Workers {
		return fmt.Sprintf("full (%d of %d workers)", len(h.launches), h.Workers)
	}
	if res.Partition != "" && res.Partition != h.Pool {
		return fmt.Sprintf("not in pool %q (its pool is %q)", res.Partition, h.Pool)
	}
	var cpus, gpus, mem int64
	for _, r := range h.launches {
		cpus, gpus, mem = cpus+int64(r.CPUs)*1000, gpus+int64(r.GPUs), mem+r.MemoryMB<<20
	}
	o := h.Offers
	switch {
	case o.MilliCPUs > 0 && cpus+int64(res.CPUs)*1000 > o.MilliCPUs:
		return fmt.Sprintf("the launch asks %d CPUs; the host has %g of %g left", res.CPUs, float64(o.MilliCPUs-cpus)/1000, float64(o.MilliCPUs)/1000)
	case gpus+int64(res.GPUs) > o.GPUs && res.GPUs > 0:
		return fmt.Sprintf("the launch asks %d GPUs; the host has %d of %d left", res.GPUs, o.GPUs-gpus, o.GPUs)
	case o.MemoryBytes > 0 && mem+res.MemoryMB<<20 > o.MemoryBytes:
		return fmt.Sprintf("the launch asks %d MiB; the host has %d MiB of %d left", res.MemoryMB, (o.MemoryBytes-mem)>>20, o.MemoryBytes>>20)
	}
	return ""
}

// launchOn starts l on h and waits until its process runs (its pid file is written).
func (p *Provider) launchOn(ctx context.Context, h *host, l *provider.Launch) error {
	rec, err := json.Marshal(record{ID: l.ID, Namespace: l.Namespace, Queue: l.Queue, Host: h.Address, Resources: shapeResources(l), Shape: l.Shape})
	if err != nil {
		return err
	}
	argv := slices.Clone(l.Command)
	if argv[0] == LakeshoreDefault {
		argv[0] = h.Lakeshore
	}
	env := make(map[string]string, len(l.Env)+3)
	for k, v := range l.Env {
		env[k] = v
	}
	if h.PlaneURL != "" {
		provider.UsePlaneURL(env, h.PlaneURL)
	}
	env[provider.EnvLaunchID], env[EnvHost] = l.ID, h.Address
	var b strings.Builder
	b.WriteString("set -e\numask 077\n")
	b.WriteString(dirLine(h.Dir))
	b.WriteString("id=" + quote(l.ID) + "\n")
	fmt.Fprintf(&b, `command -v setsid >/dev/null 2>&1 || { echo "setsid is not installed (util-linux)" >&2; exit 3; }
mkdir -p "$d/run" "$d/logs" "$d/work/$id" "$d/code-cache"
d=$(cd "$d" && pwd)
printf '%%s\n' %s > "$d/run/$id.json.tmp"
mv "$d/run/$id.json.tmp" "$d/run/$id.json"
cd "$d/work/$id"
export %s="$d/code-cache"
`, quote(string(rec)), envCodeCache)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range env {
			if !yield(k) {
				return
			}
		}
	}) {
		if !validEnvName(k) {
			return plane.Invalid("worker environment", k, "use names of letters, digits and _ (not starting with a digit)")
		}
		b.WriteString("export " + k + "=" + quote(env[k]) + "\n")
	}
	b.WriteString("set --")
	for _, a := range argv {
		b.WriteString(" " + quote(a))
	}
	b.WriteString(`
if ! command -v -- "$1" >/dev/null 2>&1; then
  echo "worker command $1 not found on this host (PATH=$PATH); give its path (the host's lakeshore: in the inventory for lakeshore)" >&2
  rm -f "$d/run/$id.json"; rm -rf "$d/work/$id"; exit 5
fi
setsid sh -c 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$d/run/$id.pid" "$@" </dev/null >>"$d/logs/$id.log" 2>&1 &
bg=$!
i=0
while [ ! -s "$d/run/$id.pid" ]; do
  if ! kill -0 "$bg" 2>/dev/null && [ ! -s "$d/run/$id.pid" ]; then
    echo "the worker exited before it started; its log $d/logs/$id.log ends:" >&2; tail -c 1024 "$d/logs/$id.log" >&2 || :
    rm -f "$d/run/$id.json"; exit 4
  fi
  i=$((i+1))
  if [ "$i" -gt 400 ]; then echo "the worker did not start within 20 s (see $d/logs/$id.log)" >&2; exit 4; fi
  sleep 0.05
done
`)
	_, err = p.run(ctx, h, b.String())
	if err != nil {
		return fmt.Errorf("launch %s on %s: %w", l.ID, h.addr(), err)
	}
	return nil
}

// listScript prints "STATE PID RECORD" for every launch on the host that has not ended, and
// removes the records (and working directories) of those that ended. A record without a
// pid younger than a minute is a launch being started: pending.
const listScript = `[ -d "$d/run" ] || exit 0
for f in "$d"/run/*.json; do
  [ -e "$f" ] || continue
  id=${f##*/}; id=${id%.json}
  pid=$(cat "$d/run/$id.pid" 2>/dev/null || :)
  if [ -n "$pid" ] && tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "LAKESHORE_LAUNCH_ID=$id"; then
    printf 'running %s %s\n' "$pid" "$(cat "$f")"
  elif [ -z "$pid" ] && [ -n "$(find "$f" -mmin -1 2>/dev/null)" ]; then
    printf 'pending 0 %s\n' "$(cat "$f")"
  else
    rm -rf "$d/work/$id"; rm -f "$d/run/$id.pid" "$f"
  fi
done
`

// List implements provider.Provider: every host's launches that have not ended, the
// earlier supervisors' included, asked of all hosts at once. A host that does not answer
// is left out of launches for HostRetry and its launches are left out of the answer (the
// supervisor counts them ended and launches elsewhere; if the host comes back, its
// workers are listed again and adopted). Errors: only when no host answers.
func (p *Provider) List(ctx context.Context) ([]provider.LaunchStatus, error) {
	type answer struct {
		list []provider.LaunchStatus
		res  map[string]plane.Resources
		err  error
	}
	answers := make([]answer, len(p.hosts))
	var wg sync.WaitGroup
	for i, h := range p.hosts {
		wg.Go(func() {
			out, err := p.run(ctx, h, dirLine(h.Dir)+listScript)
			if err != nil {
				answers[i].err = fmt.Errorf("%s: %w", h.addr(), err)
				return
			}
			answers[i].list, answers[i].res = parseList(out, h.Address)
		})
	}
	wg.Wait()
	var (
		out  []provider.LaunchStatus
		errs []error
	)
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.hosts {
		a := answers[i]
		for id, hh := range p.hostOf {
			if _, listed := a.res[id]; hh == h && (a.err != nil || !listed) {
				delete(p.hostOf, id)
			}
		}
		if a.err != nil {
			errs = append(errs, a.err)
			if ctx.Err() == nil {
				h.downUntil, h.downErr = now.Add(p.cfg.HostRetry), a.err
			}
			h.launches = map[string]plane.Resources{}
			continue
		}
		h.downUntil, h.downErr = time.Time{}, nil
		h.launches = a.res
		for _, l := range a.list {
			p.hostOf[l.ID] = h
		}
		out = append(out, a.list...)
	}
	if len(errs) == len(p.hosts) {
		return nil, fmt.Errorf("ssh provider %s: no host answers: %w", p.cfg.Name, errors.Join(errs...))
	}
	return out, nil
}

// parseList reads listScript's output.
func parseList(out []byte, addr string) ([]provider.LaunchStatus, map[string]plane.Resources) {
	var list []provider.LaunchStatus
	res := map[string]plane.Resources{}
	for line := range strings.SplitSeq(string(out), "\n") {
		state, rest, ok1 := strings.Cut(line, " ")
		pid, js, ok2 := strings.Cut(rest, " ")
		var r record
		if !ok1 || !ok2 || json.Unmarshal([]byte(js), &r) != nil || !validID(r.ID) {
			continue
		}
		st, detail := provider.LaunchRunning, fmt.Sprintf("ssh %s pid %s", addr, pid)
		if state == "pending" {
			st, detail = provider.LaunchPending, fmt.Sprintf("ssh %s starting", addr)
		}
		list = append(list, provider.LaunchStatus{ID: r.ID, Namespace: r.Namespace, Queue: r.Queue, State: st, Detail: detail, Shape: r.Shape})
		res[r.ID] = r.Resources
	}
	return list, res
}

// signalScript sends $sig to the launch's process group when it runs, and prints alive,
// starting (a record without a pid, younger than a minute) or gone (its record removed).
const signalScript = `pid=$(cat "$d/run/$id.pid" 2>/dev/null || :)
if [ -n "$pid" ] && tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "LAKESHORE_LAUNCH_ID=$id"; then
  kill -s "$sig" -- "-$pid" 2>/dev/null || kill -s "$sig" "$pid" 2>/dev/null || :
  echo alive; exit 0
fi
if [ -z "$pid" ] && [ -e "$d/run/$id.json" ] && [ -n "$(find "$d/run/$id.json" -mmin -1 2>/dev/null)" ]; then echo starting; exit 0; fi
rm -rf "$d/work/$id"; rm -f "$d/run/$id.pid" "$d/run/$id.json"
echo gone
`

// signal sends sig (TERM, KILL, or 0 to only look) to launch id on h; it reports whether
// the launch still runs (or is being started).
func (p *Provider) signal(ctx context.Context, h *host, id, sig string) (bool, error) {
	out, err := p.run(ctx, h, dirLine(h.Dir)+"id="+quote(id)+"\nsig="+sig+"\n"+signalScript)
	if err != nil {
		return false, err
	}
	s := strings.TrimSpace(string(out))
	if s == "gone" {
		p.mu.Lock()
		delete(h.launches, id)
		delete(p.hostOf, id)
		p.mu.Unlock()
	}
	return s != "gone", nil
}

// Stop implements provider.Provider: SIGTERM to the launch's process group on its host,
// SIGKILL after grace (or when ctx ends first; the kill itself gets its own DialTimeout).
// A launch that ended, or that no host knows, is not an error. Errors: its host does not
// answer (the supervisor tries again), or it still runs after SIGKILL.
func (p *Provider) Stop(ctx context.Context, id string, grace time.Duration) error {
	if !validID(id) {
		return nil // no launch of ours has such an id
	}
	p.mu.Lock()
	h := p.hostOf[id]
	p.mu.Unlock()
	if h == nil {
		if _, err := p.List(ctx); err != nil {
			return err
		}
		p.mu.Lock()
		h = p.hostOf[id]
		p.mu.Unlock()
		if h == nil {
			return nil
		}
	}
	alive, err := p.signal(ctx, h, id, "TERM")
	if err != nil || !alive {
		return err
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for alive {
		select {
		case <-deadline.C:
			return p.kill(h, id)
		case <-ctx.Done():
			return p.kill(h, id)
		case <-tick.C:
		}
		if alive, err = p.signal(ctx, h, id, "0"); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// kill sends SIGKILL to launch id's group and waits (up to DialTimeout) for it to go.
func (p *Provider) kill(h *host, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout+5*time.Second)
	defer cancel()
	for {
		alive, err := p.signal(ctx, h, id, "KILL")
		if err != nil {
			return fmt.Errorf("ssh provider %s: kill %s on %s: %w", p.cfg.Name, id, h.addr(), err)
		}
		if !alive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ssh provider %s: launch %s on %s still runs after SIGKILL", p.cfg.Name, id, h.addr())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Check implements provider.Checker: every host is asked whether it can run workers
// (sh, setsid and /proc there). Errors: when no host can, each host's reason; a host that
// cannot while others can is left out of launches as in List.
func (p *Provider) Check(ctx context.Context) error {
	errs := make([]error, len(p.hosts))
	var wg sync.WaitGroup
	for i, h := range p.hosts {
		wg.Go(func() {
			_, err := p.run(ctx, h, `command -v setsid >/dev/null 2>&1 || { echo "setsid is not installed (util-linux)" >&2; exit 3; }
[ -r /proc/self/environ ] || { echo "/proc is not mounted (the provider needs Linux)" >&2; exit 3; }
`)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", h.addr(), err)
			}
		})
	}
	wg.Wait()
	var failed []error
	now := time.Now()
	p.mu.Lock()
	for i, h := range p.hosts {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			h.downUntil, h.downErr = now.Add(p.cfg.HostRetry), errs[i]
		}
	}
	p.mu.Unlock()
	if len(failed) == len(p.hosts) {
		return fmt.Errorf("ssh provider %s: no host can run workers: %w", p.cfg.Name, errors.Join(failed...))
	}
	return nil
}

// Close closes the provider's SSH connections. Workers keep running.
func (p *Provider) Close() error {
	for _, h := range p.hosts {
		h.dial.Lock()
		if h.client != nil {
			_ = h.client.Close()
			h.client = nil
		}
		h.dial.Unlock()
	}
	return nil
}

var _ provider.LogLocator = (*Provider)(nil)

// LogPath is where launch id writes its output on its host (relative to the remote home
// unless the host's Dir is absolute), as ADDRESS:PATH (provider.LogLocator); "" when no
// host is known to run it.
func (p *Provider) LogPath(id string) string {
	p.mu.Lock()
	h := p.hostOf[id]
	p.mu.Unlock()
	if h == nil {
		return ""
	}
	return h.Address + ":" + h.Dir + "/logs/" + id + ".log"
}

// run runs script with sh on h (over its connection, dialled when needed) and returns its
// standard output. A connection found stale before the script started (the host restarted
// sshd) is dialled again once; a connection lost while the script ran is never retried,
// since the script may have done its work: the error then also matches errOutcomeUnknown.
// Errors: the host does not answer (ErrUnreachable), or the script failed: its exit status
// and the tail of its standard error.
func (p *Provider) run(ctx context.Context, h *host, script string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		c, fresh, err := p.client(ctx, h)
		if err != nil {
			return nil, err
		}
		out, err, notStarted := p.session(ctx, h, c, script)
		if notStarted && !fresh && attempt == 0 && ctx.Err() == nil {
			continue // the connection went stale before the script started: dial again
		}
		return out, err
	}
}

// errOutcomeUnknown marks a run whose connection was lost (or whose context ended) after
// the script was sent: it may have run in full, in part or not at all.
var errOutcomeUnknown = errors.New("the connection ended before the host answered; the script may have run")

// session runs script in one SSH session on c. notStarted reports a failure of the
// connection before the script was sent (the connection is then dropped): running it again
// is safe.
func (p *Provider) session(ctx context.Context, h *host, c *ssh.Client, script string) (out []byte, err error, notStarted bool) {
	s, err := c.NewSession()
	if err != nil {
		p.drop(h, c)
		return nil, fmt.Errorf("%w: open a session: %w", ErrUnreachable, err), true
	}
	defer s.Close()
	var stdout, stderr bytes.Buffer
	s.Stdin, s.Stdout, s.Stderr = strings.NewReader(script), &stdout, &tail{max: 2048, b: &stderr}
	done := make(chan error, 1)
	go func() { done <- s.Run("sh -s") }()
	select {
	case err = <-done:
	case <-ctx.Done():
		p.drop(h, c) // a host that hangs: the next call dials afresh
		<-done
		return nil, fmt.Errorf("%w: no answer in time: %w (%w)", ErrUnreachable, ctx.Err(), errOutcomeUnknown), false
	}
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), nil, false
	case errors.As(err, &exit):
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = "no message"
		}
		return stdout.Bytes(), fmt.Errorf("exit status %d: %s", exit.ExitStatus(), msg), false
	default:
		p.drop(h, c)
		return nil, fmt.Errorf("%w: %w (%w)", ErrUnreachable, err, errOutcomeUnknown), false
	}
}

// tail keeps the last max bytes written.
type tail struct {
	max int
	b   *bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

// client returns h's connection, dialling it when there is none; fresh reports a new one.
func (p *Provider) client(ctx context.Context, h *host) (*ssh.Client, bool, error) {
	h.dial.Lock()
	defer h.dial.Unlock()
	if h.client != nil {
		return h.client, false, nil
	}
	c, err := p.dialHost(ctx, h)
	if err != nil {
		return nil, false, err
	}
	h.client = c
	return c, true, nil
}

// drop forgets c as h's connection and closes it.
func (p *Provider) drop(h *host, c *ssh.Client) {
	h.dial.Lock()
	if h.client == c {
		h.client = nil
	}
	h.dial.Unlock()
	_ = c.Close()
}

// dialHost connects to h, checks its host key against the known_hosts files and logs in
// with its key file or the SSH agent.
func (p *Provider) dialHost(ctx context.Context, h *host) (*ssh.Client, error) {
	auth, closeAuth, err := p.auth(h)
	if err != nil {
		return nil, err
	}
	defer closeAuth()
	addr := h.addr()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	var keyErr error
	cfg := &ssh.ClientConfig{
		User: h.User, Auth: []ssh.AuthMethod{auth}, Timeout: p.cfg.DialTimeout,
		HostKeyAlgorithms: p.hostKeyAlgorithms(addr),
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			keyErr = p.hostKey(hostname, remote, key)
			return keyErr
		},
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		_ = conn.Close()
		return nil, p.dialError(h, keyErr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// dialError explains a failed handshake: a host key not known or changed (with the fix),
// a login refused, or the host not answering.
func (p *Provider) dialError(h *host, keyErr, err error) error {
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	var ne *ssh.AlgorithmNegotiationError
	files := strings.Join(p.cfg.KnownHosts, ", ")
	switch {
	case errors.As(keyErr, &re):
		return fmt.Errorf("host %s presented a revoked host key (known_hosts: %s)", h.addr(), files)
	case errors.As(keyErr, &ke) && len(ke.Want) == 0:
		return fmt.Errorf("host %s is not in known_hosts (%s): check its key and add it, e.g. ssh-keyscan -p %d %s >> %s",
			h.addr(), files, h.Port, h.Address, p.cfg.KnownHosts[0])
	case errors.As(keyErr, &ke):
		return fmt.Errorf("host %s presented a host key that differs from the one in %s:%d: refusing to connect (if the host was reinstalled, replace its line)",
			h.addr(), ke.Want[0].Filename, ke.Want[0].Line)
	case keyErr != nil:
		return fmt.Errorf("host %s: host key check: %w", h.addr(), keyErr)
	case errors.As(err, &ne) && ne.What == "host key":
		// Asked only for the key types known_hosts holds for the host (hostKeyAlgorithms),
		// the host has none of them: its key changed type (reinstalled) or it is not the
		// host known_hosts knows. A refusal, not a host that does not answer.
		return fmt.Errorf("host %s presented no host key of a type known_hosts (%s) holds for it (known: %s; the host has: %s): "+
			"refusing to connect (if the host was reinstalled, check its new key and replace its line, e.g. with ssh-keyscan -p %d %s)",
			h.addr(), files, strings.Join(ne.SupportedAlgorithms, ", "), strings.Join(ne.RequestedAlgorithms, ", "), h.Port, h.Address)
	case strings.Contains(err.Error(), "unable to authenticate"):
		how := "key file " + h.KeyFile
		if h.KeyFile == "" {
			how = "the SSH agent's keys"
		}
		return fmt.Errorf("host %s refused the login of user %s with %s: add its public key to the user's authorized_keys", h.addr(), h.User, how)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, h.addr(), err)
}

// hostKeyAlgorithms returns the algorithms of the keys the known_hosts files hold for addr,
// so the server presents one of those (nil: any; the check then refuses an unknown key).
func (p *Provider) hostKeyAlgorithms(addr string) []string {
	// Asking the callback about a key no file holds returns the keys known for the host.
	var ke *knownhosts.KeyError
	if err := p.hostKey(addr, &net.TCPAddr{}, probeKey); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algos = append(algos, t)
		}
	}
	return slices.Compact(algos)
}

// probeKey is a public key no known_hosts file holds (an all-zero ed25519 key).
var probeKey = func() ssh.PublicKey {
	k, err := ssh.ParsePublicKey(append([]byte{0, 0, 0, 11}, append([]byte("ssh-ed25519"), append([]byte{0, 0, 0, 32}, make([]byte, 32)...)...)...))
	if err != nil {
		panic(err)
	}
	return k
}()

// auth returns how to log in to h: its key file (read at each dial, so a rotated key is
// used at the next connection), else the SSH agent. Errors never hold the key's content.
func (p *Provider) auth(h *host) (ssh.AuthMethod, func(), error) {
	if h.KeyFile != "" {
		b, err := readKeyFile(h.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("host %s: read key file: %w", h.addr(), err)
		}
		signer, err := ssh.ParsePrivateKey(b)
		clear(b)
		var pe *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pe):
			return nil, nil, fmt.Errorf("host %s: key file %s is protected by a passphrase: load it into ssh-agent and leave key_file unset (the provider never holds a passphrase)", h.addr(), h.KeyFile)
		case err != nil:
			return nil, nil, fmt.Errorf("host %s: key file %s is not a private key the provider can read (OpenSSH, PEM or PKCS#8)", h.addr(), h.KeyFile)
		}
		return ssh.PublicKeys(signer), func() {}, nil
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil, fmt.Errorf("host %s: no key_file and no SSH agent (SSH_AUTH_SOCK is not set): give key_file in the inventory", h.addr())
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("host %s: SSH agent at SSH_AUTH_SOCK: %w", h.addr(), err)
	}
	return ssh.PublicKeysCallback(agent.NewClient(conn).Signers), func() { _ = conn.Close() }, nil
}

// maxKeyFileBytes bounds a key file's size: an OpenSSH private key is a few KiB (an RSA
// key of 16,384 bits under 13 KiB).
const maxKeyFileBytes = 1 << 20

// readKeyFile reads a private key file: a regular file of at most maxKeyFileBytes that
// neither its group nor others may access (OpenSSH's rule). It is
// opened without blocking and checked before it is read, so a key_file naming a FIFO, a
// device (/dev/zero) or a huge file is an error at once instead of a supervisor that
// hangs or fills its memory.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): name the private key's file", path, st.Mode().Type())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		// As OpenSSH's "UNPROTECTED PRIVATE KEY FILE": a key others may read is no secret.
		return nil, fmt.Errorf("%s has permissions %04o: a private key must not be readable by others (chmod 600 %s)", path, perm, path)
	}
	if st.Size() > maxKeyFileBytes {
		return nil, fmt.Errorf("%s has %d bytes: a private key has a few KiB (at most %d bytes are read)", path, st.Size(), maxKeyFileBytes)
	}
	return io.ReadAll(io.LimitReader(f, maxKeyFileBytes))
}

// dirLine sets $d to the host's directory: relative to the remote home unless absolute.
func dirLine(dir string) string {
	if strings.HasPrefix(dir, "/") {
		return "d=" + quote(dir) + "\n"
	}
	return `d="$HOME"/` + quote(strings.TrimPrefix(dir, "~/")) + "\n"
}

// quote quotes s for sh: every byte reaches the program unchanged.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// validID reports whether id is a launch id this provider takes: provider.LaunchIDValid, at
// most 64.
func validID(id string) bool { return provider.LaunchIDValid(id, 64) }

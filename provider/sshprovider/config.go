package sshprovider

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/fabric"
)

// Defaults of Config and Host.
const (
	// PortDefault is Host.Port when 0.
	PortDefault = 22
	// DirDefault is Host.Dir when "": relative to the remote user's home directory.
	DirDefault = ".lakeshore/ssh"
	// LakeshoreDefault is Host.Lakeshore when "": found on the remote PATH.
	LakeshoreDefault = "lakeshore"
	// WorkersDefault is Host.Workers when 0.
	WorkersDefault = 1
	// DialTimeoutDefault is Config.DialTimeout when 0: connect and SSH handshake.
	DialTimeoutDefault = 10 * time.Second
	// HostRetryDefault is Config.HostRetry when 0.
	HostRetryDefault = 30 * time.Second
)

// Host is one machine of the inventory.
type Host struct {
	// Address is the machine's host name or IP address. Required.
	Address string
	// Port is sshd's port. Defaults to PortDefault (22).
	Port int
	// User logs in. Defaults to the supervisor's user.
	User string
	// KeyFile is the private key's path on the supervisor's machine; "" uses the SSH agent
	// ($SSH_AUTH_SOCK). A key protected by a passphrase must be loaded in the agent: the
	// provider never asks for or stores a passphrase.
	KeyFile string
	// Lakeshore is the lakeshore binary on the host: a worker command whose first word is
	// "lakeshore" runs it instead. Defaults to LakeshoreDefault (found on the remote PATH).
	Lakeshore string
	// Dir is the provider's directory on the host (launch records, logs, each worker's
	// fresh working directory, the shared code cache), relative to the remote user's home
	// unless absolute. Defaults to DirDefault.
	Dir string
	// Workers is how many workers the host runs at most. Defaults to WorkersDefault (1).
	Workers int
	// Pool, when set, is matched against a launch's Resources.Partition: a launch that
	// names a partition runs only on hosts of that pool.
	Pool string
	// PlaneURL, when set, is LAKESHORE_URL for the host's workers (the plane as the host
	// reaches it), replacing the supervisor's.
	PlaneURL string
	// Offers is what the host offers its workers, all together: a launch asking for more
	// CPUs, memory or GPUs than the host has left (its running launches' requests taken
	// off) goes to another host. Zero fields: not limited.
	Offers fabric.Resources
}

// Config configures a Provider.
type Config struct {
	// Name is the provider's declared name; the Provider's name is "ssh:" + Name.
	// Required.
	Name string
	// Hosts is the inventory. At least one.
	Hosts []Host
	// KnownHosts are the known_hosts files that verify each host's key. Defaults to
	// ~/.ssh/known_hosts of the supervisor's user. A host whose key is not in them, or
	// differs, is refused; there is no way to skip the check.
	KnownHosts []string
	// DialTimeout bounds connecting and the SSH handshake. Defaults to DialTimeoutDefault.
	DialTimeout time.Duration
	// HostRetry is how long a host that did not answer is left out of launches (List keeps
	// asking it at every tick, and a host that answers is used again at once). Defaults to
	// HostRetryDefault (30 s).
	HostRetry time.Duration
}

// providerKeys are the options a provider of type ssh may have, besides type and hosts:
// defaults of the hosts' keys, and the provider's own.
var providerKeys = []string{"dial_timeout", "dir", "host_retry", "key_file", "known_hosts", "lakeshore", "plane_url", "port", "user", "workers"}

// FromConfig makes a Config of a provider of type ssh declared in a project file. The
// provider's options dir, key_file, lakeshore, plane_url, port, user and workers are
// defaults for its hosts; known_hosts is a comma-separated list of files; dial_timeout and
// host_retry are durations. A leading "~/" of key_file and known_hosts is the supervisor's
// home directory. Errors: *fabric.ConfigError naming the file, the line and the field.
func FromConfig(file string, p *fabric.Provider) (Config, error) {
	fail := func(line int, field, msg string, allowed ...string) error {
		return &fabric.ConfigError{File: file, Line: line, Field: "providers." + p.Name + field, Message: msg, Allowed: allowed}
	}
	if p.Type != "ssh" {
		return Config{}, fail(p.Line, ".type", fmt.Sprintf("a provider of type %s is not an ssh provider", p.Type))
	}
	cfg := Config{Name: p.Name}
	for _, k := range slices.Sorted(maps.Keys(p.Options)) {
		if !slices.Contains(providerKeys, k) {
			return Config{}, fail(p.Line, "."+k, fmt.Sprintf("unknown key %q", k), append([]string{"hosts", "type"}, providerKeys...)...)
		}
	}
	var err error
	if s := p.Options["known_hosts"]; s != "" {
		for f := range strings.SplitSeq(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				cfg.KnownHosts = append(cfg.KnownHosts, expandHome(f))
			}
		}
	}
	for _, k := range []string{"dial_timeout", "host_retry"} {
		if s := p.Options[k]; s != "" {
			d, perr := fabric.ParseDuration(s)
			if perr != nil || d <= 0 {
				return Config{}, fail(p.Line, "."+k, fmt.Sprintf("bad duration %q: want a positive duration (\"10s\", \"1m\")", s))
			}
			if k == "dial_timeout" {
				cfg.DialTimeout = d
			} else {
				cfg.HostRetry = d
			}
		}
	}
	if len(p.Hosts) == 0 {
		return Config{}, fail(p.Line, ".hosts", "missing: list the machines that run workers (hosts: [{host: gpu1.internal, user: ml}])")
	}
	for i, h := range p.Hosts {
		opt := func(k string) string {
			if v, ok := h.Options[k]; ok {
				return v
			}
			return p.Options[k]
		}
		field := fmt.Sprintf(".hosts[%d]", i)
		host := Host{Address: h.Options["host"], User: opt("user"), Lakeshore: opt("lakeshore"), Dir: opt("dir"),
			Pool: opt("pool"), PlaneURL: opt("plane_url"), Offers: h.Offers}
		if kf := opt("key_file"); kf != "" {
			host.KeyFile = expandHome(kf)
		}
		if s := opt("port"); s != "" {
			if host.Port, err = strconv.Atoi(s); err != nil || host.Port < 1 || host.Port > 65535 {
				return Config{}, fail(h.Line, field+".port", fmt.Sprintf("bad port %q: want 1-65535", s))
			}
		}
		if s := opt("workers"); s != "" {
			if host.Workers, err = strconv.Atoi(s); err != nil || host.Workers < 1 || host.Workers > 1024 {
				return Config{}, fail(h.Line, field+".workers", fmt.Sprintf("bad worker count %q: want 1-1024", s))
			}
		}
		if err := host.check(); err != nil {
			return Config{}, fail(h.Line, field, err.Error())
		}
		cfg.Hosts = append(cfg.Hosts, host)
	}
	return cfg, nil
}

// check reports what is wrong with h, as a sentence.
func (h *Host) check() error {
	if err := fabric.CheckHostAddress(h.Address); err != nil {
		return err
	}
	if h.PlaneURL != "" {
		if err := fabric.CheckPlaneURL(h.PlaneURL); err != nil {
			return err
		}
	}
	switch {
	case h.Port < 0 || h.Port > 65535:
		return fmt.Errorf("bad port %d: want 1-65535", h.Port)
	case h.Workers < 0:
		return fmt.Errorf("bad worker count %d: want ≥ 1", h.Workers)
	case strings.ContainsAny(h.Dir, "\n\x00"):
		return fmt.Errorf("bad dir %q: no newlines", h.Dir)
	}
	return nil
}

// expandHome replaces a leading "~/" with the supervisor's home directory.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

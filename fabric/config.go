package fabric

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// ConfigFileName is the project file's name, looked for in the working directory and
// each of its parents.
const ConfigFileName = "lakeshore.yaml"

// EnvConfig names the environment variable that, when set, is the project file's path
// (no walking up).
const EnvConfig = "LAKESHORE_CONFIG"

// DefaultMaxCodeBytes is the compressed-size ceiling of a code archive when the project
// file sets none: 100 MiB.
const DefaultMaxCodeBytes = 100 << 20

// ProviderTypes lists the provider types a project file may declare.
var providerTypes = []string{"exec", "kubernetes", "local", "slurm", "ssh"}

// ProviderTypes returns the provider types a project file may declare, sorted.
func ProviderTypes() []string { return slices.Clone(providerTypes) }

// Config is a parsed project file.
type Config struct {
	// File is the path it was read from; Dir its directory, the project root (the code
	// root and the base of relative mount paths).
	File, Dir string
	// Modes are the compute modes by name.
	Modes map[string]*Mode
	// Providers are the declared providers by name.
	Providers map[string]*Provider
	// Code is the code section; nil when the file has none (runs then ship code only for
	// a mode that says `code: true`, as the git tree of Dir).
	Code *Code
}

// Resources is what a run needs from its worker (and what a worker offers).
type Resources struct {
	// MilliCPUs is the CPU count × 1000 ("cpus: 0.5" is 500); 0: unspecified.
	MilliCPUs int64
	// MemoryBytes is the memory in bytes ("memory: 16GiB"); 0: unspecified.
	MemoryBytes int64
	// GPUs is the GPU count; 0: none.
	GPUs int64
	// GPUType is the GPU model ("a100"); "": any.
	GPUType string
	// Labels are free-form placement labels (zone, arch, …); nil: none.
	Labels map[string]string
}

// Mode is one compute mode: the run declaration a submit names.
type Mode struct {
	// Name is the mode's name in the file.
	Name string
	// Resources is what a run of the mode needs.
	Resources Resources
	// Setup are shell commands run once per worker environment (per host key and code
	// digest) before its first body, in order, in the code's directory.
	Setup []string
	// RunSetup are shell commands run before each body, in order.
	RunSetup []string
	// Env is set in each body's environment (and its run_setup commands'); not in setup's.
	Env map[string]string
	// Provider names the provider that launches workers for the mode ("": none named).
	Provider string
	// TimeLimit bounds one attempt (0: no limit); a submit sends it as the attempt timeout.
	TimeLimit time.Duration
	// Code says whether a submit of the mode ships the submitter's code: the mode's
	// `code:` value, else true when the file has a code section.
	Code bool
}

// Provider is one declared provider.
type Provider struct {
	// Name is its name in the file; Type one of ProviderTypes.
	Name, Type string
	// Options are the provider's settings as strings (partition, namespace, user, …); the
	// provider that reads them checks them.
	Options map[string]string
	// Hosts is an ssh provider's inventory (its `hosts:` list, in file order); nil for
	// the other types, which may not have one.
	Hosts []Host
	// Line is the line of the provider's name in the file (for errors about its options).
	Line int
}

// HostKeys are the keys a host of an ssh provider's inventory may have.
var hostKeys = []string{"dir", "host", "key_file", "lakeshore", "offers", "plane_url", "pool", "port", "user", "workers"}

// HostKeys returns the keys a host of an ssh provider's `hosts:` list may have, sorted.
func HostKeys() []string { return slices.Clone(hostKeys) }

// Host is one machine of an ssh provider's inventory.
type Host struct {
	// Options are the host's settings as strings, keyed by HostKeys but offers (host is
	// required; the provider checks the values and applies its own defaults).
	Options map[string]string
	// Offers is what the host offers its workers (the `offers:` resources: cpus, memory,
	// gpus, gpu_type, labels); zero: unspecified.
	Offers Resources
	// Line is the host's line in the file.
	Line int
}

// Code is the code section: what a submit ships.
type Code struct {
	// Mounts, when set, are the directories shipped instead of the git tree.
	Mounts []Mount
	// MaxBytes is the compressed-size ceiling checked before upload
	// (DefaultMaxCodeBytes when unset).
	MaxBytes int64
}

// Mount is one declared directory to ship, relative to the project root.
type Mount struct {
	// Path is the directory, relative to the project root and inside it.
	Path string
	// Include, when set, keeps only files a pattern matches; Exclude drops files a
	// pattern matches. Patterns are path.Match patterns matched against the path below
	// the mount and each of its leading directories, and, without a "/", against each
	// path component ("*.pyc", "__pycache__").
	Include, Exclude []string
}

// ConfigError is a project file that cannot be used: its file, line, the field's dotted
// path, what was wrong and, when the field takes one of a set, the allowed values. Its
// Code is "invalid_config".
type ConfigError struct {
	File    string
	Line    int
	Field   string
	Message string
	Allowed []string
}

// Code is the error's stable code, "invalid_config".
func (e *ConfigError) Code() string { return "invalid_config" }

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Message)
	if len(e.Allowed) > 0 {
		b.WriteString(" (allowed: " + strings.Join(e.Allowed, ", ") + ")")
	}
	return b.String()
}

// ErrNoConfig is returned by Find and Load when no project file is found.
var ErrNoConfig = errors.New("no " + ConfigFileName + " in the working directory or its parents (set " + EnvConfig + " to name one)")

// Find returns the project file's path: $LAKESHORE_CONFIG when getenv returns it, else
// lakeshore.yaml in dir or the nearest parent that has one. A file found in a parent
// directory must belong to the user running this, or to root: the walk up never takes a
// file another user left above the working directory (a /tmp/lakeshore.yaml on a shared
// machine would otherwise choose a submitter's commands and code, or a supervisor's hosts
// and the plane URL its workers send their token to), as git refuses a repository another
// user owns. getenv nil means os.Getenv. Errors: ErrNoConfig; *ConfigError for a parent's
// file of another user (naming it, and $LAKESHORE_CONFIG to take it anyway).
func Find(dir string, getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if p := getenv(EnvConfig); p != "" {
		return filepath.Abs(p)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	start := dir
	for {
		p := filepath.Join(dir, ConfigFileName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			if dir != start {
				if owner, ok := fileOwner(st); ok && owner != os.Getuid() && owner != 0 {
					return "", &ConfigError{File: p, Message: fmt.Sprintf("found above the working directory %s, and it belongs to another user (uid %d): "+
						"refusing a project file someone else may have left there; set %s=%s to use it, or put a %s in your project", start, owner, EnvConfig, p, ConfigFileName)}
				}
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoConfig
		}
		dir = parent
	}
}

// Load finds (Find) and reads (LoadFile) the project file for dir.
func Load(dir string, getenv func(string) string) (*Config, error) {
	p, err := Find(dir, getenv)
	if err != nil {
		return nil, err
	}
	return LoadFile(p)
}

// LoadFile reads and parses the project file at path. Errors: the read's, *ConfigError.
func LoadFile(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &ConfigError{File: abs, Message: "no such file"}
		}
		return nil, err
	}
	return Parse(abs, data)
}

// Mode returns the mode named name. Errors: *ConfigError naming the modes there are.
func (c *Config) Mode(name string) (*Mode, error) {
	if m, ok := c.Modes[name]; ok {
		return m, nil
	}
	names := make([]string, 0, len(c.Modes))
	for n := range c.Modes {
		names = append(names, n)
	}
	slices.Sort(names)
	msg := fmt.Sprintf("no mode %q", name)
	if len(names) == 0 {
		msg += " (the file declares no modes)"
	}
	return nil, &ConfigError{File: c.File, Field: "modes", Message: msg, Allowed: names}
}

var (
	nameRe     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	labelKeyRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./-]{0,62}$`)
	envKeyRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	cpusRe     = regexp.MustCompile(`^([0-9]+)(?:\.([0-9]{1,3}))?$|^([0-9]+)m$`)
	memoryRe   = regexp.MustCompile(`^([0-9]+) ?(B|K|KB|Ki|KiB|M|MB|Mi|MiB|G|GB|Gi|GiB|T|TB|Ti|TiB)?$`)
	durationRe = regexp.MustCompile(`^(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$`)
	digitsRe   = regexp.MustCompile(`^[0-9]+$`)
)

// TimeLimitMax bounds a time limit: under 2^32 seconds (about 136 years), in every
// spelling ("4294967295", "1193046h28m15s"), so that it fits a time.Duration and reads
// alike in both SDKs.
const TimeLimitMax = (1<<32 - 1) * time.Second

var memoryUnits = map[string]int64{
	"": 1, "B": 1,
	"K": 1e3, "KB": 1e3, "Ki": 1 << 10, "KiB": 1 << 10,
	"M": 1e6, "MB": 1e6, "Mi": 1 << 20, "MiB": 1 << 20,
	"G": 1e9, "GB": 1e9, "Gi": 1 << 30, "GiB": 1 << 30,
	"T": 1e12, "TB": 1e12, "Ti": 1 << 40, "TiB": 1 << 40,
}

// ParseCPUs reads a CPU count ("8", "0.5", "500m") as millicpus. Errors: a plain error
// saying what is allowed.
func ParseCPUs(s string) (int64, error) {
	m := cpusRe.FindStringSubmatch(s)
	if m == nil {
		return 0, errors.New("want a CPU count: a number with at most 3 decimals (\"2\", \"0.5\") or millicpus (\"500m\")")
	}
	if m[3] != "" {
		return boundedInt(m[3], 1<<40)
	}
	whole, err := boundedInt(m[1], 1<<30)
	if err != nil {
		return 0, err
	}
	frac := m[2] + strings.Repeat("0", 3-len(m[2]))
	f, _ := strconv.ParseInt(frac, 10, 64)
	return whole*1000 + f, nil
}

// ParseMemory reads a size ("16GiB", "512MB", "1073741824") as bytes: K, M, G, T are
// powers of 1000, Ki, Mi, Gi, Ti powers of 1024, a B suffix optional. Errors: a plain
// error saying what is allowed.
func ParseMemory(s string) (int64, error) {
	m := memoryRe.FindStringSubmatch(s)
	if m == nil {
		return 0, errors.New("want a size: an integer with an optional unit B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)")
	}
	n, err := boundedInt(m[1], 1<<50)
	if err != nil {
		return 0, err
	}
	unit := memoryUnits[m[2]]
	if n > (1<<62)/unit {
		return 0, errors.New("too large")
	}
	return n * unit, nil
}

// ParseDuration reads a time limit: seconds ("3600") or hours, minutes and seconds
// ("2h", "1h30m", "90s"), at most TimeLimitMax. Numbers are ASCII digits (no sign).
// Errors: a plain error saying what is allowed.
func ParseDuration(s string) (time.Duration, error) {
	if digitsRe.MatchString(s) {
		n, err := boundedInt(s, int64(TimeLimitMax/time.Second))
		if err != nil {
			return 0, errTimeLimitTooLarge
		}
		return time.Duration(n) * time.Second, nil
	}
	m := durationRe.FindStringSubmatch(s)
	if m == nil || s == "" {
		return 0, errors.New("want seconds (\"3600\") or hours, minutes, seconds (\"2h\", \"1h30m\", \"90s\")")
	}
	var total int64
	for i, unit := range []int64{3600, 60, 1} {
		if m[i+1] != "" {
			n, err := boundedInt(m[i+1], 1<<30)
			if err != nil {
				return 0, err
			}
			total += n * unit
		}
	}
	if total > int64(TimeLimitMax/time.Second) {
		return 0, errTimeLimitTooLarge
	}
	return time.Duration(total) * time.Second, nil
}

var errTimeLimitTooLarge = errors.New("too large: at most 4294967295 seconds (1193046h28m15s)")

func boundedInt(s string, limit int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > limit {
		return 0, errors.New("too large")
	}
	return n, nil
}

// parser walks the YAML node tree, with the file name for errors.
type parser struct{ file string }

func (p *parser) fail(n *yaml.Node, field, msg string, allowed ...string) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &ConfigError{File: p.file, Line: line, Field: field, Message: msg, Allowed: allowed}
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// mapping returns the pairs of a mapping node in file order, checking keys against
// allowed (nil: any key) and for duplicates.
func (p *parser) mapping(n *yaml.Node, field string, allowed []string) ([][2]*yaml.Node, error) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.fail(n, field, "want a mapping (key: value lines)")
	}
	seen := map[string]bool{}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return nil, p.fail(k, field, "want a plain key")
		}
		sub := join(field, k.Value)
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			return nil, p.fail(k, sub, fmt.Sprintf("unknown key %q", k.Value), allowed...)
		}
		if seen[k.Value] {
			return nil, p.fail(k, sub, "given twice")
		}
		seen[k.Value] = true
		out = append(out, [2]*yaml.Node{k, v})
	}
	return out, nil
}

// pairs returns the key and value nodes of a mapping node already checked by mapping.
func (p *parser) pairs(n *yaml.Node) [][2]*yaml.Node {
	n = deref(n)
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yaml.Node{deref(n.Content[i]), deref(n.Content[i+1])})
	}
	return out
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func (p *parser) scalar(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.fail(n, field, "want a single value (quote text that holds \": \" or starts with { or [)")
	}
	if strings.ContainsRune(n.Value, 0) {
		return "", p.fail(n, field, errNULValue)
	}
	return n.Value, nil
}

// errNULValue refuses a value holding a NUL byte (a YAML "\0"): no command line,
// environment variable or path can carry one, so it could only fail later, on a worker.
const errNULValue = "holds a NUL byte (\\0): no value of the project file may (a command, an environment value or a path cannot carry one)"

func (p *parser) strings(n *yaml.Node, field string) ([]string, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind == yaml.ScalarNode {
		v, err := p.scalar(n, field)
		if err != nil {
			return nil, err
		}
		return []string{v}, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.fail(n, field, "want a list of strings")
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		c = deref(c)
		s, err := p.scalar(c, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) stringMap(n *yaml.Node, field string, keyRe *regexp.Regexp, keyRule string) (map[string]string, error) {
	pairs, err := p.mapping(n, field, nil)
	if err != nil || len(pairs) == 0 {
		return nil, err
	}
	out := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		sub := join(field, kv[0].Value)
		if !keyRe.MatchString(kv[0].Value) {
			return nil, p.fail(kv[0], sub, fmt.Sprintf("bad key %q: want %s", kv[0].Value, keyRule))
		}
		v, err := p.scalar(kv[1], sub)
		if err != nil {
			return nil, err
		}
		out[kv[0].Value] = v
	}
	return out, nil
}

func (p *parser) boolean(n *yaml.Node, field string) (bool, error) {
	s, err := p.scalar(n, field)
	if err != nil {
		return false, err
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, p.fail(n, field, fmt.Sprintf("%q is not a boolean", s), "true", "false")
}

// Parse parses a project file's content; file names it in errors and becomes
// Config.File (its directory Config.Dir). Scalars are read by their text, not by YAML's
// type resolution, so that the Go and Python parsers agree. Errors: *ConfigError.
func Parse(file string, data []byte) (*Config, error) {
	p := &parser{file: file}
	c := &Config{File: file, Dir: filepath.Dir(file), Modes: map[string]*Mode{}, Providers: map[string]*Provider{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &ConfigError{File: file, Line: yamlErrorLine(err), Message: "not valid YAML: " + yamlErrorText(err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return c, nil
	}
	top, err := p.mapping(doc.Content[0], "", []string{"code", "modes", "providers"})
	if err != nil {
		return nil, err
	}
	var modeNodes [][2]*yaml.Node
	for _, kv := range top {
		switch kv[0].Value {
		case "modes":
			if modeNodes, err = p.mapping(kv[1], "modes", nil); err != nil {
				return nil, err
			}
		case "providers":
			if err := p.providers(c, kv[1]); err != nil {
				return nil, err
			}
		case "code":
			if c.Code, err = p.code(kv[1]); err != nil {
				return nil, err
			}
		}
	}
	for _, kv := range modeNodes {
		m, err := p.mode(c, kv[0], kv[1])
		if err != nil {
			return nil, err
		}
		c.Modes[m.Name] = m
	}
	return c, nil
}

func (p *parser) providers(c *Config, n *yaml.Node) error {
	pairs, err := p.mapping(n, "providers", nil)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		name, field := kv[0].Value, "providers."+kv[0].Value
		if !nameRe.MatchString(name) {
			return p.fail(kv[0], field, fmt.Sprintf("bad provider name %q: want 1-63 of [A-Za-z0-9_.-], starting with a letter or digit", name))
		}
		fields, err := p.mapping(kv[1], field, nil)
		if err != nil {
			return err
		}
		pr := &Provider{Name: name, Options: map[string]string{}, Line: kv[0].Line}
		var hosts *yaml.Node
		for _, f := range fields {
			if f[0].Value == "hosts" {
				hosts = f[1]
				continue
			}
			v, err := p.scalar(f[1], join(field, f[0].Value))
			if err != nil {
				return err
			}
			if f[0].Value == "type" {
				if !slices.Contains(providerTypes, v) {
					return p.fail(f[1], join(field, "type"), fmt.Sprintf("unknown provider type %q", v), providerTypes...)
				}
				pr.Type = v
				continue
			}
			if f[0].Value == "plane_url" {
				if err := CheckPlaneURL(v); err != nil {
					return p.fail(f[1], join(field, f[0].Value), err.Error())
				}
			}
			pr.Options[f[0].Value] = v
		}
		if pr.Type == "" {
			return p.fail(kv[0], join(field, "type"), "missing", providerTypes...)
		}
		if hosts != nil {
			if pr.Type != "ssh" {
				return p.fail(hosts, join(field, "hosts"), fmt.Sprintf("a %s provider has no hosts (only type ssh has an inventory)", pr.Type))
			}
			if pr.Hosts, err = p.hosts(hosts, join(field, "hosts")); err != nil {
				return err
			}
		}
		c.Providers[name] = pr
	}
	return nil
}

// hosts parses an ssh provider's inventory: a list of mappings with the keys of hostKeys,
// each a single value but offers (resources), host required.
func (p *parser) hosts(n *yaml.Node, field string) ([]Host, error) {
	n = deref(n)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, p.fail(n, field, "want a list of hosts (host, port, user, key_file, lakeshore, dir, workers, pool, plane_url, offers)")
	}
	out := make([]Host, 0, len(n.Content))
	for i, hn := range n.Content {
		sub := fmt.Sprintf("%s[%d]", field, i)
		hn = deref(hn)
		h := Host{Options: map[string]string{}, Line: hn.Line}
		if hn.Kind == yaml.ScalarNode && !isNull(hn) { // "- gpu1.internal": the host alone
			if err := CheckHostAddress(hn.Value); err != nil {
				return nil, p.fail(hn, join(sub, "host"), err.Error())
			}
			h.Options["host"] = hn.Value
			out = append(out, h)
			continue
		}
		pairs, err := p.mapping(hn, sub, hostKeys)
		if err != nil {
			return nil, err
		}
		for _, kv := range pairs {
			if kv[0].Value == "offers" {
				if err := p.resources(&h.Offers, kv[1], join(sub, "offers")); err != nil {
					return nil, err
				}
				continue
			}
			v, err := p.scalar(kv[1], join(sub, kv[0].Value))
			if err != nil {
				return nil, err
			}
			if err := checkHostOption(kv[0].Value, v); err != nil {
				return nil, p.fail(kv[1], join(sub, kv[0].Value), err.Error())
			}
			h.Options[kv[0].Value] = v
		}
		if h.Options["host"] == "" {
			return nil, p.fail(hn, join(sub, "host"), "missing: name the machine (a host name or address)")
		}
		out = append(out, h)
	}
	return out, nil
}

// checkHostOption checks the host and plane_url values of an inventory host.
func checkHostOption(key, v string) error {
	switch key {
	case "host":
		return CheckHostAddress(v)
	case "plane_url":
		return CheckPlaneURL(v)
	}
	return nil
}

// CheckHostAddress reports, as a sentence, what is wrong with address as the host of an ssh
// provider's inventory: it must be a host name or an IP address (v4 or v6, unbracketed),
// with no user (that is user:), no port (that is port:) and no spaces or slashes. Nil when
// it is fine; the Python SDK (lakeshore.config) gives the same answers.
func CheckHostAddress(address string) error {
	if address == "" || strings.ContainsAny(address, " \t\r\n/@\x00") {
		return fmt.Errorf("bad host %q: want a host name or an IP address (the user goes in user:)", address)
	}
	if strings.Contains(address, ":") {
		if _, err := netip.ParseAddr(address); err != nil {
			return fmt.Errorf("bad host %q: want a host name or an IP address without a port (the port goes in port:)", address)
		}
		return nil
	}
	if !hostNameRe.MatchString(address) {
		// Errors print the host in a command to copy (ssh-keyscan … HOST >> known_hosts): a
		// name is only what a host name can be, so no copied line runs more than it says.
		return fmt.Errorf("bad host %q: want a host name (up to 253 of letters, digits, \".\", \"-\" and \"_\", starting with a letter, digit or \"_\") or an IP address", address)
	}
	return nil
}

// hostNameRe is what a host name of an inventory may be.
var hostNameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$`)

// CheckPlaneURL reports, as a sentence, what is wrong with u as a plane_url (the
// LAKESHORE_URL a provider's workers reach the plane by): it must be an http:// or https://
// URL with a host. Nil when it is fine.
func CheckPlaneURL(u string) error {
	scheme, rest, found := strings.Cut(u, "://")
	if !found || (scheme != "http" && scheme != "https") || rest == "" || strings.HasPrefix(rest, "/") {
		// The URL itself is not repeated: it may carry credentials.
		return errors.New("bad plane_url: want an http:// or https:// URL of the plane (\"http://10.0.0.5:7070\")")
	}
	return nil
}

func (p *parser) code(n *yaml.Node) (*Code, error) {
	pairs, err := p.mapping(n, "code", []string{"max_size", "mounts"})
	if err != nil {
		return nil, err
	}
	code := &Code{MaxBytes: DefaultMaxCodeBytes}
	for _, kv := range pairs {
		field := "code." + kv[0].Value
		switch kv[0].Value {
		case "max_size":
			s, err := p.scalar(kv[1], field)
			if err != nil {
				return nil, err
			}
			if code.MaxBytes, err = ParseMemory(s); err != nil || code.MaxBytes == 0 {
				return nil, p.fail(kv[1], field, fmt.Sprintf("bad size %q: want a positive size (\"50MB\", \"1GiB\")", s))
			}
		case "mounts":
			if kv[1].Kind != yaml.SequenceNode {
				return nil, p.fail(kv[1], field, "want a list of mounts (path, include, exclude)")
			}
			for i, mn := range kv[1].Content {
				sub := fmt.Sprintf("%s[%d]", field, i)
				mn = deref(mn)
				if mn.Kind == yaml.ScalarNode {
					mp, err := p.mountPath(mn, sub+".path")
					if err != nil {
						return nil, err
					}
					code.Mounts = append(code.Mounts, Mount{Path: mp})
					continue
				}
				mf, err := p.mapping(mn, sub, []string{"exclude", "include", "path"})
				if err != nil {
					return nil, err
				}
				m := Mount{}
				for _, f := range mf {
					ff := join(sub, f[0].Value)
					switch f[0].Value {
					case "path":
						if m.Path, err = p.mountPath(f[1], ff); err != nil {
							return nil, err
						}
					case "include", "exclude":
						pats, err := p.strings(f[1], ff)
						if err != nil {
							return nil, err
						}
						for j, pat := range pats {
							if err := checkPattern(pat); err != nil {
								return nil, p.fail(f[1], fmt.Sprintf("%s[%d]", ff, j), fmt.Sprintf("bad pattern %q: %v", pat, err))
							}
						}
						if f[0].Value == "include" {
							m.Include = pats
						} else {
							m.Exclude = pats
						}
					}
				}
				if m.Path == "" {
					return nil, p.fail(mn, sub+".path", "missing")
				}
				code.Mounts = append(code.Mounts, m)
			}
		}
	}
	return code, nil
}

func (p *parser) mountPath(n *yaml.Node, field string) (string, error) {
	s, err := p.scalar(n, field)
	if err != nil {
		return "", err
	}
	clean := filepath.ToSlash(filepath.Clean(s))
	if s == "" || filepath.IsAbs(s) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", p.fail(n, field, fmt.Sprintf("bad mount path %q: want a directory inside the project root, relative to it", s))
	}
	return clean, nil
}

var modeKeys = []string{"code", "env", "provider", "resources", "run_setup", "setup", "time_limit"}
var resourceKeys = []string{"cpus", "gpu_type", "gpus", "labels", "memory"}

func (p *parser) mode(c *Config, k, n *yaml.Node) (*Mode, error) {
	name, field := k.Value, "modes."+k.Value
	if !nameRe.MatchString(name) {
		return nil, p.fail(k, field, fmt.Sprintf("bad mode name %q: want 1-63 of [A-Za-z0-9_.-], starting with a letter or digit", name))
	}
	pairs, err := p.mapping(n, field, modeKeys)
	if err != nil {
		return nil, err
	}
	m := &Mode{Name: name, Code: c.Code != nil}
	for _, kv := range pairs {
		sub := join(field, kv[0].Value)
		v := kv[1]
		switch kv[0].Value {
		case "resources":
			if err := p.resources(&m.Resources, v, sub); err != nil {
				return nil, err
			}
		case "setup":
			m.Setup, err = p.strings(v, sub)
		case "run_setup":
			m.RunSetup, err = p.strings(v, sub)
		case "env":
			m.Env, err = p.stringMap(v, sub, envKeyRe, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
		case "provider":
			var s string
			if s, err = p.scalar(v, sub); err != nil {
				return nil, err
			}
			if _, ok := c.Providers[s]; !ok && s != "local" {
				names := []string{"local"}
				for n := range c.Providers {
					names = append(names, n)
				}
				slices.Sort(names)
				return nil, p.fail(v, sub, fmt.Sprintf("no provider %q (declare it under providers:)", s), slices.Compact(names)...)
			}
			m.Provider = s
		case "time_limit":
			var s string
			if s, err = p.scalar(v, sub); err != nil {
				return nil, err
			}
			if m.TimeLimit, err = ParseDuration(s); err != nil {
				return nil, p.fail(v, sub, fmt.Sprintf("bad time limit %q: %v", s, err))
			}
		case "code":
			m.Code, err = p.boolean(v, sub)
		}
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (p *parser) resources(r *Resources, n *yaml.Node, field string) error {
	pairs, err := p.mapping(n, field, resourceKeys)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		sub := join(field, kv[0].Value)
		if kv[0].Value == "labels" {
			if r.Labels, err = p.stringMap(kv[1], sub, labelKeyRe, "1-63 of [A-Za-z0-9_./-], starting with a letter or digit"); err != nil {
				return err
			}
			if len(r.Labels) > plane.PlacementLabelsMax {
				return p.fail(kv[1], sub, fmt.Sprintf("%d labels: at most %d are allowed", len(r.Labels), plane.PlacementLabelsMax))
			}
			for _, lv := range p.pairs(kv[1]) {
				if v := r.Labels[lv[0].Value]; !plane.ValidLabelValue(v) {
					return p.fail(lv[1], join(sub, lv[0].Value), fmt.Sprintf("bad label value %q: %s", v, plane.PlacementLabelValueRule))
				}
			}
			continue
		}
		s, err := p.scalar(kv[1], sub)
		if err != nil {
			return err
		}
		switch kv[0].Value {
		case "cpus":
			if r.MilliCPUs, err = ParseCPUs(s); err != nil {
				return p.fail(kv[1], sub, fmt.Sprintf("bad CPU count %q: %v", s, err))
			}
			if r.MilliCPUs > plane.RequirementCPUsMax*1000 {
				return p.fail(kv[1], sub, fmt.Sprintf("bad CPU count %q: at most %d CPUs", s, plane.RequirementCPUsMax))
			}
		case "memory":
			if r.MemoryBytes, err = ParseMemory(s); err != nil {
				return p.fail(kv[1], sub, fmt.Sprintf("bad memory size %q: %v", s, err))
			}
			if r.MemoryBytes > plane.RequirementMemoryMax {
				return p.fail(kv[1], sub, fmt.Sprintf("bad memory size %q: at most 1PiB", s))
			}
		case "gpus":
			n, perr := strconv.ParseInt(s, 10, 64)
			if !digitsRe.MatchString(s) || perr != nil || n > 1024 {
				return p.fail(kv[1], sub, fmt.Sprintf("bad GPU count %q: want an integer 0-1024", s))
			}
			r.GPUs = n
		case "gpu_type":
			if !labelKeyRe.MatchString(s) {
				return p.fail(kv[1], sub, fmt.Sprintf("bad GPU type %q: want 1-63 of [A-Za-z0-9_./-] (\"a100\", \"h100-80gb\")", s))
			}
			r.GPUType = s
		}
	}
	return nil
}

var yamlLineRe = regexp.MustCompile(`line ([0-9]+)`)

func yamlErrorLine(err error) int {
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func yamlErrorText(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

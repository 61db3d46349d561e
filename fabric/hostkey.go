package fabric

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// HostKeyPrefix starts every host key; its digit is the key's version, bumped with any
// change to what the key covers or how it is encoded.
const HostKeyPrefix = "hk1_"

// HostKey returns the mode's host key: same key ⇒ two runs may share a warm worker. It
// covers what decides where a run can go and what state its worker was prepared into —
// the provider, the resources (CPUs, memory, GPUs, GPU type, labels) and the setup
// commands, in order — and leaves out what a worker applies per run (env, run_setup,
// time limit, code). It is "hk1_" and the first 16 bytes of the SHA-256 of a canonical
// text, in hex (36 characters); docs/fabric.md gives the text, and the Python SDK's
// lakeshore.config.host_key computes the same (fabric/testdata/vectors.json).
func HostKey(m *Mode) string {
	var b strings.Builder
	b.WriteString("lakeshore host key 1\n")
	field := func(name, value string) {
		b.WriteString(name)
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(len(value)))
		b.WriteByte(':')
		b.WriteString(value)
		b.WriteByte('\n')
	}
	r := m.Resources
	field("provider", m.Provider)
	field("cpus_milli", strconv.FormatInt(r.MilliCPUs, 10))
	field("memory_bytes", strconv.FormatInt(r.MemoryBytes, 10))
	field("gpus", strconv.FormatInt(r.GPUs, 10))
	field("gpu_type", r.GPUType)
	keys := make([]string, 0, len(r.Labels))
	for k := range r.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field("label", k+"="+r.Labels[k])
	}
	for _, s := range m.Setup {
		field("setup", s)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return HostKeyPrefix + hex.EncodeToString(sum[:16])
}

// Metadata keys of the run declaration a submit of a mode carries (every plane stores an
// invocation's metadata; workers and `lakeshore get` read it back).
const (
	// MetaMode is the mode's name.
	MetaMode = "lakeshore.mode"
	// MetaHostKey is the mode's HostKey.
	MetaHostKey = "lakeshore.host_key"
	// MetaRun is the run declaration as JSON (RunDeclaration).
	MetaRun = "lakeshore.run"
	// MetaCode is the digest of the code shipped with the run (Digest), when it ships any.
	MetaCode = "lakeshore.code"
	// MetaFunction is the Python function a shipped-code run imports ("module:qualname").
	MetaFunction = "lakeshore.function"
	// MetaGit is the git context of the shipped code as JSON (GitContext), when the code
	// is a git tree.
	MetaGit = "lakeshore.git"
)

// GitContext is the git state of the tree a run's code was snapshotted from, as stored in
// MetaGit by the Python SDK's lakeshore.code.GitContext (docs/fabric.md).
type GitContext struct {
	// Commit is the full hash of HEAD; "" in a repository without commits.
	Commit string `json:"commit"`
	// Branch is the checked-out branch's short name; "" when HEAD is detached.
	Branch string `json:"branch"`
	// Dirty tells whether the project's directory (the one holding lakeshore.yaml: what
	// ships) differed from HEAD (modified, staged, deleted or untracked-not-ignored files,
	// or a moved or modified submodule below it).
	Dirty bool `json:"dirty"`
	// DiffSHA256 is the SHA-256, in hex, of `git diff --binary HEAD -- .` in that directory;
	// "" without a diff.
	DiffSHA256 string `json:"diff_sha256"`
	// Submodules are the submodules' paths and commits, recursively; nil without any.
	Submodules []GitSubmodule `json:"submodules,omitempty"`
}

// GitSubmodule is one submodule of a GitContext.
type GitSubmodule struct {
	Path   string `json:"path"`
	Commit string `json:"commit"`
}

// String is the one-line form `lakeshore get` shows: "<commit> (<branch>[, dirty, diff <12 hex>])".
func (g GitContext) String() string {
	commit := g.Commit
	if commit == "" {
		commit = "(no commit)"
	}
	where := g.Branch
	if where == "" {
		where = "detached"
	}
	if g.Dirty {
		where += ", dirty"
		if len(g.DiffSHA256) >= 12 {
			where += ", diff " + g.DiffSHA256[:12]
		}
	}
	return commit + " (" + where + ")"
}

// RunDeclaration is the run declaration as stored in MetaRun: the mode with its units
// spelled out. Python's lakeshore.config.Mode.declaration writes the same fields.
type RunDeclaration struct {
	Mode             string            `json:"mode"`
	Provider         string            `json:"provider,omitempty"`
	MilliCPUs        int64             `json:"cpus_milli,omitempty"`
	MemoryBytes      int64             `json:"memory_bytes,omitempty"`
	GPUs             int64             `json:"gpus,omitempty"`
	GPUType          string            `json:"gpu_type,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	Setup            []string          `json:"setup,omitempty"`
	RunSetup         []string          `json:"run_setup,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	TimeLimitSeconds int64             `json:"time_limit,omitempty"`
	HostKey          string            `json:"host_key"`
}

// Declaration returns the mode's run declaration.
func (m *Mode) Declaration() RunDeclaration {
	r := m.Resources
	return RunDeclaration{
		Mode: m.Name, Provider: m.Provider, MilliCPUs: r.MilliCPUs, MemoryBytes: r.MemoryBytes,
		GPUs: r.GPUs, GPUType: r.GPUType, Labels: r.Labels, Setup: m.Setup, RunSetup: m.RunSetup,
		Env: m.Env, TimeLimitSeconds: int64(m.TimeLimit.Seconds()), HostKey: HostKey(m),
	}
}

// Metadata returns the invocation metadata of a run of the mode (MetaMode, MetaHostKey,
// MetaRun), to merge into a submit's metadata; codeDigest, when not "", adds MetaCode.
func (m *Mode) Metadata(codeDigest string) map[string]string {
	decl, _ := json.Marshal(m.Declaration()) // plain strings and integers: cannot fail
	md := map[string]string{MetaMode: m.Name, MetaHostKey: HostKey(m), MetaRun: string(decl)}
	if codeDigest != "" {
		md[MetaCode] = codeDigest
	}
	return md
}

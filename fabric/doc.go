// Package fabric holds the compute fabric's shared definitions, implemented identically
// in the Python SDK (lakeshore.config, lakeshore.code): the project file lakeshore.yaml
// with its compute modes, the derived host key, and the deterministic code archive with
// its digest. docs/fabric.md describes the format and the decisions; the golden vectors
// in fabric/testdata/vectors.json pin both implementations to the same answers.
//
// A submit names a mode; the run declaration travels with the invocation in its
// metadata under the keys of RunMetadata (MetaMode, MetaHostKey, MetaRun, MetaCode), so
// every plane stores it with no schema change.
package fabric

// Package record is the data queue's value layer, defined once and shared by the SDK
// (package persist, which aliases the public types), the file store, persist/lakestore,
// persist/httpstore and the server's Arrow guard (internal/arrowbody): a record and its
// fields' kinds, the schema and its widening rules, normalization of Go values into
// stored values, the wire codec for codec-kind values, the wire and Arrow transfer forms,
// the columnar Batch a read returns, index sets, and the data queue's typed errors.
//
// It lives in the module's internal/ rather than persist/internal/ because
// internal/arrowbody, which the server imports, checks untrusted Arrow bodies against the
// tensor layout and the column rule defined here.
package record

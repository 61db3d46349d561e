// Package plane defines the boundary between Lakeshore's SDK and the places its state lives:
// the Driver interface every dispatch plane implements (SQLite, HTTP, PostgreSQL), the shared
// types (Invocation, Job, Frame, State, Kind), the sentinel errors with their stable wire
// codes, and the validation rules every plane applies. It is a leaf: it imports no other
// Lakeshore package.
package plane

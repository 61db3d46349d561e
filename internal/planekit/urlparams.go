package planekit

import (
	"fmt"
	"strconv"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// URLParams are the run-time parameters of a database URL (pgx's RuntimeParams) that carry
// a plane's own settings. Each is read once and removed, so the connection never sends it
// to the server, and a parameter and the Config field it sets must agree when both set a
// value. Errors are *plane.InvalidError naming "database URL parameter " and the name.
type URLParams map[string]string

// take removes the parameter name and returns its value.
func (p URLParams) take(name string) (string, bool) {
	v, ok := p[name]
	delete(p, name)
	return v, ok
}

// urlField is the field an error about the parameter name names.
func urlField(name string) string { return "database URL parameter " + name }

// conflict is the error of the parameter name whose value url contradicts the Config
// field's value cfg.
func conflict(name string, url, cfg any) error {
	return plane.Invalid(urlField(name), url, fmt.Sprintf("it contradicts the Config value %v: give one of them", cfg))
}

// String sets *field to the parameter name, when given, once check (given the error's field
// and the value) accepts it.
func (p URLParams) String(name string, field *string, check func(field, v string) error) error {
	v, ok := p.take(name)
	if !ok {
		return nil
	}
	if err := check(urlField(name), v); err != nil {
		return err
	}
	if *field != "" && *field != v {
		return conflict(name, v, *field)
	}
	*field = v
	return nil
}

// Bool sets *field to the parameter name, when given: true or false (also 1/0, t/f). Only
// false contradicts a field set (true).
func (p URLParams) Bool(name string, field *bool) error {
	v, ok := p.take(name)
	if !ok {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return plane.Invalid(urlField(name), v, "use true or false")
	}
	if *field && !b {
		return conflict(name, v, *field)
	}
	*field = b
	return nil
}

// Duration sets *field to the parameter name, when given: a Go duration that ok accepts
// (rule says which, to a caller who gave another).
func (p URLParams) Duration(name string, field *time.Duration, rule string, ok func(time.Duration) bool) error {
	v, present := p.take(name)
	if !present {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || !ok(d) {
		return plane.Invalid(urlField(name), v, rule)
	}
	if *field != 0 && *field != d {
		return conflict(name, v, *field)
	}
	*field = d
	return nil
}

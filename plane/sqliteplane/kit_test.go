package sqliteplane

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKitStatementsInSQLiteDialect checks that the statements both planes share
// (planekit.Statements.Common) reach SQLite in its dialect: no schema, no $N parameter and
// no bare LIMIT ? (internal/sqlitedb's doc.go).
func TestKitStatementsInSQLiteDialect(t *testing.T) {
	bare := regexp.MustCompile(`\bLIMIT\s+\?`)
	v := reflect.ValueOf(*kitStatements())
	for i := range v.NumField() {
		q, ok := v.Field(i).Interface().(string)
		if !ok {
			continue
		}
		name := v.Type().Field(i).Name
		require.NotEmpty(t, q, name)
		require.NotContains(t, q, "$", name)
		require.NotContains(t, q, "{s}", name)
		require.False(t, bare.MatchString(q), "%s: %s", name, q)
	}
}

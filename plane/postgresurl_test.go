package plane

import "testing"

func TestIsPostgresURL(t *testing.T) {
	for _, c := range []struct {
		target            string
		postgres, miscase bool
	}{
		{"postgres://u@db/x", true, false},
		{"postgresql://u@db:5432/x?sslmode=disable", true, false},
		{"postgres://", true, false},
		{"POSTGRES://u@db/x", false, true},
		{"Postgresql://u@db/x", false, true},
		{"postgres:/u@db/x", false, false},
		{"postgresx://u@db/x", false, false},
		{" postgres://u@db/x", false, false},
		{"host=db user=u", false, false},
		{"http://db:7077", false, false},
		{"/var/lib/postgres://x", false, false},
		{"", false, false},
	} {
		if got := IsPostgresURL(c.target); got != c.postgres {
			t.Errorf("IsPostgresURL(%q) = %v, want %v", c.target, got, c.postgres)
		}
		if got := IsMiscasedPostgresURL(c.target); got != c.miscase {
			t.Errorf("IsMiscasedPostgresURL(%q) = %v, want %v", c.target, got, c.miscase)
		}
	}
}

package plane

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://lake:secret@db.example:5432/lake?sslmode=disable", "postgres://lake:xxxxx@db.example:5432/lake?sslmode=disable"},
		{"postgres://db.example/lake?password=secret&sslmode=require", "postgres://db.example/lake?password=xxxxx&sslmode=require"},
		{"postgres://lake@db/lake?sslpassword=secret", "postgres://lake@db/lake?sslpassword=xxxxx"},
		{"postgres://db/lake?blob=s3%3A%2F%2Fb&token=secret", "postgres://db/lake?blob=s3%3A%2F%2Fb&token=xxxxx"},
		{"http://user:secret@127.0.0.1:7077", "http://user:xxxxx@127.0.0.1:7077"},
		{"host=db user=lake password=secret dbname=lake", "host=db user=lake password=xxxxx dbname=lake"},
		{"host=db password='se cret' dbname=lake", "host=db password=xxxxx dbname=lake"},
		{"postgres://lake:sec%zzret@db/lake", "postgres://xxxxx@db/lake"},
		{"/home/me/.lakeshore/lakeshore.db", "/home/me/.lakeshore/lakeshore.db"},
		{":memory:", ":memory:"},
		{"", ""},
	} {
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "se cret") {
			t.Errorf("RedactURL(%q) = %q keeps the secret", c.in, got)
		}
	}
}

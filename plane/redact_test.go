package plane

import (
	"fmt"
	"net/url"
	"slices"
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
		// A password holding '/', '?' or '#' unescaped: net/url refuses the URL, and its
		// authority ends past the password (the old code printed it whole).
		{"postgres://lake:sec/ret@db/lake?sslmode=bogus", "postgres://xxxxx@db/lake?sslmode=bogus"},
		{"postgres://lake:sec?ret@db/lake?sslmode=bogus", "postgres://xxxxx@db/lake?sslmode=bogus"},
		{"postgres://lake:sec#ret@db:5432/lake", "postgres://xxxxx@db:5432/lake"},
		// An unparsed URL whose query holds an "@": masked too much, never a secret.
		{"postgres://db:x/lake?user=a@b&token=secret", "postgres://xxxxx@b&token=xxxxx"},
		// White space around a URL, and a URL behind another scheme: net/url refuses the
		// first, and keeps the second's rest opaque, which Redacted printed whole.
		{" postgres://lake:secret@db/lake", " postgres://xxxxx@db/lake"},
		{"postgres://lake:secret@db/lake\n", "postgres://xxxxx@db/lake\n"},
		{"sqlite:postgres://lake:secret@db/lake", "sqlite:postgres://xxxxx@db/lake"},
		// A URL written without its "://" (a slash or both left out): every message
		// quotes it to say it is not a target, and printed it whole, password and all.
		{"postgres:/lake:secret@db:5432/lake", "postgres:/xxxxx@db:5432/lake"},
		{"postgres//lake:secret@db/lake", "postgres//xxxxx@db/lake"},
		{"postgres:lake:secret@db/lake", "postgres:xxxxx@db/lake"},
		{"Postgresql:/lake:sec@ret@db/lake?sslmode=require", "Postgresql:/xxxxx@db/lake?sslmode=require"},
		{"lake:secret@db/lake", "lake:xxxxx@db/lake"},
		{"./postgres://lake:secret@db/lake", "xxxxx@db/lake"},
		{"user@example.com", "user@example.com"},
		// An image pinned by digest (a provider command's argument) is no URL: kept.
		{"ghcr.io/org/img:v1@sha256:e3b0c44298fc1c149afbf4c8996fb924", "ghcr.io/org/img:v1@sha256:e3b0c44298fc1c149afbf4c8996fb924"},
		{"postgres:lake:secret@[::1]:5432/lake", "postgres:xxxxx@[::1]:5432/lake"},
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

// TestRedactURLAuthorityCut: a URL net/url parses although its password holds '/', '?' or
// '#' unescaped after digits (or after an "@"), its authority cut inside the password
// ("postgres://u:9731#secret@h/db": host "u", port 9731, fragment "secret@h/db"), is
// masked up to its last "@" (the old code printed it whole); so, too much, is a URL with
// a port or password and an "@" in a query value that is not a URL; a URL without a
// password or port, or whose "@" are in URLs given as query values, is as before.
func TestRedactURLAuthorityCut(t *testing.T) {
	for _, c := range []struct{ in, want, cut string }{
		{"postgres://u:9731#secret@h/db", "postgres://xxxxx@h/db", "fragment"},
		{"postgres://u:9731/secret@h/db", "postgres://xxxxx@h/db", "path"},
		{"postgres://u:9731?secret@h/db", "postgres://xxxxx@h/db", "query key"},
		{"postgres://u:9731?a=secret@h/db?sslmode=require", "postgres://xxxxx@h/db?sslmode=require", "query"},
		{"postgres://u:9731#secret@h:5432/db?token=secret", "postgres://xxxxx@h:5432/db?token=xxxxx", "fragment"},
		{"postgres://u:#secret@h/db", "postgres://xxxxx@h/db", "fragment"},
		{"postgres://u:9731@secret#secret@h/db", "postgres://xxxxx@h/db", "fragment"},
		{"postgres://u:9731@secret/secret@h/db", "postgres://xxxxx@h/db", "path"},
		{"http://u:9731#secret@[::1]:7077", "http://xxxxx@[::1]:7077", "fragment"},
		// Ambiguous: a user given as a parameter, or a password cut short: masked too much.
		{"postgres://db:5432/lake?user=me@example", "postgres://xxxxx@example", "query value"},
		// The secrets of the query after the last "@" are masked too (the first version of
		// the mask printed them: the rest of the query had lost its "?").
		{"https://host:443/p?email=a@b&token=secret", "https://xxxxx@b&token=xxxxx", "query value"},
		{"https://u:pw@host/p?email=a@b&access_token=secret", "https://xxxxx@b&access_token=xxxxx", "query value"},
		{"postgres://h:5432/db?user=me@example&session_token=secret", "postgres://xxxxx@example&session_token=xxxxx", "query value"},
		// Not cut: no password nor port, or the "@" is a nested URL's.
		{"postgres://db/lake?user=me@example", "postgres://db/lake?user=me@example", ""},
		{"postgres://[::1]/lake@x", "postgres://[::1]/lake@x", ""},
		{"postgres://lake:secret@db:5432/lake?blob=s3://b?endpoint=http://u:secret@h",
			"postgres://lake:xxxxx@db:5432/lake?blob=s3://b?endpoint=http://u:xxxxx@h", ""},
		{"postgres://lake:secret@db/lake?blob=s3%3A%2F%2Fb%3Fendpoint%3Dhttp%3A%2F%2Fu%3Asecret%40h",
			"postgres://lake:xxxxx@db/lake?blob=s3%3A%2F%2Fb%3Fendpoint%3Dhttp%3A%2F%2Fu%3Axxxxx%40h", ""},
	} {
		if got := URLAuthorityCut(c.in); got != c.cut {
			t.Errorf("URLAuthorityCut(%q) = %q, want %q", c.in, got, c.cut)
		}
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "9731") {
			t.Errorf("RedactURL(%q) = %q keeps part of the password", c.in, got)
		}
		msg := "open " + c.in + ": refused"
		if got := RedactURLIn(msg, c.in); strings.Contains(got, "secret") || strings.Contains(got, "9731") {
			t.Errorf("RedactURLIn(%q) = %q keeps part of the password", msg, got)
		}
	}
}

// TestRedactNested: a URL given as a query value — a bucket URL in a data URL's blob=, an
// endpoint URL in a bucket URL's endpoint= — is redacted in place, escaped or not, the
// outer URL printed as given (its parameters in their order); past maxNesting levels a
// URL value is "xxxxx".
func TestRedactNested(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"s3://bucket?endpoint=http://user:secretpw@host", "s3://bucket?endpoint=http://user:xxxxx@host"},
		{"s3://bucket?region=us-east-1&endpoint=http://user:secretpw@host:9000&s3ForcePathStyle=true",
			"s3://bucket?region=us-east-1&endpoint=http://user:xxxxx@host:9000&s3ForcePathStyle=true"},
		{"postgres://lake:secret@db/lake?blob=s3://bucket?endpoint=http://u:secret@h",
			"postgres://lake:xxxxx@db/lake?blob=s3://bucket?endpoint=http://u:xxxxx@h"},
		{"postgres://db/lake?blob=s3%3A%2F%2Fb%3Fendpoint%3Dhttp%3A%2F%2Fu%3Asecret%40h%26region%3Dx&sslmode=require",
			"postgres://db/lake?blob=s3%3A%2F%2Fb%3Fendpoint%3Dhttp%3A%2F%2Fu%3Axxxxx%40h%26region%3Dx&sslmode=require"},
		{"postgres://db/lake?blob=s3%3A%2F%2Fb%3Ftoken%3Dsecret", "postgres://db/lake?blob=s3%3A%2F%2Fb%3Ftoken%3Dxxxxx"},
		// Twice escaped: the endpoint inside the escaped bucket URL is escaped itself.
		{"postgres://db/lake?blob=" + url.QueryEscape("s3://b?endpoint="+url.QueryEscape("http://u:secret@h")),
			"postgres://db/lake?blob=" + url.QueryEscape("s3://b?endpoint="+url.QueryEscape("http://u:xxxxx@h"))},
		// Parameters keep their order; ";" separates them too.
		{"postgres://db/lake?token=secret&blob=s3%3A%2F%2Fb", "postgres://db/lake?token=xxxxx&blob=s3%3A%2F%2Fb"},
		{"s3://b?region=x;token=secret", "s3://b?region=x;token=xxxxx"},
		// A URL value without a secret, and a value that only mentions "://", are as given.
		{"postgres://db/lake?blob=s3://bucket/prefix?region=us-east-1", "postgres://db/lake?blob=s3://bucket/prefix?region=us-east-1"},
		{"s3://b?note=see+a://b", "s3://b?note=see+a://b"},
		// An outer URL net/url refuses: its nested URLs are redacted all the same.
		{"postgres://lake:sec%zzret@db/lake?blob=s3://b?endpoint=http://u:secret@h#frag",
			"postgres://xxxxx@db/lake?blob=s3://b?endpoint=http://u:xxxxx@h#frag"},
		{"postgres://lake:sec%zzret@db/lake?blob=s3%3A%2F%2Fb%3Ftoken%3Dsecret", "postgres://xxxxx@db/lake?blob=s3%3A%2F%2Fb%3Ftoken%3Dxxxxx"},
	} {
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) =\n  %q, want\n  %q", c.in, got, c.want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("RedactURL(%q) = %q keeps the secret", c.in, got)
		}
	}
	// Nested past the bound, escaped or not: the value too deep to look into is "xxxxx".
	for _, escape := range []bool{false, true} {
		deep := "http://u:secret@h"
		for i := range maxNesting + 2 {
			if escape {
				deep = url.QueryEscape(deep)
			}
			deep = fmt.Sprintf("s3://b%d?endpoint=%s", i, deep)
		}
		got := RedactURL(deep)
		if strings.Contains(got, "secret") || !strings.Contains(got, "xxxxx") || !strings.HasPrefix(got, fmt.Sprintf("s3://b%d?endpoint=", maxNesting+1)) {
			t.Errorf("RedactURL(%q) = %q", deep, got)
		}
	}
}

// TestRedactURLIn: a library's error repeating its URL, as given, as url.URL prints it, or
// a URL nested in its query alone (a bucket's endpoint), keeps none of their secrets.
func TestRedactURLIn(t *testing.T) {
	target := "s3://bucket?endpoint=http://user:secretpw@host:9000&region=x"
	msg := `open "s3://bucket?endpoint=http://user:secretpw@host:9000&region=x": dial http://user:secretpw@host:9000: connection refused`
	got := RedactURLIn(msg, target)
	want := `open "s3://bucket?endpoint=http://user:xxxxx@host:9000&region=x": dial http://user:xxxxx@host:9000: connection refused`
	if got != want {
		t.Errorf("RedactURLIn =\n  %q, want\n  %q", got, want)
	}
	target = "postgres://lake:secret1@db/x?blob=s3%3A%2F%2Fb%3Fendpoint%3Dhttp%3A%2F%2Fk%3Asecret2%40h"
	msg = "catalog " + target + "; bucket s3://b?endpoint=http://k:secret2@h; endpoint http://k:secret2@h"
	got = RedactURLIn(msg, target)
	if strings.Contains(got, "secret") || strings.Count(got, "xxxxx") != 4 {
		t.Errorf("RedactURLIn(%q) = %q", msg, got)
	}
	if got := RedactURLIn("no URL here", target); got != "no URL here" {
		t.Errorf("RedactURLIn without the URL = %q", got)
	}
}

func TestRedactEnv(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"HF_TOKEN", "hf_abc", "xxxxx"},
		{"LAKESHORE_TOKEN", "t", "xxxxx"},
		{"AWS_SECRET_ACCESS_KEY", "s", "xxxxx"},
		{"OPENAI_API_KEY", "k", "xxxxx"},
		{"db_password", "p", "xxxxx"},
		{"GOOGLE_APPLICATION_CREDENTIALS", "/k.json", "xxxxx"},
		{"TOKENIZERS_PARALLELISM", "false", "false"},
		{"PWD", "/home/x", "/home/x"},
		{"HF_HOME", "/cache/hf", "/cache/hf"},
		{"DATA", "postgres://u:pw@h/d", "postgres://u:xxxxx@h/d"},
		{"HF_TOKEN", "", ""},
	} {
		if got := RedactEnv(c.name, c.value); got != c.want {
			t.Errorf("RedactEnv(%q, %q) = %q, want %q", c.name, c.value, got, c.want)
		}
	}
}

// TestURLAuthorityCutQuery: an "@" in a query value reads as the end of a password holding
// '?' unescaped, cut short, when the query follows the host and port with no database name
// ("postgres://u:12?a=b@h/db": password "12?a=b", host h, database db) or when the value's
// text after its "@" holds a '/' (a host, then a database name): "query", which
// pgdb.ParseConfig refuses (on the old code both were "query value", accepted); a user
// given as a parameter after a database name is "query value", as before. Each is
// masked up to its last "@", as Python's redact_url masks it (python/tests/test_issue29.py).
func TestURLAuthorityCutQuery(t *testing.T) {
	for _, c := range []struct{ in, want, cut string }{
		{"postgres://u:12?a=b@h/db", "postgres://xxxxx@h/db", "query"},
		{"postgres://u:12?a=b@h", "postgres://xxxxx@h", "query"},
		{"postgres://u:12/x?a=b@h/db", "postgres://xxxxx@h/db", "query"},
		{"postgres://u:pw@h:5432?user=me@example", "postgres://xxxxx@example", "query"},
		{"postgres://db:5432/lake?user=me@example", "postgres://xxxxx@example", "query value"},
	} {
		if got := URLAuthorityCut(c.in); got != c.cut {
			t.Errorf("URLAuthorityCut(%q) = %q, want %q", c.in, got, c.cut)
		}
		if got := RedactURL(c.in); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestRedactCommand: a command as a tenant reads it hides an environment assignment's
// value (env HF_TOKEN=… prog), a secret-named flag's value (after '=' or as the next
// argument), and a URL's password; the rest stays as given.
func TestRedactCommand(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"env", "HF_TOKEN=hf_abc", "AZURE_STORAGE_CONNECTION_STRING=Account=x;Key=y", "lakeshore", "worker", "q"},
			[]string{"env", "HF_TOKEN=xxxxx", "AZURE_STORAGE_CONNECTION_STRING=xxxxx", "lakeshore", "worker", "q"}},
		{[]string{"prog", "--token=abc", "--api-key", "k123", "--db_password", "pw", "--auth-token", "--verbose"},
			[]string{"prog", "--token=xxxxx", "--api-key", "xxxxx", "--db_password", "xxxxx", "--auth-token", "--verbose"}},
		{[]string{"lakeshore", "worker", "--target", "postgres://u:pw@h/db", "--concurrency=4", "q"},
			[]string{"lakeshore", "worker", "--target", "postgres://u:xxxxx@h/db", "--concurrency=4", "q"}},
		{[]string{"python", "-m", "train", "--tokenizer", "gpt2", "a=b"}, // TOKENIZER is not TOKEN
			[]string{"python", "-m", "train", "--tokenizer", "gpt2", "a=xxxxx"}},
		// camelCase flags (node's, Java's): until 2026-12-06 their values were shown.
		{[]string{"node", "w.js", "--authToken", "t1", "--apiKey=k1", "--clientSecret", "s1", "--tokenizerPath", "p"},
			[]string{"node", "w.js", "--authToken", "xxxxx", "--apiKey=xxxxx", "--clientSecret", "xxxxx", "--tokenizerPath", "p"}},
		{nil, nil},
	} {
		if got := RedactCommand(c.in); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("RedactCommand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestCommandSecrets: what RedactCommand hides, as text RedactValuesIn can hide in a
// message quoting the command: values after '=' of an assignment or a changed flag, a
// secret flag's next argument and any other changed argument whole; nothing of a command
// RedactCommand leaves as it is.
func TestCommandSecrets(t *testing.T) {
	argv := []string{"env", "HF_TOKEN=hf_abc", "A=b", "lakeshore", "worker", "--token", "tok1", "--api-key=k2",
		"--url=postgres://u:pw3@h/db", "postgres://u:pw4@h/db", "--queue", "q"}
	want := []string{"hf_abc", "b", "tok1", "k2", "postgres://u:pw3@h/db", "postgres://u:pw4@h/db"}
	if got := CommandSecrets(argv); !slices.Equal(got, want) {
		t.Errorf("CommandSecrets = %q, want %q", got, want)
	}
	if got := CommandSecrets([]string{"lakeshore", "worker", "--queue", "q"}); got != nil {
		t.Errorf("a command with nothing secret gave %q", got)
	}
}

// TestRedactValuesInJSONForms: a value is hidden where a JSON string holds it escaped, as
// Go writes it (& as \u0026) and as Python's json does (only " and \ escaped); before,
// only its raw text was.
func TestRedactValuesInJSONForms(t *testing.T) {
	env := map[string]string{"A": `pass"word&1<2>\x`}
	for _, text := range []string{
		`{"A":"pass\"word\u00261\u003c2\u003e\\x"}`,
		`{"A": "pass\"word&1<2>\\x"}`,
		`raw pass"word&1<2>\x`,
	} {
		if got := RedactValuesIn(text, env); strings.Contains(got, "word") {
			t.Errorf("RedactValuesIn(%s) = %s", text, got)
		}
	}
	if got := RedactValuesIn("a short1 b", map[string]string{"A": "short1"}); got != "a short1 b" {
		t.Errorf("a short value was replaced: %s", got)
	}
}

package plane

import (
	"cmp"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// secretParams are the query parameters (and libpq keywords) whose values are secrets:
// a URL printed anywhere shows them as "xxxxx".
var secretParams = []string{"password", "sslpassword", "passwd", "pwd", "secret", "token", "access_token",
	"sslkey", "secret_access_key", "aws_secret_access_key", "session_token"}

func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, p := range secretParams {
		if name == p {
			return true
		}
	}
	return false
}

// keywordSecret matches a libpq keyword/value secret ("password=…", quoted or not) in a
// connection string that is not a URL.
var keywordSecret = regexp.MustCompile(`(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// maxNesting bounds how deep RedactURL looks into URLs given as query values (a bucket URL
// in a data URL's blob=, an endpoint URL in a bucket URL's endpoint=): a URL nested deeper
// is shown as "xxxxx".
const maxNesting = 4

// RedactURL returns target as it may be printed (a log line, an error, the dashboard, a
// CLI message): a URL's password replaced by "xxxxx" (url.URL.Redacted), and so the values
// of query parameters that carry secrets (password=, sslpassword=, token=, …), and of a
// libpq keyword string's password=. A URL given as a query value (postgres://…?blob=
// s3://…?endpoint=http://user:pw@host), escaped or not, is redacted the same way in place,
// to maxNesting levels; the rest of the URL is printed as given, its scheme in the case given. A file path or any text
// without a secret is returned as given. It is the one redaction every printed target,
// data URL or provider setting goes through.
func RedactURL(target string) string { return redact(target, 0) }

func redact(target string, depth int) string {
	if target == "" {
		return target
	}
	if isURL(strings.TrimSpace(target)) {
		u, err := url.Parse(target)
		if err != nil || u.Opaque != "" || strings.TrimSpace(target) != target {
			// What net/url refuses, or reads otherwise than a URL with an authority: a
			// URL with white space around it (refused, or its path escaped), or one
			// behind another scheme ("sqlite:postgres://u:pw@h/db", whose rest net/url
			// keeps as opaque and Redacted leaves whole).
			return redactUnparsed(target, depth)
		}
		u.RawQuery = redactQuery(u.RawQuery, depth) // String prints RawQuery as it is
		out := u.Redacted()
		if URLAuthorityCut(target) != "" {
			// The password may run on past what net/url took for the authority: every
			// byte up to the last "@" is dropped too, after the query's secrets were (an
			// "@" in a query value leaves the rest of the query without its "?"), and
			// what follows is redacted as the URL it then reads as (a query net/url took
			// for a fragment).
			i := strings.Index(out, "://") + len("://")
			if j := strings.LastIndexByte(out, '@'); j >= i {
				out = redactUnparsed(out[:i]+"xxxxx"+out[j:], depth)
			}
		}
		// net/url lower-cases the scheme; print it as given, so a message about a
		// scheme's case ("POSTGRES://…": plane.PostgresURLRule) shows the one written.
		if i := strings.Index(target, "://"); i > 0 && len(out) >= i && strings.EqualFold(out[:i], target[:i]) {
			out = target[:i] + out[i:]
		}
		return out
	}
	return keywordSecret.ReplaceAllString(redactMistyped(target), "${1}=xxxxx")
}

// mistypedScheme is the scheme a URL written without its "://" starts with, with the
// colon and slashes given ("postgres:/", "postgres:", "postgres//").
var mistypedScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*(?::/*|/+)`)

// mistypedHost matches what follows the "@" of a URL's user info: a host (a name or an
// address, [IPv6] included), an optional port of digits, then the end or '/', '?', '#'.
// An image reference pinned by digest ("img:v1@sha256:e3b0…", a provider command's
// argument) does not match: what follows its "@" is no host and port.
var mistypedHost = regexp.MustCompile(`^(\[[^\]]*\]|[A-Za-z0-9._~%-]+)(:[0-9]*)?([/?#]|$)`)

// redactMistyped redacts the user info of text that reads as a URL written without its
// "://" ("postgres:/u:pw@h/db", "postgres//u:pw@h/db", "postgres:u:pw@h/db", "u:pw@h/db"):
// a mistyped target, which every message quotes to say it is not one (invalid
// LAKESHORE_URL, --data, --target). Text without white space holding an "@" with a ':'
// before it has everything between its scheme (as given) and that "@" dropped to "xxxxx":
// the "@" is the last one before the first '/', '?' or '#' after the first "@", as in
// redactUnparsed, followed by a host (mistypedHost). A file path of that form
// ("/srv/a:b@c.db") is masked too (too much, never a secret); other text is returned as
// given.
func redactMistyped(target string) string {
	if strings.ContainsAny(target, " \t\r\n") {
		return target
	}
	first := strings.IndexByte(target, '@')
	if first < 0 {
		return target
	}
	end := strings.IndexAny(target[first:], "/?#")
	if end < 0 {
		end = len(target)
	} else {
		end += first
	}
	at := strings.LastIndexByte(target[:end], '@')
	if !strings.Contains(target[:at], ":") || !mistypedHost.MatchString(target[at+1:]) {
		return target
	}
	from := len(mistypedScheme.FindString(target[:at]))
	return target[:from] + Redacted + target[at:]
}

// URLAuthorityCut reports where a URL that net/url parses may have had its authority
// cut inside a password holding '/', '?' or '#' unescaped ("postgres://u:12#x@h/db" parses
// as host "u", port 12 and fragment "x@h/db", "postgres://u:a@b/c@h/db" as password "a",
// host "b" and path "/c@h/db"): "" when it cannot have been; else where an "@" follows the
// authority that net/url parsed with a password or a port (what "user:pass" cut short
// parses as): "path", "fragment", "query key", "query" or "query value" (a value that
// is not a URL: a URL given as a query value holds its own user info). An "@" in a query
// value is "query" when the value reads as the end of a password holding '?' cut short
// ("postgres://u:12?a=b@h/db": user u, password "12?a=b", host h, database db): the query
// follows the host and port with no database name between, or the value's text after
// its last "@" holds a '/' (a host, then a database name); else "query value". "path" and
// "query value" are ambiguous ("postgres://u:pw@h:5432/team@prod" may name database
// "team@prod", "postgres://h:5432/db?user=me@example" a user given as a parameter):
// RedactURL masks every case up to the last "@" (too much, never a secret), and
// pgdb.ParseConfig refuses all but "query value", asking for the "@" or the password's
// characters escaped. A target that is not a URL, or that net/url refuses, is "".
func URLAuthorityCut(target string) string {
	if !isURL(target) {
		return ""
	}
	u, err := url.Parse(target)
	if err != nil {
		return ""
	}
	_, password := u.User.Password()
	host := u.Host
	if i := strings.LastIndexByte(host, ']'); i >= 0 { // an IPv6 address holds colons
		host = host[i+1:]
	}
	if !password && !strings.Contains(host, ":") {
		return ""
	}
	rest := target[strings.Index(target, "://")+len("://"):]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		return ""
	}
	rest, fragment, _ := strings.Cut(rest[end:], "#")
	path, query, _ := strings.Cut(rest, "?")
	cut := ""
	switch {
	case strings.Contains(path, "@"):
		return "path"
	case strings.Contains(fragment, "@"):
		return "fragment"
	}
	for pair := range strings.FieldsFuncSeq(query, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(pair, "=")
		if strings.Contains(k, "@") {
			return "query key"
		}
		if strings.Contains(v, "@") {
			if val, err := url.QueryUnescape(v); err != nil || !strings.Contains(val, "://") {
				cut = "query value"
				if path == "" || strings.Contains(v[strings.LastIndexByte(v, '@'):], "/") {
					return "query"
				}
			}
		}
	}
	return cut
}

// isURL reports whether s starts with a scheme and "://".
func isURL(s string) bool {
	i := strings.Index(s, "://")
	return i > 0 && !strings.ContainsAny(s[:i], " \t/")
}

// redactQuery returns a raw query with the values of secret parameters replaced by
// "xxxxx" and URL values redacted (escaped again when they were given escaped), every
// other byte, and the parameters' order, as given. Pairs are separated by "&" or ";".
func redactQuery(raw string, depth int) string {
	if raw == "" {
		return raw
	}
	var b strings.Builder
	for raw != "" {
		pair, sep := raw, ""
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			pair, sep, raw = raw[:i], raw[i:i+1], raw[i+1:]
		} else {
			raw = ""
		}
		b.WriteString(redactPair(pair, depth))
		b.WriteString(sep)
	}
	return b.String()
}

func redactPair(pair string, depth int) string {
	k, v, ok := strings.Cut(pair, "=")
	if !ok {
		return pair
	}
	key, err := url.QueryUnescape(k)
	if err != nil {
		key = k
	}
	if secretParam(key) {
		return k + "=xxxxx"
	}
	val, err := url.QueryUnescape(v)
	if err != nil {
		val = v
	}
	if !strings.Contains(val, "://") {
		return pair
	}
	if depth >= maxNesting {
		return k + "=xxxxx"
	}
	red := redact(val, depth+1)
	switch {
	case red == val:
		return pair
	case v == val:
		return k + "=" + red
	default:
		return k + "=" + url.QueryEscape(red)
	}
}

// redactUnparsed redacts a URL that net/url refuses: everything between "://" and the
// last "@" of its authority is dropped to "xxxxx", its query is redacted as a parsed
// URL's, and secret keywords are masked. A password holding '/', '?' or '#' unescaped
// (a reason net/url refuses the URL) does not end the authority: it ends at the first of
// them after the first "@" (over-masking a URL whose query holds an "@", never showing a
// password).
func redactUnparsed(target string, depth int) string {
	i := strings.Index(target, "://") + len("://")
	rest := target[i:]
	from := max(strings.IndexByte(rest, '@'), 0)
	end := strings.IndexAny(rest[from:], "/?#")
	if end < 0 {
		end = len(rest)
	} else {
		end += from
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		if strings.ContainsRune(rest[:at], '?') && !strings.ContainsRune(rest[at+1:], '?') {
			// The "@" was in the query: what follows it is the query's rest.
			return keywordSecret.ReplaceAllString(target[:i]+"xxxxx@"+redactQuery(rest[at+1:], depth), "${1}=xxxxx")
		}
		rest = "xxxxx@" + rest[at+1:]
		end -= at + 1 - len("xxxxx@")
	}
	if q := strings.IndexByte(rest[end:], '?'); q >= 0 {
		q += end + 1
		query, frag, hasFrag := strings.Cut(rest[q:], "#")
		query = redactQuery(query, depth)
		if hasFrag {
			query += "#" + frag
		}
		rest = rest[:q] + query
	}
	return keywordSecret.ReplaceAllString(target[:i]+rest, "${1}=xxxxx")
}

// RedactURLIn returns msg — typically a library's error, which may repeat a URL it was
// given, query parameters and all — with every appearance of target, as given and as
// url.URL prints it after parsing, replaced by RedactURL(target); and so of each URL
// nested in its query values (a bucket library's error may name its endpoint URL alone).
func RedactURLIn(msg, target string) string {
	if target == "" {
		return msg
	}
	forms := urlForms(nil, target, 0)
	// Longest first: a URL is replaced whole before a URL nested in it, which would
	// otherwise leave the outer URL's own secrets unmatched.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	for _, raw := range slices.Compact(forms) {
		if red := RedactURL(raw); red != raw {
			msg = strings.ReplaceAll(msg, raw, red)
		}
	}
	return msg
}

// urlForms appends target, its parsed form when that differs, and so of the URLs in its
// query values, to maxNesting levels.
func urlForms(forms []string, target string, depth int) []string {
	forms = append(forms, target)
	if !isURL(target) {
		return forms
	}
	u, err := url.Parse(target)
	if err != nil {
		return forms
	}
	if u.String() != target {
		forms = append(forms, u.String())
	}
	if depth >= maxNesting {
		return forms
	}
	for pair := range strings.FieldsFuncSeq(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		_, v, _ := strings.Cut(pair, "=")
		if val, err := url.QueryUnescape(v); err == nil && strings.Contains(val, "://") {
			forms = urlForms(forms, val, depth+1)
		}
		if strings.Contains(v, "://") {
			forms = urlForms(forms, v, depth+1)
		}
	}
	return forms
}

// Redacted is what every redaction of this file shows in place of a secret, and what a
// server shows in place of a value its caller may not read.
const Redacted = "xxxxx"

// RedactValueMinBytes is the shortest value RedactValuesIn replaces: shorter ones ("1",
// "false") are no secrets and would garble the text.
const RedactValueMinBytes = 8

// RedactValuesIn returns text with every occurrence of each value of env at least
// RedactValueMinBytes long replaced by "xxxxx", longest first: for a message that may
// quote an environment given to someone else's program (a provider program's stderr, a
// cloud API's error) before it is logged. A value is also replaced as a JSON string holds
// it (jsonForms: & < > " \ escaped), since such a program often echoes its JSON request.
func RedactValuesIn(text string, env map[string]string) string {
	values := make([]string, 0, len(env))
	for _, v := range env {
		if len(v) >= RedactValueMinBytes {
			values = append(values, jsonForms(v)...)
		}
	}
	slices.SortFunc(values, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, v := range values {
		text = strings.ReplaceAll(text, v, Redacted)
	}
	return text
}

// jsonForms returns v and, where they differ from it, its forms inside a JSON string as Go
// writes it (& < > as \u0026 …) and as Python's json and most encoders do (only " \ and
// control characters escaped).
func jsonForms(v string) []string {
	forms := []string{v}
	for _, html := range []bool{true, false} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) != nil {
			continue
		}
		form := strings.TrimSuffix(b.String(), "\n")
		if form = form[1 : len(form)-1]; !slices.Contains(forms, form) {
			forms = append(forms, form)
		}
	}
	return forms
}

// secretEnvWords are the words (between underscores) of an environment variable's name
// that make its value a secret to print: HF_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD,
// OPENAI_API_KEY (TOKENIZERS_PARALLELISM is not one: whole words only).
var secretEnvWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL", "CREDENTIALS", "APIKEY", "AUTH", "KEY"}

// RedactEnv returns an environment variable's value as it may be printed (a CLI table, a
// log line): "xxxxx" when the variable's name says it holds a secret (secretName: a word of
// secretEnvWords between its underscores; PWD alone is the working directory, not one),
// else RedactURL of the value. For display only: what a worker receives is unchanged.
func RedactEnv(name, value string) string {
	if value == "" {
		return value
	}
	if upper := strings.ToUpper(name); upper != "PWD" && upper != "OLDPWD" && secretName(name) {
		return Redacted
	}
	return RedactURL(value)
}

// envAssignment matches a command argument that assigns an environment variable
// (NAME=VALUE: what `env NAME=VALUE prog` and a shell line's prefix hand a program).
var envAssignment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.+)$`)

// secretFlag matches a command-line flag whose value is a secret by its name: a word of
// secretEnvWords between its dashes or underscores (--token, --api-key, --db_password,
// -auth), with its value after '=' or, without one, in the next argument.
var secretFlag = regexp.MustCompile(`^(--?[A-Za-z0-9_-]+)(=.*)?$`)

// CommandSecrets returns what RedactCommand hides in a command's arguments, as text to
// hide wherever a message may quote the command (a provider's launch error echoing its
// request, a launched worker's last log line; RedactValuesIn): an environment assignment's
// value, a flag's value given after '=' when RedactCommand changed that argument, and any
// other argument it changed whole (a secret flag's next argument, one holding a URL's
// password). Nil for a command with nothing hidden.
func CommandSecrets(argv []string) []string {
	var out []string
	for i, shown := range RedactCommand(argv) {
		arg := argv[i]
		if shown == arg {
			continue
		}
		if envAssignment.MatchString(arg) || strings.HasPrefix(arg, "-") && strings.Contains(arg, "=") {
			arg = arg[strings.IndexByte(arg, '=')+1:]
		}
		out = append(out, arg)
	}
	return out
}

// RedactCommand returns a command's arguments as a reader who may not see the command's
// secrets may read them (a tenant's view of a provider's worker command, the dashboard):
// each through RedactURL (a URL's password), an environment assignment NAME=VALUE as
// NAME=xxxxx whatever its name (as every env value of a provider is hidden from a tenant:
// a name says nothing of AZURE_STORAGE_CONNECTION_STRING), and the value of a flag whose
// name has a secret's word (--token=…, --api-key …; RedactEnv's words) as xxxxx, given
// after '=' or as the next argument (unless that is a flag). For display only: what runs
// is unchanged.
func RedactCommand(argv []string) []string {
	if argv == nil {
		return nil
	}
	out := make([]string, len(argv))
	hideNext := false
	for i, arg := range argv {
		next := hideNext
		hideNext = false
		switch {
		case next && !strings.HasPrefix(arg, "-"): // a flag after it: the secret flag took none
			out[i] = Redacted
			continue
		case envAssignment.MatchString(arg):
			m := envAssignment.FindStringSubmatch(arg)
			out[i] = m[1] + "=" + Redacted
			continue
		}
		if m := secretFlag.FindStringSubmatch(arg); m != nil && secretName(m[1]) {
			if m[2] == "" {
				hideNext = true
				out[i] = arg
			} else {
				out[i] = m[1] + "=" + Redacted
			}
			continue
		}
		out[i] = RedactURL(arg)
	}
	return out
}

// secretName reports whether a name (an environment variable's, a flag's with its dashes)
// has a word of secretEnvWords between its dashes or underscores, or as a word of a
// camelCase name (--authToken, --apiKey, --clientSecret: node's and Java's spelling): the
// one rule of RedactEnv and RedactCommand.
func secretName(flag string) bool {
	for _, part := range strings.FieldsFunc(flag, func(r rune) bool { return r == '-' || r == '_' }) {
		start := 0
		for i := 1; i <= len(part); i++ {
			if i < len(part) && !(part[i-1] >= 'a' && part[i-1] <= 'z' && part[i] >= 'A' && part[i] <= 'Z') {
				continue
			}
			if slices.Contains(secretEnvWords, strings.ToUpper(part[start:i])) {
				return true
			}
			start = i
		}
	}
	return false
}

package plane

import (
	"net/url"
	"regexp"
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

// RedactURL returns target as it may be printed (a log line, an error, the dashboard, a
// CLI message): a URL's password replaced by "xxxxx" (url.URL.Redacted), and so the values
// of query parameters that carry secrets (password=, sslpassword=, token=, …), and of a
// libpq keyword string's password=. A file path or any text without a secret is returned
// as given. It is the one redaction every printed target, data URL or provider setting
// goes through.
func RedactURL(target string) string {
	if target == "" {
		return target
	}
	if i := strings.Index(target, "://"); i > 0 && !strings.ContainsAny(target[:i], " \t/") {
		u, err := url.Parse(target)
		if err != nil {
			return redactUnparsed(target)
		}
		if u.RawQuery != "" {
			q := u.Query()
			changed := false
			for k, vs := range q {
				if secretParam(k) {
					for i := range vs {
						vs[i] = "xxxxx"
					}
					changed = true
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
		}
		return u.Redacted()
	}
	return keywordSecret.ReplaceAllString(target, "${1}=xxxxx")
}

// redactUnparsed redacts a URL that net/url refuses: everything between "://" and the
// last "@" of its authority is dropped to "xxxxx", and secret keywords are masked.
func redactUnparsed(target string) string {
	i := strings.Index(target, "://") + len("://")
	rest := target[i:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		rest = "xxxxx@" + rest[at+1:]
	}
	return keywordSecret.ReplaceAllString(target[:i]+rest, "${1}=xxxxx")
}

// RedactURLIn returns msg — typically a library's error, which may repeat a URL it was
// given, query parameters and all — with every appearance of target, as given and as
// url.URL prints it after parsing, replaced by RedactURL(target).
func RedactURLIn(msg, target string) string {
	if target == "" {
		return msg
	}
	forms := []string{target}
	if u, err := url.Parse(target); err == nil && u.String() != target {
		forms = append(forms, u.String())
	}
	for _, raw := range forms {
		msg = strings.ReplaceAll(msg, raw, RedactURL(raw))
	}
	return msg
}

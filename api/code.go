package api

//go:generate go run github.com/tinylib/msgp -file code.go -o code_gen.go -io=false -tests=false -unexported=false

// ContentTypeGzip is the media type of a code archive (a gzip-compressed tar; package
// fabric defines its form and digest).
const ContentTypeGzip = "application/gzip"

// CodePath is the route of one code archive of a queue, addressed by its digest.
const CodePath = QueuePath + "/code/{digest}"

// CodeResponse answers an upload of a code archive (PUT …/code/{digest}).
type CodeResponse struct {
	// Digest is the archive's digest (fabric.Digest), checked by the server.
	Digest string `json:"digest" msg:"digest"`
	// Size is the stored archive's size in bytes.
	Size int64 `json:"size" msg:"size"`
	// Existing is true when the server already held it (nothing was written).
	Existing bool `json:"existing" msg:"existing"`
}

// CodeRoutes lists the routes of code shipped with runs (docs/fabric.md).
func CodeRoutes() []Route {
	return []Route{
		{Method: "PUT", Path: CodePath, Operation: "codePut", Permission: "submit",
			Summary:            "upload a code archive (gzip-compressed tar) by its digest; the server checks the archive and the digest, and keeps one copy per digest",
			RequestContentType: ContentTypeGzip, Response: &CodeResponse{}},
		{Method: "GET", Path: CodePath, Operation: "codeGet", Permission: "consume or submit",
			Summary: "download a code archive by its digest (HEAD: whether the server holds it)", ContentType: ContentTypeGzip},
	}
}

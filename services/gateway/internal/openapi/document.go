// Package openapi is the gateway's machine-readable API: an OpenAPI 3.1
// description of every HTTP route, served at GET /api/openapi.json.
//
// The description is built from Go, not kept as a hand-written JSON file:
// the route table (routes.go) sits next to the router it describes and a
// test compares the two, and the request and response schemas are
// reflected from the very types the handlers and services encode
// (libs/protocol, libs/personas), so a field added to a type is in the
// description without anyone remembering to write it. What reflection
// cannot know (enums, descriptions, the shapes of the small replies the
// handlers build inline, the turn runner's event data, which the gateway
// may not import) is written out by hand in schemas.go and events.go.
package openapi

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// Document is an OpenAPI 3.1 document (only the parts this API uses).
type Document struct {
	OpenAPI           string              `json:"openapi"`
	JSONSchemaDialect string              `json:"jsonSchemaDialect"`
	Info              Info                `json:"info"`
	Tags              []Tag               `json:"tags"`
	Security          []map[string][]any  `json:"security"`
	Paths             map[string]PathItem `json:"paths"`
	Components        Components          `json:"components"`
}

// Info is the document's info object.
type Info struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

// Tag groups operations.
type Tag struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// PathItem maps a lower-case HTTP method to its operation.
type PathItem map[string]*Operation

// Operation describes one method of one path.
type Operation struct {
	OperationID string               `json:"operationId"`
	Tags        []string             `json:"tags"`
	Summary     string               `json:"summary"`
	Description string               `json:"description,omitempty"`
	Parameters  []Parameter          `json:"parameters,omitempty"`
	RequestBody *RequestBody         `json:"requestBody,omitempty"`
	Responses   map[string]*Response `json:"responses"`
	// Security overrides the document's; a pointer to an empty list means
	// no authentication at all (encoded as "security": []).
	Security *[]map[string][]any `json:"security,omitempty"`
	// Subjects are the NATS subjects the handler calls, for the map of
	// docs/architecture.md ("Where things are"); a test checks them
	// against the handler's code. Not served: clients need not know.
	Subjects []string `json:"-"`
}

// Parameter is a path, query or header parameter.
type Parameter struct {
	Name        string  `json:"name"`
	In          string  `json:"in"`
	Description string  `json:"description,omitempty"`
	Required    bool    `json:"required,omitempty"`
	Schema      *Schema `json:"schema"`
}

// RequestBody is an operation's body.
type RequestBody struct {
	Description string               `json:"description,omitempty"`
	Required    bool                 `json:"required,omitempty"`
	Content     map[string]MediaType `json:"content"`
}

// MediaType is one content type of a body.
type MediaType struct {
	Schema *Schema `json:"schema"`
	// ItemSchema describes each event of a text/event-stream body, parsed
	// into {event, id, data}: OpenAPI 3.2's itemSchema, under an extension
	// name because this is a 3.1 document.
	ItemSchema *Schema `json:"x-itemSchema,omitempty"`
}

// Response is a response or a reference to a shared one.
type Response struct {
	Ref         string               `json:"$ref,omitempty"`
	Description string               `json:"description,omitempty"`
	Headers     map[string]*Header   `json:"headers,omitempty"`
	Content     map[string]MediaType `json:"content,omitempty"`
}

// Header is a response header.
type Header struct {
	Description string  `json:"description,omitempty"`
	Schema      *Schema `json:"schema"`
}

// Components holds the shared schemas, responses and security schemes.
type Components struct {
	Schemas         map[string]*Schema        `json:"schemas"`
	Responses       map[string]*Response      `json:"responses"`
	SecuritySchemes map[string]SecurityScheme `json:"securitySchemes"`
}

// SecurityScheme is an authentication scheme.
type SecurityScheme struct {
	Type        string `json:"type"`
	Scheme      string `json:"scheme,omitempty"`
	Description string `json:"description,omitempty"`
}

// Schema is a JSON Schema (draft 2020-12, OpenAPI 3.1's dialect).
type Schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	Type                 any                `json:"type,omitempty"` // a name, or a list of names
	Format               string             `json:"format,omitempty"`
	Description          string             `json:"description,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Const                any                `json:"const,omitempty"`
	OneOf                []*Schema          `json:"oneOf,omitempty"`
	AnyOf                []*Schema          `json:"anyOf,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	MinLength            *int               `json:"minLength,omitempty"`
	MaxLength            *int               `json:"maxLength,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	Default              any                `json:"default,omitempty"`
	Examples             []any              `json:"examples,omitempty"`
}

// Route is one method and path of the description, in chi's pattern
// syntax (which OpenAPI shares for path parameters: {id}).
type Route struct {
	Method string
	Path   string
}

// Routes lists every method and path the description names, sorted.
func Routes() []Route {
	var out []Route
	for path, item := range Build().Paths {
		for method := range item {
			out = append(out, Route{Method: strings.ToUpper(method), Path: path})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// encoded is the document as served, built once: it never changes while
// the process runs.
var encoded = sync.OnceValue(func() []byte {
	b, err := json.MarshalIndent(Build(), "", "  ")
	if err != nil {
		// Build only holds plain values: failing to encode them is a bug
		// the package's tests catch.
		panic("openapi: encoding the description: " + err.Error())
	}
	return append(b, '\n')
})

// JSON is the encoded description.
func JSON() []byte { return encoded() }

// Handler serves the description (GET /api/openapi.json).
func Handler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(JSON())
}

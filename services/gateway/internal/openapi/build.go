package openapi

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// op is one row of the route table (routes.go): what a handler accepts and
// answers. build turns it into an Operation and adds the responses every
// route of its kind shares.
type op struct {
	method, path string
	id, tag      string
	summary      string
	desc         string
	params       []Parameter
	// body is the JSON request body. Bodies are never required: an empty
	// body is {} (DESIGN §9).
	body *Schema
	// status is the success status (default 200); okType its content type
	// (default application/json); ok its schema and okDesc its description.
	status int
	okType string
	ok     *Schema
	okDesc string
	// headers are the success response's headers.
	headers map[string]*Header
	// stream names the event catalogue of an SSE response ("ChatEvent",
	// "AgentRunEvent").
	stream string
	// errs are the route's own error statuses; build adds the shared ones.
	errs []int
	// responses are responses of the route's own, by status.
	responses map[int]*Response
	// subjects are the bus subjects the handler calls (Operation.Subjects).
	subjects []string
	// public routes need no token.
	public bool
	// busFree routes answer even while the gateway has lost its bus (no
	// 503 BUS_UNAVAILABLE from the bus check).
	busFree bool
}

// shared responses, by status.
var sharedResponses = map[int]string{
	http.StatusBadRequest:            "BadRequest",
	http.StatusUnauthorized:          "Unauthorized",
	http.StatusForbidden:             "Forbidden",
	http.StatusNotFound:              "NotFound",
	http.StatusConflict:              "Conflict",
	http.StatusRequestEntityTooLarge: "PayloadTooLarge",
	http.StatusUnsupportedMediaType:  "UnsupportedMediaType",
	http.StatusTooManyRequests:       "TooManyRequests",
	http.StatusInternalServerError:   "InternalError",
	http.StatusServiceUnavailable:    "ServiceUnavailable",
	http.StatusInsufficientStorage:   "InsufficientStorage",
}

func sharedResponseObjects() map[string]*Response {
	jsonOf := func(s *Schema) map[string]MediaType { return map[string]MediaType{"application/json": {Schema: s}} }
	return map[string]*Response{
		"BadRequest": {Description: "Invalid input, before anything happened: {error, code?} from the handler, or Fastify's shape for an unsafe ID or a body that is not JSON (code FST_ERR_CTP_INVALID_JSON_BODY).",
			Content: jsonOf(&Schema{AnyOf: []*Schema{ref("Error"), ref("RequestError")}})},
		"Unauthorized": {Description: "No or a wrong bearer token (code MISSING_TOKEN or INVALID_TOKEN).", Content: jsonOf(ref("Error"))},
		"Forbidden": {Description: "The request's Host is not one of the server's names (code HOST_NOT_ALLOWED, any route: DNS-rebinding protection, --allowed-hosts); " +
			"a state-changing request from a web page of another origin (code ORIGIN_NOT_ALLOWED, any method but GET/HEAD/OPTIONS: --allowed-origins); " +
			"on a team server also a role that may not do this (code VIEWER_READ_ONLY or FORBIDDEN).", Content: jsonOf(ref("Error"))},
		"NotFound": {Description: "Unknown resource; on a team server also anything outside the user's teams.", Content: jsonOf(ref("Error"))},
		"Conflict": {Description: "The resource is in a state that does not allow this (e.g. SESSION_BUSY, already decided).", Content: jsonOf(ref("Error"))},
		"PayloadTooLarge": {Description: "The body is over the limit (1 MiB), code FST_ERR_CTP_BODY_TOO_LARGE.",
			Content: jsonOf(ref("RequestError"))},
		"UnsupportedMediaType": {Description: "A Content-Type that is not JSON, or a body without one (code FST_ERR_CTP_INVALID_MEDIA_TYPE; any method but GET/HEAD/OPTIONS, before any route).",
			Content: jsonOf(ref("RequestError"))},
		"TooManyRequests": {Description: "Rate limited (on by default with --auth=required).", Headers: map[string]*Header{
			"Retry-After":           {Description: "seconds", Schema: integer()},
			"X-RateLimit-Limit":     {Schema: integer()},
			"X-RateLimit-Remaining": {Schema: integer()},
		}, Content: jsonOf(ref("RateLimited"))},
		"InternalError": {Description: "Anything unexpected; logged, never detailed.", Content: jsonOf(ref("Error"))},
		"ServiceUnavailable": {Description: "Try again in a moment: the gateway has lost its bus (code BUS_UNAVAILABLE, any route but /health and /metrics), " +
			"no instance of the service the route needs answered (NO_RUNNER, RUNNER_BUSY where one applies), or the database is down (STORE_UNAVAILABLE).", Content: jsonOf(ref("Error"))},
		"InsufficientStorage": {Description: "A store is out of disk space (code STORAGE_FULL): nothing was written; reads still work.", Content: jsonOf(ref("Error"))},
	}
}

// Build returns the description. Each call builds a new document.
func Build() *Document {
	rf := reflector{refs: map[reflect.Type]string{}}
	for name, t := range reflected {
		rf.refs[t] = name
	}
	schemas := handSchemas()
	for name, s := range eventSchemas() {
		mustAdd(schemas, name, s)
	}
	for name, t := range reflected {
		// A type's own component is its expansion, not a $ref to itself.
		delete(rf.refs, t)
		s := rf.schema(t)
		rf.refs[t] = name
		if edit, ok := edits[name]; ok {
			edit(s)
		}
		mustAdd(schemas, name, s)
	}
	doc := &Document{
		OpenAPI:           "3.1.0",
		JSONSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
		Info: Info{
			Title:   "Waggle core HTTP API",
			Version: "1",
			Description: "The gateway's routes (docs/api.md). Errors are {\"error\", \"code\"?}; unknown routes are 404 {\"error\":\"Not found\"}. " +
				"Locally, loopback clients are trusted and others send the bearer token GET /health reports; with --auth=required every request carries a user token. " +
				"Event streams (text/event-stream) are described per event in x-itemSchema (OpenAPI 3.2's itemSchema) and the ChatEvent / AgentRunEvent schemas.",
		},
		Tags: tags,
		// Either no credentials (a loopback client of a local gateway) or a
		// bearer token.
		Security: []map[string][]any{{}, {"bearerAuth": {}}},
		Paths:    map[string]PathItem{},
		Components: Components{
			Schemas:   schemas,
			Responses: sharedResponseObjects(),
			SecuritySchemes: map[string]SecurityScheme{"bearerAuth": {Type: "http", Scheme: "bearer",
				Description: "Local mode: the wsToken of GET /health (non-loopback clients only). --auth=required: a user token (POST /api/tokens)."}},
		},
	}
	for _, o := range routes() {
		addOperation(doc, o)
	}
	return doc
}

func mustAdd(m map[string]*Schema, name string, s *Schema) {
	if _, dup := m[name]; dup {
		panic("openapi: two schemas named " + name)
	}
	m[name] = s
}

func addOperation(doc *Document, o op) {
	item := doc.Paths[o.path]
	if item == nil {
		item = PathItem{}
		doc.Paths[o.path] = item
	}
	method := strings.ToLower(o.method)
	if _, dup := item[method]; dup {
		panic(fmt.Sprintf("openapi: %s %s described twice", o.method, o.path))
	}
	out := &Operation{OperationID: o.id, Tags: []string{o.tag}, Summary: o.summary, Description: o.desc,
		Parameters: o.params, Responses: map[string]*Response{}, Subjects: o.subjects}
	if o.public {
		out.Security = &[]map[string][]any{}
	}
	status := o.status
	if status == 0 {
		status = http.StatusOK
	}
	okDesc := o.okDesc
	if okDesc == "" {
		okDesc = http.StatusText(status)
	}
	ok := &Response{Description: okDesc, Headers: o.headers}
	switch {
	case o.stream != "":
		ok.Content = map[string]MediaType{"text/event-stream": {Schema: ref(o.stream + "Stream"), ItemSchema: ref(o.stream)}}
	case o.ok != nil:
		ct := o.okType
		if ct == "" {
			ct = "application/json"
		}
		ok.Content = map[string]MediaType{ct: {Schema: o.ok}}
	}
	out.Responses[strconv.Itoa(status)] = ok

	for code, r := range o.responses {
		out.Responses[strconv.Itoa(code)] = r
	}
	errs := append([]int(nil), o.errs...)
	if o.body != nil {
		out.RequestBody = &RequestBody{Description: "JSON object; an empty body is {}.",
			Content: map[string]MediaType{"application/json": {Schema: o.body}}}
		errs = append(errs, http.StatusBadRequest, http.StatusRequestEntityTooLarge)
	}
	if o.method != http.MethodGet && o.method != http.MethodHead {
		// The media-type rule runs before every state-changing route.
		errs = append(errs, http.StatusUnsupportedMediaType)
	}
	// The Host check runs before everything, /health included.
	errs = append(errs, http.StatusForbidden)
	if !o.public {
		errs = append(errs, http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusInternalServerError)
	}
	if len(o.subjects) > 0 || !o.busFree {
		errs = append(errs, http.StatusServiceUnavailable)
	}
	if len(o.subjects) > 0 && o.method != http.MethodGet {
		// A write that reaches a store may find its disk full.
		errs = append(errs, http.StatusInsufficientStorage)
	}
	for _, code := range errs {
		key := strconv.Itoa(code)
		if _, set := out.Responses[key]; set {
			continue
		}
		name, known := sharedResponses[code]
		if !known {
			panic(fmt.Sprintf("openapi: %s %s: no shared response for %d", o.method, o.path, code))
		}
		out.Responses[key] = &Response{Ref: "#/components/responses/" + name}
	}
	item[method] = out
}

// Parameter helpers.

func pathParam(name, desc string) Parameter {
	return Parameter{Name: name, In: "path", Required: true, Description: desc, Schema: safeID()}
}

func query(name, desc string, s *Schema) Parameter {
	return Parameter{Name: name, In: "query", Description: desc, Schema: s}
}

func queryID(name, desc string) Parameter { return query(name, desc, safeID()) }

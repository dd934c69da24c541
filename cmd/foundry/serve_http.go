package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/invoke"
	"github.com/foundry-build/foundry/engine/verdict"
	"github.com/foundry-build/foundry/registry"
)

// maxCallInput bounds a call's request body, as a case file is bounded.
const maxCallInput = verdict.MaxCaseBytes

// problemBase starts the type URI of every problem serve answers (RFC 9457).
const problemBase = "https://foundry.dev/problems/"

// serveHandler answers foundry serve's HTTP API (spec/serve.md).
type serveHandler struct {
	mux    *http.ServeMux
	caps   map[string]invoke.Capability
	run    func(context.Context, invoke.Capability, invoke.Input) (*invoke.Result, error) // an Invoker's Run
	doc    map[string]any                                                                 // the OpenAPI document but its servers
	logger *log.Logger
	slots  chan struct{} // calls running at once
	calls  sync.WaitGroup
	// report reads a run's summary (GET /runs/RUN): runReportOf on serve's workspace.
	report func(ctx context.Context, run string) (*runReport, error)
	// bodies and checks are the memory budgets of inputs (serve_budget.go).
	bodies, checks *memoryBudget
}

func newServeHandler(project string, caps []invoke.Capability, run func(context.Context, invoke.Capability, invoke.Input) (*invoke.Result, error), logger *log.Logger) (*serveHandler, error) {
	doc, err := openAPIDocument(project, caps)
	if err != nil {
		return nil, err
	}
	h := &serveHandler{mux: http.NewServeMux(), caps: map[string]invoke.Capability{}, run: run, doc: doc, logger: logger,
		slots:  make(chan struct{}, max(1, runtime.NumCPU())),
		bodies: newMemoryBudget(bodyMemory), checks: newMemoryBudget(checkMemory)}
	for _, c := range caps {
		h.caps[c.Name] = c
	}
	h.mux.HandleFunc("/openapi.json", h.openAPI)
	h.mux.HandleFunc("/capabilities/{name}", h.call)
	h.mux.HandleFunc("GET /runs/{run}", h.runSummary)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusNotFound, "not-found", "no such resource", r.URL.Path+": the API is POST /capabilities/NAME and GET /openapi.json")
	})
	return h, nil
}

// runSummary answers GET /runs/RUN ("latest" for the newest run) with the run's summary,
// as 'foundry report -json' writes it.
func (h *serveHandler) runSummary(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	if id == "latest" {
		id = ""
	} else if !runIDPattern().MatchString(id) {
		problem(w, http.StatusNotFound, "not-found", "no such run", id+" is not a run ID")
		return
	}
	if h.report == nil {
		problem(w, http.StatusNotFound, "not-found", "no such run", "this server reads no runs")
		return
	}
	rep, err := h.report(r.Context(), id)
	if err != nil {
		problem(w, http.StatusNotFound, "not-found", "no such run", err.Error())
		return
	}
	writeJSONBody(w, http.StatusOK, "application/json", rep)
}

// runIDPattern is what a run ID may be (the MCP tools' pattern).
var runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9A-Za-z-]{1,64}$`) })

func (h *serveHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// wait waits for the calls in flight.
func (h *serveHandler) wait() { h.calls.Wait() }

func (h *serveHandler) openAPI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		problem(w, http.StatusMethodNotAllowed, "method-not-allowed", "method not allowed", r.Method+" /openapi.json: use GET")
		return
	}
	// The servers are this server as the client reached it (its Host), so that a client
	// generated from the document calls it there.
	doc := maps.Clone(h.doc)
	doc["servers"] = []any{map[string]any{"url": "http://" + r.Host, "description": "this foundry serve"}}
	b, err := encodeDocument(doc)
	if err != nil {
		problem(w, http.StatusInternalServerError, "call-failed", "the document could not be written", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// call runs one capability on the request body and maps the outcome to a status: the
// output (200), a declared error (422), or a problem saying whose fault it was.
func (h *serveHandler) call(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	c, ok := h.caps[name]
	if !ok {
		problem(w, http.StatusNotFound, "no-such-capability", "no such capability",
			fmt.Sprintf("%q is not an admitted capability of this project (GET /openapi.json lists them)", name))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		problem(w, http.StatusMethodNotAllowed, "method-not-allowed", "method not allowed", r.Method+" "+r.URL.Path+": use POST with the input as the body")
		return
	}
	// The body is read as JSON whatever its Content-Type says (curl --data sends a form's),
	// under the memory budgets of serve_budget.go.
	if r.ContentLength > maxCallInput {
		problem(w, http.StatusRequestEntityTooLarge, "input-too-large", "the input is too large", fmt.Sprintf("%d bytes; a call takes at most %d", r.ContentLength, maxCallInput))
		return
	}
	want := int64(maxCallInput)
	if r.ContentLength >= 0 {
		want = r.ContentLength
	}
	held := h.bodies.reserve(r.Context(), 2*want)
	if held == nil {
		busy(w, r)
		return
	}
	defer held.release()
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	var buf bytes.Buffer
	if r.ContentLength >= 0 { // read into its size at once, not through doublings
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxCallInput))
	body := buf.Bytes()
	rc.SetReadDeadline(time.Time{})
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		problem(w, http.StatusRequestEntityTooLarge, "input-too-large", "the input is too large", fmt.Sprintf("a call takes at most %d bytes", maxCallInput))
		return
	}
	if err != nil {
		problem(w, http.StatusBadRequest, "unreadable-input", "the input could not be read", "the body could not be read to its end")
		return
	}
	held.shrink(2 * int64(len(body)))
	in, err := h.check(r, c, body)
	if err != nil {
		var inputErr *invoke.InputError
		switch {
		case errors.As(err, &inputErr) && inputErr.TooLarge:
			problem(w, http.StatusRequestEntityTooLarge, "input-too-large", "the input is too large", inputErr.Reason)
		case errors.As(err, &inputErr):
			problem(w, http.StatusBadRequest, "input-invalid", "the input violates the capability's input schema", inputErr.Reason)
		default:
			busy(w, r)
		}
		return
	}
	h.calls.Add(1)
	defer h.calls.Done()
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	case <-r.Context().Done():
		problem(w, http.StatusServiceUnavailable, "stopping", "the call was cancelled", "the server is stopping or the client went away")
		return
	}
	started := time.Now()
	res, err := h.run(r.Context(), c, in)
	status := h.answer(w, r, c, res, err)
	h.logger.Printf("POST /capabilities/%s %d %v", name, status, time.Since(started).Round(time.Millisecond))
}

// errBusy is a check that could not get its memory in time.
var errBusy = errors.New("busy")

// check checks a call's input under the check budget: its values are counted first (a
// scan that decodes nothing), so that decoding and validating it is paid for before it
// starts. An *invoke.InputError says why the input is refused; errBusy that there was no
// room in time.
func (h *serveHandler) check(r *http.Request, c invoke.Capability, body []byte) (invoke.Input, error) {
	values, err := invoke.InputValues(body)
	if err != nil {
		return invoke.Input{}, err
	}
	held := h.checks.reserve(r.Context(), checkCost(len(body), values))
	if held == nil {
		return invoke.Input{}, errBusy
	}
	defer held.release()
	return invoke.CheckInput(c, body)
}

// busy answers 503 to a call that found no room in serve's memory budget in time.
func busy(w http.ResponseWriter, r *http.Request) {
	if r.Context().Err() != nil {
		problem(w, http.StatusServiceUnavailable, "stopping", "the call was cancelled", "the server is stopping or the client went away")
		return
	}
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusServiceUnavailable, "busy", "the server is busy",
		fmt.Sprintf("other calls' inputs hold the memory this one needs; retry later (the server waited %v)", budgetWait))
}

// answer writes a call's outcome and returns its status.
func (h *serveHandler) answer(w http.ResponseWriter, r *http.Request, c invoke.Capability, res *invoke.Result, err error) int {
	var inputErr *invoke.InputError
	var outputErr *invoke.OutputError
	var quarantined *registry.QuarantinedError
	switch {
	case err == nil && res.Error != "":
		writeJSONBody(w, http.StatusUnprocessableEntity, "application/json",
			map[string]any{"error": res.Error, "exit_code": res.ExitCode, "stderr": res.Stderr})
		return http.StatusUnprocessableEntity
	case err == nil:
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(res.Output, '\n'))
		return http.StatusOK
	case errors.As(err, &inputErr): // checked before the run: not reached
		return problem(w, http.StatusBadRequest, "input-invalid", "the input violates the capability's input schema", inputErr.Reason)
	case errors.As(err, &outputErr):
		return problem(w, http.StatusBadGateway, "contract-broken", c.Address+" broke its contract", outputErr.Reason)
	case errors.As(err, &quarantined):
		return problem(w, http.StatusForbidden, "quarantined", c.Address+" is quarantined", err.Error())
	case r.Context().Err() != nil:
		return problem(w, http.StatusServiceUnavailable, "stopping", "the call was cancelled", "the server is stopping or the client went away: "+err.Error())
	default:
		h.logger.Printf("%s: %v", c.Address, err)
		return problem(w, http.StatusInternalServerError, "call-failed", c.Address+" could not be run", err.Error())
	}
}

// problem answers an RFC 9457 problem document and returns the status.
func problem(w http.ResponseWriter, status int, kind, title, detail string) int {
	writeJSONBody(w, status, "application/problem+json",
		map[string]any{"type": problemBase + kind, "title": title, "status": status, "detail": detail})
	return status
}

func writeJSONBody(w http.ResponseWriter, status int, contentType string, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// componentName is a capability's key among the document's component schemas, which
// OpenAPI restricts to ^[a-zA-Z0-9._-]+$.
var componentName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9._-]+$`) })

// openAPIDocument is the OpenAPI 3.1 document of the capabilities served: one POST
// operation each, its request and 200 response schemas the contract's schemas exactly as
// stored (JSON Schema 2020-12, which OpenAPI 3.1 takes as is), in components.schemas.
func openAPIDocument(project string, caps []invoke.Capability) (map[string]any, error) {
	paths := map[string]any{}
	schemas := map[string]any{"Problem": map[string]any{
		"type":        "object",
		"description": "An RFC 9457 problem: the call did not reach a result under the contract (400: nothing ran; 502: the capability broke its contract; 500: it could not be run).",
		"properties": map[string]any{"type": map[string]any{"type": "string", "format": "uri"}, "title": map[string]any{"type": "string"},
			"status": map[string]any{"type": "integer"}, "detail": map[string]any{"type": "string"}},
		"required": []string{"type", "title", "status", "detail"},
	}}
	problemRef := func(why string) map[string]any {
		return map[string]any{"description": why, "content": map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}}}
	}
	var served []string
	for _, c := range caps {
		key := c.Name
		if !componentName().MatchString(key) {
			key = "capability-" + c.Contract.Hex()[:16]
		}
		in, err := embeddedSchema(c.InputSchema, "urn:foundry:capability:"+c.Name+":input")
		if err != nil {
			return nil, fmt.Errorf("%s: its input schema: %w", c.Address, err)
		}
		out, err := embeddedSchema(c.OutputSchema, "urn:foundry:capability:"+c.Name+":output")
		if err != nil {
			return nil, fmt.Errorf("%s: its output schema: %w", c.Address, err)
		}
		schemas[key+".input"], schemas[key+".output"] = in, out
		responses := map[string]any{
			"200": map[string]any{"description": "The capability's output, valid under its output schema.",
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + key + ".output"}}}},
			"400": problemRef("The input is not JSON or violates the input schema (the validator's message is the detail); nothing ran."),
			"403": problemRef("The admitted version is quarantined."),
			"413": problemRef(fmt.Sprintf("The input is larger than 16 MiB, or holds more than %d JSON values.", invoke.MaxInputValues)),
			"500": problemRef("The capability could not be run (registry, sandbox or executor failure)."),
			"502": problemRef("The capability broke its contract: output not JSON or not valid under the output schema, an undeclared exit code, killed at a limit."),
			"503": problemRef("The server is stopping, or busy: other calls' inputs hold the memory this one needs (retry after the Retry-After header's seconds)."),
		}
		if len(c.Errors) > 0 {
			var names []string
			for n := range c.Errors {
				names = append(names, n)
			}
			sort.Strings(names)
			var branches []any
			var desc []string
			for _, n := range names {
				branches = append(branches, map[string]any{"properties": map[string]any{"error": map[string]any{"const": n}, "exit_code": map[string]any{"const": c.Errors[n]}}})
				desc = append(desc, fmt.Sprintf("%s (exit %d)", n, c.Errors[n]))
			}
			responses["422"] = map[string]any{
				"description": "The capability exited with a declared error: " + strings.Join(desc, ", ") + ".",
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
					"type": "object", "required": []string{"error", "exit_code"},
					"properties": map[string]any{"error": map[string]any{"type": "string"}, "exit_code": map[string]any{"type": "integer"},
						"stderr": map[string]any{"type": "string", "description": "the end of what it wrote on stderr"}},
					"oneOf": branches,
				}}},
			}
		}
		summary := c.Summary
		if summary == "" {
			summary = c.Address
		}
		paths["/capabilities/"+url.PathEscape(c.Name)] = map[string]any{"post": map[string]any{
			"operationId":          c.Name,
			"summary":              summary,
			"description":          fmt.Sprintf("Runs %s once in a fresh sandbox: the admitted version %s (files %s) of contract %s. The input and the output are validated in full against the contract's schemas.", c.Address, c.Ref, c.Tree, c.Contract),
			"requestBody":          map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + key + ".input"}}}},
			"responses":            responses,
			"x-foundry-capability": map[string]any{"address": c.Address, "contract": c.Contract, "ref": c.Ref, "tree": c.Tree},
		}}
		served = append(served, c.Ref)
	}
	version, _, err := digest.Of(served)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{
		"openapi":           "3.1.1",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": map[string]any{
			"title":       "Capabilities of " + project,
			"version":     version.Short(),
			"description": "The admitted capabilities of Foundry project " + project + ", one operation each (foundry serve; spec/interfaces.md). The version names what is served: it changes exactly when another admitted version is.",
		},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
	if _, err := encodeDocument(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// encodeDocument writes the OpenAPI document as served: indented, "<" and ">" as written.
func encodeDocument(doc map[string]any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// embeddedSchema is a contract's schema as the document embeds it: exactly as stored (its
// numbers exactly as written); none is {} (any value). A schema with "#…" references and
// no $id of its own gets id as its $id, so that they still resolve within it rather than
// against the OpenAPI document.
func embeddedSchema(s json.RawMessage, id string) (json.RawMessage, error) {
	if len(s) == 0 {
		return json.RawMessage(`{}`), nil
	}
	v, err := verdict.DecodeJSON(s)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok || m["$id"] != nil || !hasLocalRef(m) {
		return s, nil
	}
	idJSON, _ := json.Marshal(id)
	rest := bytes.TrimPrefix(bytes.TrimSpace(s), []byte("{"))
	sep := ","
	if bytes.HasPrefix(bytes.TrimSpace(rest), []byte("}")) {
		sep = ""
	}
	return json.RawMessage(`{"$id":` + string(idJSON) + sep + string(rest)), nil
}

func hasLocalRef(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if r, ok := v["$ref"].(string); ok && strings.HasPrefix(r, "#") {
			return true
		}
		for _, sub := range v {
			if hasLocalRef(sub) {
				return true
			}
		}
	case []any:
		for _, sub := range v {
			if hasLocalRef(sub) {
				return true
			}
		}
	}
	return false
}
